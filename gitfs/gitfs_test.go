package gitfs_test

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

func TestFS(t *testing.T) {
	r := gittest.New(t)
	first := r.CommitFiles("first", map[string]string{
		"cue.mod/module.cue":      "module: \"example.com/x\"\n",
		"cuecast.cue":             "package cuecast\n",
		"payments/checkout/a.cue": "package checkout\nx: 1\n",
		"payments/checkout.cue":   "package payments\n",
		"lib/net/net.cue":         "package net\n",
	})
	if err := os.WriteFile(filepath.Join(r.Dir, "run.sh"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlinks(t, r.Dir, map[string]string{
		"link.cue":       "lib/net/net.cue",
		"libdir":         "lib",
		"lib/net/up.cue": "../../cuecast.cue",
	})
	r.Write(map[string]string{"payments/checkout/a.cue": "package checkout\nx: 2\n"})
	r.Remove("payments/checkout.cue")
	second := r.Commit("second")
	symlinks(t, r.Dir, map[string]string{
		"escape.cue": "../outside.cue",
		"abs.cue":    "/etc/passwd",
		"loop.cue":   "loop.cue",
	})
	third := r.Commit("third: bad links")

	for _, c := range []struct {
		name, rev string
		files     []string
	}{
		{"first", first, []string{"cue.mod/module.cue", "cuecast.cue", "payments/checkout/a.cue", "payments/checkout.cue", "lib/net/net.cue"}},
		{"second", second, []string{"cue.mod/module.cue", "payments/checkout/a.cue", "run.sh", "link.cue", "lib/net/up.cue"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if err := fstest.TestFS(commitFS(t, r, c.rev), c.files...); err != nil {
				t.Fatal(err)
			}
		})
	}

	fsys := commitFS(t, r, third)
	tests := []struct {
		name    string
		content string
		mode    fs.FileMode
		err     error
	}{
		{name: "payments/checkout/a.cue", content: "package checkout\nx: 2\n", mode: 0o644},
		{name: "run.sh", content: "#!/bin/sh\n", mode: 0o755},
		{name: "link.cue", content: "package net\n", mode: 0o644},
		{name: "libdir/net/net.cue", content: "package net\n", mode: 0o644},
		{name: "lib/net/up.cue", content: "package cuecast\n", mode: 0o644},
		{name: "escape.cue", err: fs.ErrNotExist},
		{name: "abs.cue", err: fs.ErrNotExist},
		{name: "loop.cue", err: errLoop},
		{name: "payments/checkout.cue", err: fs.ErrNotExist},
		{name: "nope/a.cue", err: fs.ErrNotExist},
		{name: "run.sh/x", err: fs.ErrNotExist},
		{name: "/abs", err: fs.ErrInvalid},
		{name: "a/../b", err: fs.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := fsys.ReadFile(tt.name)
			if tt.err != nil {
				if !errors.Is(err, tt.err) && (tt.err != errLoop || err == nil || !strings.Contains(err.Error(), tt.err.Error())) {
					t.Fatalf("ReadFile(%q): got error %v, want %v", tt.name, err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ReadFile(%q): %v", tt.name, err)
			}
			if string(b) != tt.content {
				t.Errorf("ReadFile(%q) = %q, want %q", tt.name, b, tt.content)
			}
			info, err := fsys.Stat(tt.name)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode() != tt.mode || info.Size() != int64(len(tt.content)) {
				t.Errorf("Stat(%q): mode %v size %d, want %v %d", tt.name, info.Mode(), info.Size(), tt.mode, len(tt.content))
			}
		})
	}

	for link, target := range map[string]string{"link.cue": "lib/net/net.cue", "libdir": "lib", "escape.cue": "../outside.cue", "loop.cue": "loop.cue"} {
		got, err := fsys.ReadLink(link)
		if err != nil || got != target {
			t.Errorf("ReadLink(%q) = %q, %v; want %q", link, got, err, target)
		}
		info, err := fsys.Lstat(link)
		if err != nil || info.Mode()&fs.ModeSymlink == 0 {
			t.Errorf("Lstat(%q): mode %v, %v; want a symlink", link, info.Mode(), err)
		}
	}
	if _, err := fsys.ReadLink("run.sh"); !errors.Is(err, fs.ErrInvalid) {
		t.Errorf("ReadLink(file): got %v, want ErrInvalid", err)
	}
	if _, err := fsys.ReadFile("payments"); err == nil {
		t.Errorf("ReadFile(dir): got nil error, want one")
	}
	if _, err := fsys.ReadDir("run.sh"); err == nil {
		t.Errorf("ReadDir(file): got nil error, want one")
	}
}

var errLoop = errors.New("too many levels of symbolic links")

func TestFSConcurrent(t *testing.T) {
	r := gittest.New(t)
	files := map[string]string{}
	for _, d := range []string{"a", "b", "c", "d"} {
		for _, f := range []string{"x.cue", "y.cue", "sub/z.cue"} {
			files[d+"/"+f] = "package " + d + "\n// " + f + "\n"
		}
	}
	r.CommitFiles("many", files)
	fsys := commitFS(t, r, "main")
	concurrently(t, 8, func(int) error {
		for name, want := range files {
			b, err := fsys.ReadFile(name)
			if err != nil {
				return err
			}
			if string(b) != want {
				return errors.New("content of " + name + " differs")
			}
			if _, err := fs.ReadDir(fsys, filepath.Dir(name)); err != nil {
				return err
			}
		}
		return nil
	})
}

// commitFS is the tree of r's rev (gitfs.Commit).
func commitFS(t *testing.T, r *gittest.Repo, rev string) *gitfs.FS {
	t.Helper()
	fsys, err := gitfs.Commit(r.Git, rev)
	if err != nil {
		t.Fatalf("gitfs.Commit %s: %v", rev, err)
	}
	return fsys
}

// symlinks makes each link below dir (a name relative to dir) point at
// its target, as given.
func symlinks(t *testing.T, dir string, links map[string]string) {
	t.Helper()
	for link, target := range links {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
}

// concurrently runs f(0) to f(n-1) at once and fails t with each error
// they return.
func concurrently(t *testing.T, n int, f func(w int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for w := range n {
		wg.Go(func() {
			if err := f(w); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestCommitErrors(t *testing.T) {
	r := gittest.New(t)
	r.CommitFiles("one", map[string]string{"a.cue": "package a\n"})
	if _, err := gitfs.Commit(r.Git, "nope"); !errors.Is(err, plumbing.ErrReferenceNotFound) {
		t.Errorf("Commit(nope): got %v, want ErrReferenceNotFound", err)
	}
	if _, err := gitfs.New(r.Git.Storer, plumbing.NewHash("0123456789012345678901234567890123456789"), time.Time{}); !errors.Is(err, plumbing.ErrObjectNotFound) {
		t.Errorf("New(missing tree): got %v, want ErrObjectNotFound", err)
	}
}

// TestOpenLargeObject: Open looks a blob up once and Stat on the open file
// gives its size before the content is read, also for objects go-git leaves
// on disk because they are over its LargeObjectThreshold; the content then
// reads in full, with and without a Cache.
func TestOpenLargeObject(t *testing.T) {
	r := gittest.New(t)
	big := strings.Repeat("x: 1\n", 1000)
	head := r.CommitFiles("files", map[string]string{"small.cue": "a: 1\n", "big.cue": big})
	for _, packed := range []bool{false, true} {
		if packed {
			if err := r.Git.RepackObjects(&git.RepackConfig{}); err != nil {
				t.Fatal(err)
			}
		}
		st := r.Git.Storer.(*filesystem.Storage)
		lazy := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRUDefault(), filesystem.Options{LargeObjectThreshold: 100, KeepDescriptors: true})
		repo, err := git.Open(lazy, nil)
		if err != nil {
			t.Fatal(err)
		}
		c, err := repo.CommitObject(plumbing.NewHash(head))
		if err != nil {
			t.Fatal(err)
		}
		for _, gc := range []*gitfs.Cache{nil, gitfs.NewCache(16)} {
			var fsys *gitfs.FS
			if gc != nil {
				fsys, err = gc.FS(lazy, c.TreeHash, c.Committer.When)
			} else {
				fsys, err = gitfs.New(lazy, c.TreeHash, c.Committer.When)
			}
			if err != nil {
				t.Fatal(err)
			}
			for name, want := range map[string]string{"small.cue": "a: 1\n", "big.cue": big} {
				for range 2 { // the second time from the cache, when there is one
					f, err := fsys.Open(name)
					if err != nil {
						t.Fatal(err)
					}
					fi, err := f.Stat()
					if err != nil || fi.Size() != int64(len(want)) {
						t.Fatalf("packed=%v cache=%v: Stat(%s) = %v, %v; want size %d", packed, gc != nil, name, fi.Size(), err, len(want))
					}
					got, err := io.ReadAll(f)
					if err != nil || string(got) != want {
						t.Fatalf("packed=%v cache=%v: read %s = %d bytes, %v; want %d bytes", packed, gc != nil, name, len(got), err, len(want))
					}
					f.Close()
				}
			}
		}
		if err := lazy.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReadDirListingIsTheCallers: listings are kept for the next walk, so
// a caller reordering the slice it got must not change what others get.
func TestReadDirListingIsTheCallers(t *testing.T) {
	r := gittest.New(t)
	head := r.CommitFiles("files", map[string]string{"d/a.cue": "a: 1\n", "d/b.cue": "b: 1\n"})
	fsys := commitFS(t, r, head)
	first, err := fsys.ReadDir("d")
	if err != nil {
		t.Fatal(err)
	}
	first[0], first[1] = first[1], first[0]
	again, err := fsys.ReadDir("d")
	if err != nil {
		t.Fatal(err)
	}
	if again[0].Name() != "a.cue" || again[1].Name() != "b.cue" {
		t.Errorf("second ReadDir = %s, %s; want a.cue, b.cue", again[0].Name(), again[1].Name())
	}
}
