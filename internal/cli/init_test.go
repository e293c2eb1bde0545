package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast/internal/cli"
)

// TestInitPassesCheck: the repo cuecast init writes passes the pull-request
// check once committed, and a change to its example config is a valid
// change with its compiled diff.
func TestInitPassesCheck(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "configs")
	ctx := t.Context()
	if code, _, errOut := run(ctx, "init", dir, "--namespace", "payments", "--owner", "ann@example.com"); code != 0 {
		t.Fatalf("init: exit %d: %s", code, errOut)
	}
	r, err := git.PlainOpen(dir)
	if err != nil {
		t.Fatalf("init made no Git repository: %v", err)
	}
	commit := func(msg string) string {
		wt, err := r.Worktree()
		if err != nil {
			t.Fatal(err)
		}
		if err := wt.AddGlob("."); err != nil {
			t.Fatal(err)
		}
		h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "Ann", Email: "ann@example.com", When: time.Now()}})
		if err != nil {
			t.Fatal(err)
		}
		return h.String()
	}
	base := commit("cuecast init")
	example := filepath.Join(dir, "payments", "example", "example.cue")
	b, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(example, []byte(strings.Replace(string(b), `greeting: "hello"`, `greeting: "hello, world"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	head := commit("example: a longer greeting")
	code, out, errOut := run(ctx, "check", "--repo", dir, "--base", base, "--head", head)
	if code != cli.ExitOK || !strings.Contains(out.String(), "payments/example") || !strings.Contains(out.String(), "hello, world") {
		t.Errorf("check: exit %d\n%s%s\nwant 0 with payments/example's diff", code, out, errOut)
	}
}
