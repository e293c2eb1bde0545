package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDemoKeep: what --keep changes at the demo's end. Without it the
// closing hint says to run the demo with --keep (this run's repository is
// about to go) and the directory is removed; with it the hint names the
// kept repository and the demo says what it kept. demo.txtar runs the
// whole demo once, with --keep; this covers the branch that run does not
// take, without a second run of the demo.
func TestDemoKeep(t *testing.T) {
	for _, keep := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "cuecast-demo")
		repoDir := filepath.Join(dir, "repo")
		if err := os.MkdirAll(repoDir, 0o755); err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		d := &demo{out: &out, opts: &DemoOptions{Keep: keep}, dir: dir}
		d.explainHint(repoDir)
		d.cleanup()
		_, err := os.Stat(dir)
		if kept := err == nil; kept != keep {
			t.Errorf("keep=%v: directory kept=%v (stat: %v)", keep, kept, err)
		}
		want := []string{"explain one: run the demo with --keep, then ", " flags eval growth/flags new-checkout --ctx targetingKey=user-1 --repo <the directory it keeps>/repo\n"}
		if keep {
			want = []string{"explain one: ", " flags eval growth/flags new-checkout --ctx targetingKey=user-1 --repo " + repoDir + "\n", "Kept " + dir + ".\n"}
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("keep=%v: output has no %q:\n%s", keep, w, out.String())
			}
		}
		if !keep && strings.Contains(out.String(), "Kept") {
			t.Errorf("keep=false: output says it kept something:\n%s", out.String())
		}
	}
}
