package ci_test

import (
	"testing"

	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/internal/gittest"
)

// TestCheckInLinkedWorktree: `cuecast check` run in a `git worktree`
// checkout finds the repository's branches and objects (it failed with
// "reference not found": go-git ignored the worktree's commondir).
func TestCheckInLinkedWorktree(t *testing.T) {
	r := gittest.New(t)
	r.CopyDir(example(t))
	base := r.Commit("base")
	r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"USD"`)
	head := r.Commit("usd")
	wt := r.LinkedWorktree("wt", head)
	rep, err := ci.Check(t.Context(), wt, ci.Options{Base: "main~1", Head: "main"})
	if err != nil {
		t.Fatalf("check in a linked worktree: %v", err)
	}
	if rep.Base.Commit != base || rep.Head.Commit != head || len(rep.Configs) != 1 {
		t.Errorf("got base %s head %s configs %+v; want %s, %s and payments/checkout", rep.Base.Commit, rep.Head.Commit, rep.Configs, base, head)
	}
	if got, err := ci.ResolveCommit(wt, "HEAD"); err != nil || got != head {
		t.Errorf("ResolveCommit(HEAD) in the worktree: %s, %v; want %s", got, err, head)
	}
}
