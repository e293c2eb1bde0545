// Package gitfs serves the tree of one Git commit as an io/fs.FS, so that the
// compiler and the PR check can read a commit straight from the object store,
// without a checkout and without touching any work tree.
//
//	r, _ := git.PlainOpen(dir)
//	fsys, err := gitfs.Commit(r, "main")
//	res, err := compiler.Compile(ctx, dir, compiler.Options{FS: fsys})
//
// An FS is read-only and safe for concurrent use: tree objects are decoded once
// and cached by directory path, as are directory listings, and every read of
// the object store is serialised, because go-git's object storage is not
// safe for concurrent use (it fills its pack index and open-pack maps lazily,
// and a packfile is read through one shared seeking scanner). Objects reads
// packfiles without a lock, so file systems over one Objects, and
// Cache.Prefetch, read on several cores. Open looks a blob up once: Stat on
// the open file needs only the object's header, and the content is read on
// the first Read, so a caller can refuse a huge file unread.
//
// Git entries map to fs entries as follows: trees are directories (mode
// fs.ModeDir|0o755), blobs are regular files (0o644, or 0o755 when
// executable), submodules are empty directories. Symbolic links behave as on
// a disk: Open, Stat and ReadFile follow them, Lstat and ReadLink do not
// (FS implements fs.ReadLinkFS), and directory entries report
// fs.ModeSymlink. A link that is absolute or leaves the tree does not
// resolve. Every entry reports the commit time as its ModTime.
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
	"sort"
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
	cache   *Cache // nil: none

	mu    sync.Mutex
	trees map[string]*object.Tree // decoded trees by directory path; "." is the root
	// listings are the directory listings made so far, by path without
	// symbolic links: a compile walks the tree, and a check compiles one
	// commit more than once.
	listings map[string][]fs.DirEntry
}

var (
	_ fs.FS         = (*FS)(nil)
	_ fs.ReadDirFS  = (*FS)(nil)
	_ fs.ReadFileFS = (*FS)(nil)
	_ fs.StatFS     = (*FS)(nil)
	_ fs.ReadLinkFS = (*FS)(nil)
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

// Open opens the named file or directory, following symbolic links.
// Directories implement fs.ReadDirFile; files implement io.ReaderAt and
// io.Seeker as well.
func (f *FS) Open(name string) (fs.File, error) {
	e, real, err := f.lookup("open", name, true)
	if err != nil {
		return nil, err
	}
	if e.isDir() {
		entries, err := f.dirEntries("open", real)
		if err != nil {
			return nil, err
		}
		return &dir{info: f.info(name, e), entries: entries}, nil
	}
	// One object lookup: the size comes from the object's header and the
	// content is read on first use, so a caller can Stat the open file and
	// refuse a huge blob without reading it.
	info := f.info(name, e)
	fl := &file{fsys: f, info: info}
	if f.cache != nil {
		if b, ok := f.cache.cached(e.Hash); ok {
			info.once.Do(func() { info.size = int64(len(b)) })
			fl.r = bytes.NewReader(b)
			return fl, nil
		}
	}
	f.mu.Lock()
	obj, err := f.s.EncodedObject(plumbing.BlobObject, e.Hash)
	f.mu.Unlock()
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fmt.Errorf("read blob %s: %w", e.Hash, err)}
	}
	info.once.Do(func() { info.size = obj.Size() })
	fl.obj = obj
	return fl, nil
}

// ReadFile returns the content of the named file, following symbolic links.
func (f *FS) ReadFile(name string) ([]byte, error) {
	e, _, err := f.lookup("readfile", name, true)
	if err != nil {
		return nil, err
	}
	if e.isDir() {
		return nil, &fs.PathError{Op: "readfile", Path: name, Err: errIsDir}
	}
	return f.blob("readfile", name, e.Hash)
}

// ReadDir returns the entries of the named directory sorted by name. Entries
// that are symbolic links report fs.ModeSymlink and are not followed.
func (f *FS) ReadDir(name string) ([]fs.DirEntry, error) {
	e, real, err := f.lookup("readdir", name, true)
	if err != nil {
		return nil, err
	}
	if !e.isDir() {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: errNotDir}
	}
	return f.dirEntries("readdir", real)
}

// Stat returns the fs.FileInfo of the named file or directory, following
// symbolic links.
func (f *FS) Stat(name string) (fs.FileInfo, error) {
	e, _, err := f.lookup("stat", name, true)
	if err != nil {
		return nil, err
	}
	return f.info(name, e), nil
}

// Lstat is Stat without following a symbolic link in the last element.
func (f *FS) Lstat(name string) (fs.FileInfo, error) {
	e, _, err := f.lookup("lstat", name, false)
	if err != nil {
		return nil, err
	}
	return f.info(name, e), nil
}

// ReadLink returns the target of the named symbolic link; fs.ErrInvalid
// when it is not one.
func (f *FS) ReadLink(name string) (string, error) {
	e, _, err := f.lookup("readlink", name, false)
	if err != nil {
		return "", err
	}
	if e.Mode != filemode.Symlink {
		return "", &fs.PathError{Op: "readlink", Path: name, Err: fs.ErrInvalid}
	}
	b, err := f.blob("readlink", name, e.Hash)
	return string(b), err
}

