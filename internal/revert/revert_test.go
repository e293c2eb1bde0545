package revert_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/revert"
)

// tree is commit's files by name.
func tree(t *testing.T, r *gittest.Repo, commit plumbing.Hash) map[string]*object.File {
	t.Helper()
	c, err := r.Git.CommitObject(commit)
	if err != nil {
		t.Fatal(err)
	}
	it, err := c.Files()
	if err != nil {
		t.Fatal(err)
	}
	out := make(map[string]*object.File)
	if err := it.ForEach(func(f *object.File) error { out[f.Name] = f; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// files is each file's content in commit.
func files(t *testing.T, r *gittest.Repo, commit plumbing.Hash) map[string]string {
	t.Helper()
	out := make(map[string]string)
	for name, f := range tree(t, r, commit) {
		s, err := f.Contents()
		if err != nil {
			t.Fatal(err)
		}
		out[name] = s
	}
	return out
}

var author = &object.Signature{Name: "Oncall", Email: "oncall@example.com"}

// TestCommit: a revert restores, for each file the commit changed (edited,
// added, deleted), its first parent's
// content, and leaves every other file as the tip has it.
func TestCommit(t *testing.T) {
	r := gittest.New(t)
	before := r.CommitFiles("first", map[string]string{
		"a/x.cue": "x: 1\n", "a/y.cue": "y: 1\n", "b/z.cue": "z: 1\n", "c": "a file\n", "keep.cue": "k: 1\n",
	})
	r.Write(map[string]string{"a/x.cue": "x: 2\n", "a/new/n.cue": "n: 1\n"})
	r.Remove("b/z.cue", "c")
	bad := r.Commit("bad")
	later := r.CommitFiles("later", map[string]string{"keep.cue": "k: 2\n"})

	h, err := revert.Commit(r.Git, bad, author)
	if err != nil {
		t.Fatal(err)
	}
	want := files(t, r, plumbing.NewHash(before))
	want["keep.cue"] = files(t, r, plumbing.NewHash(later))["keep.cue"]
	if got := files(t, r, h); !maps.Equal(got, want) {
		t.Errorf("files after the revert:\n got %v\nwant %v", got, want)
	}
	c, err := r.Git.CommitObject(h)
	if err != nil {
		t.Fatal(err)
	}
	if c.NumParents() != 1 || c.ParentHashes[0].String() != later {
		t.Errorf("revert's parents = %v, want [%s]", c.ParentHashes, later)
	}
}

// TestUndo: Undo after Commit puts the branch back where it was and every
// file the revert touched (edited, added, deleted) as it was, and leaves an
// untracked file alone, as a revert whose push failed must.
func TestUndo(t *testing.T) {
	r := gittest.New(t)
	r.CommitFiles("first", map[string]string{"a/x.cue": "x: 1\n", "b/z.cue": "z: 1\n", "keep.cue": "k: 1\n"})
	r.Write(map[string]string{"a/x.cue": "x: 2\n", "a/new/n.cue": "n: 1\n"})
	r.Remove("b/z.cue")
	bad := r.Commit("bad")
	head := r.CommitFiles("later", map[string]string{"keep.cue": "k: 2\n"})
	r.Write(map[string]string{"notes.txt": "mine\n"})

	if _, err := revert.Commit(r.Git, bad, author); err != nil {
		t.Fatal(err)
	}
	if err := revert.Undo(r.Git, bad, plumbing.NewHash(head)); err != nil {
		t.Fatal(err)
	}
	if r.Head() != head {
		t.Errorf("main at %s after Undo, want %s", r.Head(), head)
	}
	st := r.Status()
	for name, s := range st {
		if name != "notes.txt" || s.Worktree != git.Untracked {
			t.Errorf("after Undo %s is %c%c, want the work tree and index as main has them", name, s.Staging, s.Worktree)
		}
	}
	if b, err := os.ReadFile(filepath.Join(r.Dir, "notes.txt")); err != nil || string(b) != "mine\n" {
		t.Errorf("untracked notes.txt after Undo: %q, %v; want it untouched", b, err)
	}
}

// TestCommitConflict: a later commit that touched a file the reverted
// commit changed makes the revert refuse with ErrConflict.
func TestCommitConflict(t *testing.T) {
	r := gittest.New(t)
	r.CommitFiles("first", map[string]string{"a/x.cue": "x: 1\n", "b/y.cue": "y: 1\n"})
	bad := r.CommitFiles("bad", map[string]string{"a/x.cue": "x: 2\n"})
	r.CommitFiles("later", map[string]string{"a/x.cue": "x: 3\n"})
	if _, err := revert.Commit(r.Git, bad, author); !errors.Is(err, revert.ErrConflict) {
		t.Fatalf("revert = %v, want ErrConflict", err)
	}
}

// TestCommitKeepsModes: a revert restores a file's mode with its content.
// A symlink came back as a regular file holding the link's target (120000
// became 100644), which then failed to compile, and a work-tree symlink at
// a path the revert rewrote was written through, to wherever it pointed.
func TestCommitKeepsModes(t *testing.T) {
	r := gittest.New(t)
	outside := filepath.Join(t.TempDir(), "outside")
	if err := os.WriteFile(outside, []byte("not the repo's\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.Write(map[string]string{"a/b.cue": "b: 1\n", "a/run.sh": "#!/bin/sh\n", "a/x.cue": "x: 1\n"})
	if err := os.Symlink("b.cue", filepath.Join(r.Dir, "a", "link.cue")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(r.Dir, "a", "run.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	before := r.Commit("first")
	r.Remove("a/link.cue", "a/x.cue")
	r.Write(map[string]string{"a/link.cue": "link: 2\n", "a/run.sh": "#!/bin/sh\necho\n", "a/x.cue": "x: 2\n"})
	if err := os.Chmod(filepath.Join(r.Dir, "a", "run.sh"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := r.Commit("bad")
	// Someone's work tree, not committed: a/x.cue is a link out of the repo.
	r.Remove("a/x.cue")
	if err := os.Symlink(outside, filepath.Join(r.Dir, "a", "x.cue")); err != nil {
		t.Fatal(err)
	}

	h, err := revert.Commit(r.Git, bad, author)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(outside); string(b) != "not the repo's\n" {
		t.Errorf("the revert wrote through a work-tree symlink: %s now holds %q", outside, b)
	}
	want, got := modes(t, r, plumbing.NewHash(before)), modes(t, r, h)
	if !maps.Equal(got, want) {
		t.Errorf("modes after the revert:\n got %v\nwant %v", got, want)
	}
	if got := files(t, r, h)["a/link.cue"]; got != "b.cue" {
		t.Errorf("a/link.cue after the revert holds %q, want the link's target b.cue", got)
	}
}

// modes is each file's mode in commit.
func modes(t *testing.T, r *gittest.Repo, commit plumbing.Hash) map[string]filemode.FileMode {
	t.Helper()
	out := make(map[string]filemode.FileMode)
	for name, f := range tree(t, r, commit) {
		out[name] = f.Mode
	}
	return out
}
