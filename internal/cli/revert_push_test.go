package cli_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/githubtest"
	"github.com/cuecast/cuecast/internal/gittest"
)

// revertRepo is a repository whose last commit, returned, changes
// payments/checkout/checkout.cue from a: 1 to a: 2, with an untracked file
// beside it that no revert may touch.
func revertRepo(t *testing.T) (*gittest.Repo, string) {
	t.Helper()
	repo := gittest.New(t)
	repo.CommitFiles("base", map[string]string{"payments/checkout/checkout.cue": "a: 1\n", "payments/other/other.cue": "b: 1\n"})
	target := repo.CommitFiles("checkout a=2", map[string]string{"payments/checkout/checkout.cue": "a: 2\n"})
	repo.Write(map[string]string{"notes.txt": "mine\n"})
	return repo, target
}

// assertNothingLeft fails t unless repo is on main at head, has no
// branch of a revert, its work tree and index are as head has them and
// the untracked file is still there.
func assertNothingLeft(t *testing.T, repo *gittest.Repo, head, when string) {
	t.Helper()
	h, err := repo.Git.Head()
	if err != nil {
		t.Fatal(err)
	}
	if h.Name().Short() != "main" || h.Hash().String() != head {
		t.Errorf("%s: HEAD %s at %s, want main at %s", when, h.Name().Short(), cuecast.ShortCommit(h.Hash().String()), cuecast.ShortCommit(head))
	}
	branches, err := repo.Git.Branches()
	if err != nil {
		t.Fatal(err)
	}
	_ = branches.ForEach(func(b *plumbing.Reference) error {
		if b.Name().Short() != "main" {
			t.Errorf("%s: branch %s left behind", when, b.Name().Short())
		}
		return nil
	})
	st := repo.Status()
	for name, s := range st {
		if name != "notes.txt" || s.Worktree != git.Untracked {
			t.Errorf("%s: %s is %c%c, want the work tree as main has it", when, name, s.Staging, s.Worktree)
		}
	}
	if b, err := os.ReadFile(filepath.Join(repo.Dir, "notes.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("%s: untracked notes.txt: %q, %v; want it untouched", when, b, err)
	}
}

func readCheckout(t *testing.T, repo *gittest.Repo) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repo.Dir, "payments/checkout/checkout.cue"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var revertIdentity = map[string]string{"GIT_AUTHOR_NAME": "Ann", "GIT_AUTHOR_EMAIL": "ann@example.com"}

// TestRevertPushRefused: when the remote refuses the push (it moved on),
// revert --push takes its commit back, says nothing was committed, and the
// same command succeeds once the branch is pulled. It used to leave the
// revert on main, so the retry refused, pointing at that revert.
func TestRevertPushRefused(t *testing.T) {
	t.Parallel()
	repo, target := revertRepo(t)
	bare := repo.Bare()
	repo.PushElsewhere(bare, "other b=2", map[string]string{"payments/other/other.cue": "b: 2\n"})
	head := repo.Head()
	ctx := t.Context()

	code, out, errOut := runEnv(ctx, revertIdentity, "revert", target, "--repo", repo.Dir, "--push")
	if code == 0 || !strings.Contains(errOut.String(), "push main to origin") || !strings.Contains(errOut.String(), "nothing was committed locally") {
		t.Errorf("revert --push to a remote that moved on: exit %d, %q; want a failure saying the push failed and nothing was committed", code, errOut)
	}
	if strings.Contains(out.String(), "created") {
		t.Errorf("stdout of the failed revert: %q, want no commit announced", out)
	}
	assertNothingLeft(t, repo, head, "after the refused push")
	if got := readCheckout(t, repo); got != "a: 2\n" {
		t.Errorf("checkout.cue after the refused push: %q, want a: 2", got)
	}

	wt, err := repo.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Pull(&git.PullOptions{RemoteName: "origin"}); err != nil {
		t.Fatalf("pull: %v", err)
	}
	code, out, errOut = runEnv(ctx, revertIdentity, "revert", target, "--repo", repo.Dir, "--push")
	if code != 0 || !strings.Contains(out.String(), "pushed main to origin") {
		t.Fatalf("revert --push after pulling: exit %d, %q %q", code, out, errOut)
	}
	if got := readCheckout(t, repo); got != "a: 1\n" {
		t.Errorf("checkout.cue after the revert: %q, want a: 1", got)
	}
	remote, err := git.PlainOpen(bare)
	if err != nil {
		t.Fatal(err)
	}
	if ref, err := remote.Reference(plumbing.NewBranchReferenceName("main"), true); err != nil || ref.Hash().String() != repo.Head() {
		t.Errorf("remote main: %v %v, want %s", ref, err, repo.Head())
	}
}

// TestRevertPRRefused: revert --github-pr whose push fails, then whose
// pull request fails after the push, leaves nothing behind either time:
// no local branch, main where it was, and the pushed branch deleted from
// the remote again; the retry opens the pull request.
func TestRevertPRRefused(t *testing.T) {
	t.Parallel()
	repo, target := revertRepo(t)
	bare := repo.Bare()
	head := repo.Head()
	branch := "cuecast/revert-" + cuecast.ShortCommit(target)
	setOrigin := func(url string) {
		t.Helper()
		if err := repo.Git.DeleteRemote("origin"); err != nil {
			t.Fatal(err)
		}
		if _, err := repo.Git.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{url}}); err != nil {
			t.Fatal(err)
		}
	}
	setOrigin(filepath.Join(t.TempDir(), "missing"))
	gh := githubtest.New(t)
	env := map[string]string{"GITHUB_TOKEN": githubtest.Token}
	for k, v := range revertIdentity {
		env[k] = v
	}
	args := []string{"revert", target, "--repo", repo.Dir, "--github-pr", "--github-repo", "acme/configs", "--github-api-url", gh.URL}
	ctx := t.Context()

	code, _, errOut := runEnv(ctx, env, args...)
	if code == 0 || !strings.Contains(errOut.String(), "push "+branch+" to origin") || !strings.Contains(errOut.String(), "nothing was committed locally") {
		t.Errorf("revert --github-pr to a remote that is not there: exit %d, %q; want a failure saying the push failed and nothing was committed", code, errOut)
	}
	assertNothingLeft(t, repo, head, "after the failed push")
	if n := len(gh.Requests()); n != 0 {
		t.Errorf("%d requests to GitHub after the failed push, want none", n)
	}

	setOrigin(bare)
	gh.Fail(githubtest.CreatePull, http.StatusBadGateway, nil, "Server Error")
	code, _, errOut = runEnv(ctx, env, args...)
	if code == 0 || !strings.Contains(errOut.String(), "open pull request") || !strings.Contains(errOut.String(), branch+" was deleted from origin again") ||
		!strings.Contains(errOut.String(), "nothing was committed locally") {
		t.Errorf("revert --github-pr whose pull request fails: exit %d, %q; want a failure naming the branch, deleted again", code, errOut)
	}
	assertNothingLeft(t, repo, head, "after the failed pull request")
	remote, err := git.PlainOpen(bare)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := remote.Reference(plumbing.NewBranchReferenceName(branch), false); err == nil {
		t.Errorf("branch %s left on the remote after the failed pull request", branch)
	}

	code, out, errOut := runEnv(ctx, env, args...)
	if code != 0 || !strings.Contains(out.String(), "opened pull request #1") {
		t.Fatalf("revert --github-pr, the retry: exit %d, %q %q", code, out, errOut)
	}
	if p := gh.Pulls()[1]; p.Head != branch || p.Base != "main" {
		t.Errorf("pull request: %+v, want %s into main", p, branch)
	}
	ref, err := remote.Reference(plumbing.NewBranchReferenceName(branch), false)
	if err != nil {
		t.Fatalf("branch %s not pushed: %v", branch, err)
	}
	if c, err := remote.CommitObject(ref.Hash()); err != nil || c.ParentHashes[0].String() != head {
		t.Errorf("pushed %s: %v, want the revert of main's head", branch, err)
	}
	if h, _ := repo.Git.Head(); h.Name().Short() != "main" || h.Hash().String() != head || readCheckout(t, repo) != "a: 2\n" {
		t.Errorf("after --github-pr: HEAD %s at %s, want main at %s with its content", h.Name().Short(), h.Hash(), head)
	}
}
