package ci_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
)

// TestCheckSymlinkedFileTarget: a config reads a CUE file through a
// symlink; changing the target changes the config, and the check says so
// (it listed no config: the target's directory was no dependency).
func TestCheckSymlinkedFileTarget(t *testing.T) {
	r := gittest.New(t)
	r.Write(map[string]string{
		"cue.mod/module.cue": "module: \"example.com/s@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: web: owners: [\"team-web\"]\n",
		"shared/limits.cue":  "package site\n\nlimit: 1\n",
		"web/site/site.cue":  "package site\n\ntitle: \"x\"\n",
	})
	if err := os.Symlink("../../shared/limits.cue", filepath.Join(r.Dir, "web", "site", "limits.cue")); err != nil {
		t.Fatal(err)
	}
	base := r.Commit("base")
	r.Write(map[string]string{"shared/limits.cue": "package site\n\nlimit: 2\n"})
	head := r.Commit("limit 2")
	rep := check(t, r, base, head)
	if got := statuses(rep); !slices.Equal(got, []string{"web/site changed"}) {
		t.Fatalf("configs: %q, want web/site changed (errors %+v)", got, rep.Errors)
	}
	if got := diffPaths(rep.Configs[0]); !slices.Equal(got, []string{"changed limit 1 2"}) {
		t.Errorf("diff: %q, want limit 1 ▶ 2", got)
	}
}