var (
	errIsDir    = errors.New("is a directory")
	errNotDir   = errors.New("not a directory")
	errTooMany  = errors.New("too many levels of symbolic links")
	maxSymlinks = 40
)

// entry is one tree entry; the root has the root tree's hash and Dir mode.
type entry struct {
	Name string
	Mode filemode.FileMode
	Hash plumbing.Hash
}

func (e entry) isDir() bool { return e.Mode == filemode.Dir || e.Mode == filemode.Submodule }

// lookup finds the entry for name and its path with every symbolic link
// resolved. Links in directories along the way are always followed; a link
// in the last element only when follow is set. A link whose target is
// absolute or leaves the tree does not resolve (fs.ErrNotExist).
func (f *FS) lookup(op, name string, follow bool) (entry, string, error) {
	if !fs.ValidPath(name) {
		return entry{}, "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	e, real, err := f.resolveLocked(name, follow)
	if err != nil {
		return entry{}, "", &fs.PathError{Op: op, Path: name, Err: err}
	}
	return e, real, nil
}

func (f *FS) resolveLocked(name string, follow bool) (entry, string, error) {
	root := f.trees["."]
	hops := 0
restart:
	if name == "." {
		return entry{Name: ".", Mode: filemode.Dir, Hash: root.Hash}, ".", nil
	}
	// name is a valid fs path, so each prefix name[:end] up to a "/" is
	// the clean path of a directory: no path building on the way down.
	cur := "."
	for start := 0; ; {
		end := strings.IndexByte(name[start:], '/')
		last := end < 0
		if last {
			end = len(name)
		} else {
			end += start
		}
		part := name[start:end]
		t, err := f.treeLocked(cur)
		if err != nil {
			return entry{}, "", err
		}
		te, ok := findEntry(t, part)
		if !ok {
			return entry{}, "", fs.ErrNotExist
		}
		if te.Mode == filemode.Symlink && (!last || follow) {
			if hops++; hops > maxSymlinks {
				return entry{}, "", errTooMany
			}
			target, err := f.readBlobLocked(te.Hash)
			if err != nil {
				return entry{}, "", err
			}
			next := path.Join(cur, string(target))
			if path.IsAbs(string(target)) || next == ".." || strings.HasPrefix(next, "../") {
				return entry{}, "", fmt.Errorf("symbolic link to %s leaves the tree: %w", target, fs.ErrNotExist)
			}
			if !last {
				next = path.Join(next, name[end+1:])
			}
			name = next
			goto restart
		}
		if last {
			return entry{Name: te.Name, Mode: te.Mode, Hash: te.Hash}, name, nil
		}
		if te.Mode != filemode.Dir && te.Mode != filemode.Submodule {
			return entry{}, "", fs.ErrNotExist // a path through a file
		}
		cur = name[:end]
		start = end + 1
	}
}

// findEntry looks name up in t by binary search: Git keeps entries sorted
// with directories compared as if their names ended in "/", so name is
// searched both ways. A tree that is not sorted (hand-made, or corrupt) is
// scanned.
func findEntry(t *object.Tree, name string) (object.TreeEntry, bool) {
	for _, key := range []string{name, name + "/"} {
		i := sort.Search(len(t.Entries), func(i int) bool { return gitCompare(&t.Entries[i], key) >= 0 })
		if i < len(t.Entries) && t.Entries[i].Name == name {
			return t.Entries[i], true
		}
	}
	if !sort.SliceIsSorted(t.Entries, func(i, j int) bool { return gitSortName(&t.Entries[i]) < gitSortName(&t.Entries[j]) }) {
		for _, te := range t.Entries {
			if te.Name == name {
				return te, true
			}
		}
	}
	return object.TreeEntry{}, false
}

// gitCompare compares gitSortName(e) with key, without building the name.
func gitCompare(e *object.TreeEntry, key string) int {
	x, slash := e.Name, e.Mode == filemode.Dir
	if len(key) <= len(x) {
		if c := strings.Compare(x[:len(key)], key); c != 0 {
			return c
		}
		if slash || len(x) > len(key) {
			return 1 // x starts with key and is longer
		}
		return 0
	}
	if c := strings.Compare(x, key[:len(x)]); c != 0 {
		return c
	}
	// key continues x: x (with its slash, if any) is shorter, or differs
	// at the slash.
	if !slash {
		return -1
	}
	switch k := key[len(x)]; {
	case k < '/':
		return 1
	case k > '/' || len(key) > len(x)+1:
		return -1
	}
	return 0
}

func gitSortName(e *object.TreeEntry) string {
	if e.Mode == filemode.Dir {
		return e.Name + "/"
	}
	return e.Name
}

// treeLocked returns the decoded tree of directory dir, a path without
// symbolic links; f.mu must be held.
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
	te, ok := findEntry(pt, base)
	if !ok {
		return nil, fs.ErrNotExist
	}
	switch te.Mode {
	case filemode.Dir:
		var t *object.Tree
		var err error
		if f.cache != nil {
			t, err = f.cache.tree(f.s, te.Hash)
		} else {
			t, err = object.GetTree(f.s, te.Hash)
		}
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

func (f *FS) dirEntries(op, name string) ([]fs.DirEntry, error) {
	f.mu.Lock()
	if l, ok := f.listings[name]; ok {
		f.mu.Unlock()
		return slices.Clone(l), nil // the caller may reorder its slice
	}
	t, err := f.treeLocked(name)
	f.mu.Unlock()
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	ents := make([]dirEntry, len(t.Entries))
	out := make([]fs.DirEntry, len(t.Entries))
	for i, te := range t.Entries {
		ents[i] = dirEntry{fsys: f, e: entry{Name: te.Name, Mode: te.Mode, Hash: te.Hash}}
		out[i] = &ents[i]
	}
	// Git orders a directory "a" as "a/", so "a.cue" sorts before it; io/fs
	// wants plain name order.
	byName := func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) }
	if !slices.IsSortedFunc(out, byName) {
		slices.SortFunc(out, byName)
	}
	f.mu.Lock()
	if f.listings == nil {
		f.listings = make(map[string][]fs.DirEntry)
	}
	f.listings[name] = out
	f.mu.Unlock()
	return slices.Clone(out), nil
}

