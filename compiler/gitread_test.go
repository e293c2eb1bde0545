package compiler_test

import (
	"context"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/compiler/gen"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

// countingStorer counts the lookups of each blob: reading the object and
// asking its size are one each.
type countingStorer struct {
	storer.EncodedObjectStorer
	mu      sync.Mutex
	lookups map[plumbing.Hash]int
}

func (s *countingStorer) count(h plumbing.Hash, o plumbing.EncodedObject) {
	if o != nil && o.Type() != plumbing.BlobObject {
		return
	}
	s.mu.Lock()
	s.lookups[h]++
	s.mu.Unlock()
}

func (s *countingStorer) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	o, err := s.EncodedObjectStorer.EncodedObject(t, h)
	if err == nil {
		s.count(h, o)
	}
	return o, err
}

func (s *countingStorer) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	s.count(h, nil)
	return s.EncodedObjectStorer.EncodedObjectSize(h)
}

// TestCompileFromGitLooksUpEachFileOnce: a compile straight from Git objects
// reads each file with one object lookup (the size limit is checked on the
// open file), not a size lookup and then a read.
func TestCompileFromGitLooksUpEachFileOnce(t *testing.T) {
	r := gittest.New(t)
	if err := gen.Repo(gen.Options{Configs: 30, Seed: 3}).Write(r.Dir); err != nil {
		t.Fatal(err)
	}
	head := r.Commit("repo")
	repo, err := git.PlainOpen(r.Dir)
	if err != nil {
		t.Fatal(err)
	}
	c, err := repo.CommitObject(plumbing.NewHash(head))
	if err != nil {
		t.Fatal(err)
	}
	tree, err := c.Tree()
	if err != nil {
		t.Fatal(err)
	}
	paths := make(map[plumbing.Hash]int) // how many files share each blob
	if err := tree.Files().ForEach(func(f *object.File) error { paths[f.Hash]++; return nil }); err != nil {
		t.Fatal(err)
	}
	cs := &countingStorer{EncodedObjectStorer: repo.Storer, lookups: make(map[plumbing.Hash]int)}
	fsys, err := gitfs.New(cs, c.TreeHash, c.Committer.When)
	if err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(context.Background(), r.Dir, compiler.Options{FS: fsys})
	if err != nil || !res.OK() {
		t.Fatalf("compile: %v %v", err, res.Errors)
	}
	if len(cs.lookups) == 0 {
		t.Fatal("no blob was looked up")
	}
	for h, n := range cs.lookups {
		if n > paths[h] {
			t.Errorf("blob %s looked up %d times, want at most %d (once per file holding it)", h, n, paths[h])
		}
	}
}
