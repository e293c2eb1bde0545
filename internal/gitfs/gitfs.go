// Package gitfs serves the tree of one Git commit as an io/fs.FS, so that the
// compiler and the PR check can read a commit straight from the object store,
// without a checkout and without touching any work tree.
//
//	r, _ := git.PlainOpen(dir)
//	fsys, err := gitfs.Commit(r, "main")
//	res, err := compiler.Compile(ctx, dir, compiler.Options{FS: fsys})
//
// An FS is read-only and safe for concurrent use: tree objects are decoded once
// and cached by directory path, and every read of the object store is
// serialised, because go-git's object storage is not safe for concurrent use.
//
// Git entries map to fs entries as follows: trees are directories (mode
// fs.ModeDir|0o755), blobs are regular files (0o644, or 0o755 when
// executable), symbolic links are files of mode fs.ModeSymlink|0o777 whose
// content is the link target (they are not followed), and submodules are
// empty directories. Every entry reports the commit time as its ModTime.
//
// Errors are *fs.PathError values wrapping fs.ErrNotExist, fs.ErrInvalid or
// the object store's error, so callers can match them with errors.Is.
package gitfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// FS is a read-only file system over one Git tree.
type FS struct {
	s       storer.EncodedObjectStorer
	modTime time.Time

	mu    sync.Mutex
	trees map[string]*object.Tree // decoded trees by directory path; "." is the root
}

var (
	_ fs.FS         = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.ReadFileFS = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
)

// New returns the file system of the tree with hash tree in s. Every entry
// reports modTime as its modification time. It returns an error wrapping
// plumbing.ErrObjectNotFound when the tree is not in s.
func New(s storer.EncodedObjectStorer, tree plumbing.Hash, modTime time.Time) (*FS, error) {
	t, err := object.GetTree(s, tree)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", tree, err)
	}
	return &FS{s: s, modTime: modTime, trees: map[string]*object.Tree{".": t}}, nil
}

// Commit returns the file system of the commit that rev names in r (a hash,
// a branch, a tag or any revision go-git resolves, such as "main~2").
// It returns an error wrapping plumbing.ErrReferenceNotFound when rev names
// nothing, and plumbing.ErrObjectNotFound when an object is missing.
func Commit(r *git.Repository, rev string) (*FS, error) {
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, fmt.Errorf("resolve revision %q: %w", rev, err)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	return New(r.Storer, c.TreeHash, c.Committer.When)
}

// Open opens the named file or directory. Directories implement
// fs.ReadDirFile; files implement io.ReaderAt and io.Seeker as well.
func (f *FS) Open(name string) (fs.File, error) {
	e, err := f.lookup("open", name)
	if err != nil {
		return nil, err
	}
	if e.isDir() {
		entries, err := f.dirEntries("open", name, e)
		if err != nil {
			return nil, err
		}
		return &dir{info: f.info(name, e), entries: entries}, nil
	}
	b, err := f.blob("open", name, e.Hash)
	if err != nil {
		return nil, err
	}
	info := f.info(name, e)
	info.once.Do(func() { info.size = int64(len(b)) })
	return &file{info: info, r: bytes.NewReader(b)}, nil
}

// ReadFile returns the content of the named file.
func (f *FS) ReadFile(name string) ([]byte, error) {
	e, err := f.lookup("readfile", name)
	if err != nil {
		return nil, err
	}
	if e.isDir() {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: errIsDir}
	}
	return f.blob("readfile", name, e.Hash)
}

// ReadDir returns the entries of the named directory sorted by name.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, err := f.lookup("readdir", name)
	if err != nil {
		return nil, err
	}
	if !e.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	return f.dirEntries("readdir", name, e)
}

// Stat returns the fs.FileInfo of the named file or directory.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	e, err := f.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return f.info(name, e), nil
}

var (
	errIsDir  = errors.New("is a directory")
	errNotDir = errors.New("not a directory")
)

// entry is one tree entry; the root has the zero hash of a tree and Dir mode.
type entry struct {
	Name string
	Mode filemode.FileMode
	Hash plumbing.Hash
}

func (e entry) isDir() bool { return e.Mode == filemode.Dir || e.Mode == filemode.Submodule }

