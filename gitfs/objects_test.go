package gitfs_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

// objectsRepo commits files that differ a little from commit to commit, so
// that a repack stores many of them as deltas (chains of them), plus one
// blob larger than maxInMemory.
func objectsRepo(t *testing.T) *gittest.Repo {
	t.Helper()
	r := gittest.New(t)
	var big strings.Builder
	for i := range 4000 {
		fmt.Fprintf(&big, "line %d of a large generated file\n", i)
	}
	for c := range 6 {
		files := map[string]string{"big.txt": big.String() + strings.Repeat("x", c)}
		for i := range 20 {
			var b strings.Builder
			fmt.Fprintf(&b, "package cfg%d\n\n", i)
			for j := range 40 {
				fmt.Fprintf(&b, "field_%d: %d\n", j, j*i)
			}
			fmt.Fprintf(&b, "revision: %d\n", c)
			files[fmt.Sprintf("ns/c%d/config.cue", i)] = b.String()
		}
		r.CommitFiles(fmt.Sprintf("commit %d", c), files)
	}
	return r
}

// TestObjectsAgreeWithGoGit reads every object of a repository through
// Objects, from its packfile (deltas included) and from loose objects,
// from several goroutines at once, and holds each to what go-git's own
// storage reads.
func TestObjectsAgreeWithGoGit(t *testing.T) {
	for _, packed := range []bool{false, true} {
		t.Run(fmt.Sprintf("packed=%v", packed), func(t *testing.T) {
			r := objectsRepo(t)
			if packed {
				if err := r.Git.RepackObjects(&git.RepackConfig{}); err != nil {
					t.Fatal(err)
				}
				// A commit after the repack is a loose object next to the pack.
				r.CommitFiles("loose", map[string]string{"new.cue": "package x\n"})
			}
			st := r.Git.Storer.(*filesystem.Storage)
			want := make(map[plumbing.Hash]storedObject)
			iter, err := st.IterEncodedObjects(plumbing.AnyObject)
			if err != nil {
				t.Fatal(err)
			}
			if err := iter.ForEach(func(o plumbing.EncodedObject) error {
				b, err := content(o)
				want[o.Hash()] = storedObject{o.Type(), b}
				return err
			}); err != nil {
				t.Fatal(err)
			}
			if packed {
				if n := packedDeltas(t, st); n < 20 {
					t.Fatalf("the pack holds %d deltas; the test needs some", n)
				}
			}
			objs, err := gitfs.OpenObjects(st.Filesystem(), st, 1024)
			if err != nil {
				t.Fatal(err)
			}
			defer objs.Close()
			if n := objs.Packs(); packed != (n > 0) {
				t.Fatalf("%d packs read, packed %v", n, packed)
			}
			concurrently(t, 4, func(w int) error {
				i := 0
				for h, o := range want {
					if i++; i%4 != w {
						continue
					}
					if err := sameObject(objs, h, o); err != nil {
						return err
					}
				}
				return nil
			})
			if _, err := objs.EncodedObject(plumbing.BlobObject, plumbing.NewHash(strings.Repeat("ab", 20))); err == nil {
				t.Error("a missing object was found")
			}
		})
	}
}

type storedObject struct {
	typ plumbing.ObjectType
	b   []byte
}

func sameObject(objs *gitfs.Objects, h plumbing.Hash, want storedObject) error {
	got, err := objs.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return fmt.Errorf("%s: %v", h, err)
	}
	size := int64(len(want.b))
	if got.Type() != want.typ || got.Size() != size || got.Hash() != h {
		return fmt.Errorf("%s: got %s %d bytes, want %s %d", h, got.Type(), got.Size(), want.typ, size)
	}
	if n, err := objs.EncodedObjectSize(h); err != nil || n != size {
		return fmt.Errorf("%s: size %d, %v; want %d", h, n, err, size)
	}
	if _, err := objs.EncodedObject(otherType(want.typ), h); err == nil {
		return fmt.Errorf("%s: found as a %s", h, otherType(want.typ))
	}
	a, err := content(got)
	if err != nil {
		return err
	}
	if !bytes.Equal(a, want.b) {
		return fmt.Errorf("%s: content differs", h)
	}
	return nil
}

func otherType(t plumbing.ObjectType) plumbing.ObjectType {
	if t == plumbing.BlobObject {
		return plumbing.TreeObject
	}
	return plumbing.BlobObject
}

func content(o plumbing.EncodedObject) ([]byte, error) {
	rc, err := o.Reader()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// packedDeltas counts the deltas in the repository's packs.
func packedDeltas(t *testing.T, st *filesystem.Storage) int {
	t.Helper()
	packs, err := st.ObjectPacks()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, h := range packs {
		f, err := st.Filesystem().Open("objects/pack/pack-" + h.String() + ".pack")
		if err != nil {
			t.Fatal(err)
		}
		s := packfile.NewScanner(f)
		_, count, err := s.Header()
		if err != nil {
			t.Fatal(err)
		}
		for range count {
			oh, err := s.NextObjectHeader()
			if err != nil {
				t.Fatal(err)
			}
			if oh.Type == plumbing.OFSDeltaObject || oh.Type == plumbing.REFDeltaObject {
				n++
			}
		}
		f.Close()
	}
	return n
}

// noReads is an object store that fails every read.
type noReads struct{ *filesystem.Storage }

func (noReads) EncodedObject(plumbing.ObjectType, plumbing.Hash) (plumbing.EncodedObject, error) {
	return nil, errors.New("read after the prefetch")
}

// TestPrefetchFillsCache prefetches a commit's tree on several goroutines
// and then reads every wanted file and directory of it through a file
// system whose object store fails every read: the cache alone serves them.
func TestPrefetchFillsCache(t *testing.T) {
	r := objectsRepo(t)
	if err := r.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		t.Fatal(err)
	}
	st := r.Git.Storer.(*filesystem.Storage)
	objs, err := gitfs.OpenObjects(st.Filesystem(), st, 1024)
	if err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	head, err := r.Git.Head()
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Git.CommitObject(head.Hash())
	if err != nil {
		t.Fatal(err)
	}
	cache := gitfs.NewCache(4096)
	want := func(p string, dir bool) bool { return dir || strings.HasSuffix(p, ".cue") }
	if err := cache.Prefetch(context.Background(), objs, c.TreeHash, 3, want); err != nil {
		t.Fatal(err)
	}
	fsys, err := cache.FS(noReads{st}, c.TreeHash, c.Committer.When)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	err = fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".cue") {
			return err
		}
		files++
		got, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		want, err := gitfs.Commit(r.Git, c.Hash.String())
		if err != nil {
			return err
		}
		if b, err := fs.ReadFile(want, p); err != nil || !bytes.Equal(b, got) {
			return fmt.Errorf("%s: read %q, want %q (%v)", p, got, b, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files != 20 {
		t.Errorf("read %d .cue files, want 20", files)
	}
	if _, err := fs.ReadFile(fsys, "big.txt"); err == nil {
		t.Error("big.txt, which was not wanted, was read from the cache")
	}
}