// dirEntry is one entry of a directory listing; its FileInfo is made on
// demand.
type dirEntry struct {
	fsys *FS
	e    entry
}

func (d *dirEntry) Name() string               { return d.e.Name }
func (d *dirEntry) IsDir() bool                { return d.e.isDir() }
func (d *dirEntry) Type() fs.FileMode          { return (&fileInfo{e: d.e}).Mode().Type() }
func (d *dirEntry) Info() (fs.FileInfo, error) { return d.fsys.info(d.e.Name, d.e), nil }
func (d *dirEntry) String() string             { return fs.FormatDirEntry(d) }

func (f *FS) blob(op, name string, h plumbing.Hash) ([]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, err := f.readBlobLocked(h)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: name, Err: err}
	}
	if f.cache != nil {
		b = bytes.Clone(b) // the cache's copy is shared; ReadFile's caller may modify
	}
	return b, nil
}

func (f *FS) readBlobLocked(h plumbing.Hash) ([]byte, error) {
	if f.cache != nil {
		return f.cache.blob(h, func() ([]byte, error) { return readBlob(f.s, h) })
	}
	return readBlob(f.s, h)
}

func readBlob(s storer.EncodedObjectStorer, h plumbing.Hash) ([]byte, error) {
	obj, err := s.EncodedObject(plumbing.BlobObject, h)
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", h, err)
	}
	return readObject(obj)
}

// readObject reads the content of obj, an object already looked up.
func readObject(obj plumbing.EncodedObject) (b []byte, err error) {
	if m, ok := obj.(*memObject); ok {
		return m.b, nil // read once, for this caller alone
	}
	r, err := obj.Reader()
	if err != nil {
		return nil, fmt.Errorf("read blob %s: %w", obj.Hash(), err)
	}
	defer func() {
		if cerr := r.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("read blob %s: %w", obj.Hash(), cerr)
		}
	}()
	w := bytes.NewBuffer(make([]byte, 0, obj.Size()))
	if _, err := io.Copy(w, r); err != nil {
		return nil, fmt.Errorf("read blob %s: %w", obj.Hash(), err)
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
		if i.fsys.cache != nil {
			if n, ok := i.fsys.cache.size(i.e.Hash); ok {
				i.size = n
				return
			}
		}
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

// file is an open blob. Its content is read into memory on the first Read,
// ReadAt or Seek (config files are small); Stat needs only the object's
// header.
type file struct {
	fsys *FS
	info *fileInfo
	obj  plumbing.EncodedObject // set until the content is read
	r    *bytes.Reader
	err  error
}

func (f *file) load() error {
	if f.r != nil || f.err != nil {
		return f.err
	}
	h := f.info.e.Hash
	var b []byte
	var err error
	if c := f.fsys.cache; c != nil {
		b, err = c.blob(h, f.readLocked) // shared, but a bytes.Reader only copies out
	} else {
		b, err = f.readLocked()
	}
	if err != nil {
		f.err = &fs.PathError{Op: "read", Path: f.info.name, Err: err}
		return f.err
	}
	f.obj, f.r = nil, bytes.NewReader(b)
	return nil
}

// readLocked reads the object looked up by Open, under the FS's lock: an
// object too large for go-git to hold in memory reads the object store.
func (f *file) readLocked() ([]byte, error) {
	f.fsys.mu.Lock()
	defer f.fsys.mu.Unlock()
	return readObject(f.obj)
}

func (f *file) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *file) Close() error               { return nil }

func (f *file) Read(p []byte) (int, error) {
	if err := f.load(); err != nil {
		return 0, err
	}
	return f.r.Read(p)
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.load(); err != nil {
		return 0, err
	}
	return f.r.ReadAt(p, off)
}

func (f *file) Seek(offset int64, whence int) (int64, error) {
	if err := f.load(); err != nil {
		return 0, err
	}
	return f.r.Seek(offset, whence)
}

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