// lookup finds the entry for name, walking and caching trees from the root.
func (f *FS) lookup(op, name string) (entry, error) {
	if !fs.ValidPath(name) {
		return entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	if name == "." {
		f.mu.Lock()
		root := f.trees["."]
		f.mu.Unlock()
		return entry{Name: ".", Mode: filemode.Dir, Hash: root.Hash}, nil
	}
	parent, base := path.Split(name)
	parent = strings.TrimSuffix(parent, "/")
	if parent == "" {
		parent = "."
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t, err := f.treeLocked(parent)
	if err != nil {
		return entry{}, &fs.PathError{Op: op, Path: name, Err: err}
	}
	for _, te := range t.Entries {
		if te.Name == base {
			return entry{Name: te.Name, Mode: te.Mode, Hash: te.Hash}, nil
		}
	}
	return entry{}, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
}

// treeLocked returns the decoded tree of directory dir; f.mu must be held.
func (f *FS) treeLocked(dir string) (*object.Tree, error) {
	if t, ok := f.trees[dir]; ok {
		return t, nil
	}
	parent, base := path.Split(dir)
	parent = strings.TrimSuffix(parent, "/")
	if parent == "" {
		parent = "."
	}
	pt, err := f.treeLocked(parent)
	if err != nil {
		return nil, err
	}
	for _, te := range pt.Entries {
		if te.Name != base {
			continue
		}
		switch te.Mode {
		case filemode.Dir:
			t, err := object.GetTree(f.s, te.Hash)
			if err != nil {
				return nil, fmt.Errorf("read tree %s: %w", te.Hash, err)
			}
			f.trees[dir] = t
			return t, nil
		case filemode.Submodule:
			t := &object.Tree{}
			f.trees[dir] = t
			return t, nil
		default:
			return nil, fs.ErrNotExist // a path through a file
		}
	}
	return nil, fs.ErrNotExist
}

func (f *FS) dirEntries(op, name string, e entry) ([]fs.DirEntry, error) {
	f.mu.Lock()
	t, err := f.treeLocked(name)
	f.mu.Unlock()
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	out := make([]fs.DirEntry, 0, len(t.Entries))
	for _, te := range t.Entries {
		child := entry{Name: te.Name, Mode: te.Mode, Hash: te.Hash}
		out = append(out, fs.FileInfoToDirEntry(f.info(path.Join(name, te.Name), child)))
	}
	// Git orders a directory "a" as "a/", so "a.cue" sorts before it; io/fs
	// wants plain name order.
	slices.SortFunc(out, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return out, nil
}

func (f *FS) blob(op, name string, h plumbing.Hash) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := object.GetBlob(f.s, h)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("read blob %s: %w", h, err)}
	}
	r, err := b.Reader()
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("read blob %s: %w", h, err)}
	}
	defer r.Close()
	buf := make([]byte, 0, b.Size)
	w := bytes.NewBuffer(buf)
	if _, err := io.Copy(w, r); err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: fmt.Errorf("read blob %s: %w", h, err)}
	}
	return w.Bytes(), nil
}

func (f *FS) info(name string, e entry) *fileInfo {
	return &fileInfo{fsys: f, name: path.Base(name), e: e}
}

// fileInfo describes one entry; the size of a blob is read on first use.
type fileInfo struct {
	fsys *FS
	name string
	e    entry
	once sync.Once
	size int64
}

func (i *fileInfo) Name() string       { return i.name }
func (i *fileInfo) ModTime() time.Time { return i.fsys.modTime }
func (i *fileInfo) IsDir() bool        { return i.e.isDir() }
func (i *fileInfo) Sys() any           { return nil }

func (i *fileInfo) Mode() fs.FileMode {
	switch i.e.Mode {
	case filemode.Dir, filemode.Submodule:
		return fs.ModeDir | 0o755
	case filemode.Executable:
		return 0o755
	case filemode.Symlink:
		return fs.ModeSymlink | 0o777
	default:
		return 0o644
	}
}

// Size is the blob size for files and 0 for directories. A blob whose size
// cannot be read reports -1; opening it reports the error.
func (i *fileInfo) Size() int64 {
	if i.e.isDir() {
		return 0
	}
	i.once.Do(func() {
		i.fsys.mu.Lock()
		n, err := i.fsys.s.EncodedObjectSize(i.e.Hash)
		i.fsys.mu.Unlock()
		if err != nil {
			n = -1
		}
		i.size = n
	})
	return i.size
}

// file is an open blob, held in memory (config files are small).
type file struct {
	info *fileInfo
	r    *bytes.Reader
}

func (f *file) Stat() (fs.FileInfo, error)                   { return f.info, nil }
func (f *file) Read(p []byte) (int, error)                   { return f.r.Read(p) }
func (f *file) ReadAt(p []byte, off int64) (int, error)      { return f.r.ReadAt(p, off) }
func (f *file) Seek(offset int64, whence int) (int64, error) { return f.r.Seek(offset, whence) }
func (f *file) Close() error                                 { return nil }

// dir is an open directory.
type dir struct {
	info    *fileInfo
	entries []fs.DirEntry
	off     int
}

func (d *dir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *dir) Close() error               { return nil }

func (d *dir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: errIsDir}
}

// ReadDir follows the fs.ReadDirFile contract: n <= 0 returns everything
// left; n > 0 returns at most n entries and io.EOF at the end.
func (d *dir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.entries[d.off:]
	if n <= 0 {
		d.off = len(d.entries)
		return rest, nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return rest[:n], nil
}
