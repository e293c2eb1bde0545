package mutator

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

// TestLandTakesCommitBack: when the work tree cannot follow the branch
// after it moved (a file made unwritable between the check and the
// write: here a directory where the file was, which root cannot write
// either), the branch is moved back to where it was, a file already
// written is restored, and the index is not touched: nothing changed.
func TestLandTakesCommitBack(t *testing.T) {
	t.Parallel()
	g := gittest.New(t)
	g.CommitFiles("base", map[string]string{"a/a.cue": "a: 1\n", "d/b.cue": "b: 1\n"})
	r, err := gitfs.Open(g.Dir)
	if err != nil {
		t.Fatal(err)
	}
	main := plumbing.NewBranchReferenceName("main")
	head, err := r.Reference(main, false)
	if err != nil {
		t.Fatal(err)
	}
	base, err := r.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	before := map[string][]byte{"a/a.cue": []byte("a: 1\n"), "d/b.cue": []byte("b: 1\n")}
	files := map[string][]byte{"a/a.cue": []byte("a: 2\n"), "d/b.cue": []byte("b: 2\n")}
	tree, err := writeTree(r.Storer, base.TreeHash, files)
	if err != nil {
		t.Fatal(err)
	}
	commit, err := writeCommit(r.Storer, &object.Commit{Message: "x", TreeHash: tree, ParentHashes: []plumbing.Hash{base.Hash}})
	if err != nil {
		t.Fatal(err)
	}
	g.Remove("d/b.cue")
	g.Write(map[string]string{"d/b.cue/in-the-way": "x"})
	index, err := os.ReadFile(filepath.Join(g.Dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}

	wt, err := checkedOut(r, main)
	if err != nil || wt == nil {
		t.Fatalf("main not checked out: %v", err)
	}
	il, err := lockIndex(r)
	if err != nil {
		t.Fatal(err)
	}
	err = land(r, wt, il, main, commit, head, files, before)
	il.release()
	if err == nil || !strings.Contains(err.Error(), "d/b.cue") || !strings.Contains(err.Error(), "taken back") {
		t.Errorf("land: %v, want an error naming d/b.cue and saying the commit was taken back", err)
	}
	if got := g.Head(); got != head.Hash().String() {
		t.Errorf("main is at %s, want %s as before", got, head.Hash())
	}
	if b, _ := os.ReadFile(filepath.Join(g.Dir, "a", "a.cue")); string(b) != "a: 1\n" {
		t.Errorf("a/a.cue is %q, want it restored", b)
	}
	if b, _ := os.ReadFile(filepath.Join(g.Dir, ".git", "index")); !bytes.Equal(b, index) {
		t.Error("the index changed")
	}
	if _, err := os.Stat(filepath.Join(g.Dir, ".git", indexLockName)); !os.IsNotExist(err) {
		t.Errorf("index.lock left behind: %v", err)
	}
	if _, err := os.Stat(filepath.Join(g.Dir, "d", "b.cue", "in-the-way")); err != nil {
		t.Errorf("what was in the way is gone: %v", err)
	}
}
