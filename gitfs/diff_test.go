package gitfs_test

import (
	"slices"
	"testing"
	"testing/fstest"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

func TestDiff(t *testing.T) {
	r := gittest.New(t)
	tree := func(sha string) plumbing.Hash {
		c, err := r.Git.CommitObject(plumbing.NewHash(sha))
		if err != nil {
			t.Fatal(err)
		}
		return c.TreeHash
	}
	c1 := r.CommitFiles("one", map[string]string{
		"a.cue": "a", "d/b.cue": "b", "d/e/c.cue": "c", "x/y.cue": "y", "same/s.cue": "s",
	})
	r.Write(map[string]string{"a.cue": "a2", "new/n.cue": "n"})
	r.Remove("d/e", "x")
	c2 := r.Commit("two")
	r.Remove("d/b.cue")
	r.Write(map[string]string{"d/renamed.cue": "b"})
	c3 := r.Commit("rename")

	cache := gitfs.NewCache(64)
	tests := []struct {
		name string
		a, b plumbing.Hash
		want []string
	}{
		{name: "edit add delete", a: tree(c1), b: tree(c2), want: []string{"a.cue", "d/e/c.cue", "new/n.cue", "x/y.cue"}},
		{name: "reverse", a: tree(c2), b: tree(c1), want: []string{"a.cue", "d/e/c.cue", "new/n.cue", "x/y.cue"}},
		{name: "rename", a: tree(c2), b: tree(c3), want: []string{"d/b.cue", "d/renamed.cue"}},
		{name: "same", a: tree(c3), b: tree(c3), want: nil},
		{name: "from nothing", a: plumbing.ZeroHash, b: tree(c1), want: []string{"a.cue", "d/b.cue", "d/e/c.cue", "same/s.cue", "x/y.cue"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, c := range []*gitfs.Cache{nil, cache} {
				got, err := gitfs.Diff(r.Git.Storer, c, tt.a, tt.b)
				if err != nil {
					t.Fatal(err)
				}
				if !slices.Equal(got, tt.want) {
					t.Errorf("Diff (cache %v): got %q, want %q", c != nil, got, tt.want)
				}
			}
		})
	}
	if _, err := gitfs.Diff(r.Git.Storer, nil, tree(c1), plumbing.NewHash("0123456789012345678901234567890123456789")); err == nil {
		t.Errorf("Diff with a missing tree: got nil error")
	}
}

// TestCache: file systems read through a small cache (so it evicts) behave
// like the uncached ones, and ReadFile's result is the caller's to modify.
func TestCache(t *testing.T) {
	r := gittest.New(t)
	var shas []string
	for i := range 5 {
		shas = append(shas, r.CommitFiles("c", map[string]string{
			"a/x.cue": "x" + string(rune('0'+i)), "b/y.cue": "y", "c/d/z.cue": "z",
		}))
	}
	cache := gitfs.NewCache(4)
	for _, sha := range shas {
		c, err := r.Git.CommitObject(plumbing.NewHash(sha))
		if err != nil {
			t.Fatal(err)
		}
		fsys, err := cache.FS(r.Git.Storer, c.TreeHash, c.Committer.When)
		if err != nil {
			t.Fatal(err)
		}
		if err := fstest.TestFS(fsys, "a/x.cue", "b/y.cue", "c/d/z.cue"); err != nil {
			t.Fatal(err)
		}
		b, err := fsys.ReadFile("b/y.cue")
		if err != nil {
			t.Fatal(err)
		}
		b[0] = 'Q'
		if b2, _ := fsys.ReadFile("b/y.cue"); string(b2) != "y" {
			t.Fatalf("a caller's change reached the cache: got %q", b2)
		}
	}
}

// TestDiffRetype: a path that is a file in one tree and a directory in the
// other is listed as the file and every file below the directory. (go-git's
// work tree cannot commit that change, so the trees are written directly.)
func TestDiffRetype(t *testing.T) {
	r := gittest.New(t)
	s := r.Git.Storer
	blob := func(content string) plumbing.Hash {
		o := s.NewEncodedObject()
		o.SetType(plumbing.BlobObject)
		w, _ := o.Writer()
		w.Write([]byte(content))
		w.Close()
		h, err := s.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	tree := func(entries ...object.TreeEntry) plumbing.Hash {
		o := s.NewEncodedObject()
		if err := (&object.Tree{Entries: entries}).Encode(o); err != nil {
			t.Fatal(err)
		}
		h, err := s.SetEncodedObject(o)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	asFile := tree(object.TreeEntry{Name: "x", Mode: filemode.Regular, Hash: blob("file")})
	asDir := tree(object.TreeEntry{Name: "x", Mode: filemode.Dir, Hash: tree(
		object.TreeEntry{Name: "a.cue", Mode: filemode.Regular, Hash: blob("a")},
		object.TreeEntry{Name: "b.cue", Mode: filemode.Regular, Hash: blob("b")},
	)})
	want := []string{"x", "x/a.cue", "x/b.cue"}
	for _, pair := range [][2]plumbing.Hash{{asFile, asDir}, {asDir, asFile}} {
		got, err := gitfs.Diff(s, nil, pair[0], pair[1])
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Diff: got %q, want %q", got, want)
		}
	}
}
