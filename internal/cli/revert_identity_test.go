package cli_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
)

// TestRevertChecksBeforeChanging: a revert that cannot finish refuses before
// it commits or creates a branch, so the retry after fixing the cause works.
func TestRevertChecksBeforeChanging(t *testing.T) {
	noIdentity := t.TempDir()
	t.Setenv("HOME", noIdentity)
	t.Setenv("XDG_CONFIG_HOME", noIdentity)
	repo := gittest.New(t)
	repo.CommitFiles("first", map[string]string{"payments/checkout/a.cue": "a: 1\n"})
	target := repo.CommitFiles("second", map[string]string{"payments/checkout/a.cue": "a: 2\n"})
	ctx := t.Context()

	code, _, errOut := runEnv(ctx, nil, "revert", target, "--repo", repo.Dir)
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "no Git identity") || !strings.Contains(errOut.String(), "git config --global user.name") {
		t.Errorf("revert without a Git identity: exit %d, %q; want 2 naming the missing identity and how to set it", code, errOut)
	}
	if repo.Head() != target {
		t.Fatal("a refused revert committed")
	}

	if err := os.WriteFile(filepath.Join(noIdentity, ".gitconfig"), []byte("[user]\n\tname = Ann\n\temail = ann@example.com\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, errOut = runEnv(ctx, nil, "revert", target, "--repo", repo.Dir, "--github-pr", "--github-repo", "acme/configs")
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "needs a GitHub token") {
		t.Errorf("revert --github-pr without a token: exit %d, %q; want 2 asking for GITHUB_TOKEN", code, errOut)
	}
	r, err := git.PlainOpen(repo.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Reference(plumbing.NewBranchReferenceName("cuecast/revert-"+cuecast.ShortCommit(target)), false); err == nil {
		t.Error("a refused --github-pr created its branch")
	}
	if repo.Head() != target {
		t.Error("a refused --github-pr committed")
	}

	code, out, errOut := runEnv(ctx, nil, "revert", target, "--repo", repo.Dir)
	if code != 0 {
		t.Fatalf("revert with an identity: exit %d, %q", code, errOut)
	}
	c, err := r.CommitObject(plumbing.NewHash(repo.Head()))
	if err != nil {
		t.Fatal(err)
	}
	if c.Author.Name != "Ann" || c.Author.Email != "ann@example.com" {
		t.Errorf("revert authored by %s <%s>, want Ann <ann@example.com> (%s)", c.Author.Name, c.Author.Email, out)
	}
}
