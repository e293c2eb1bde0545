package compiler

import (
	"bytes"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"time"
)

// memFS is the read-only in-memory file system the CUE loader reads from.
// testing/fstest.MapFS would do, but it finds a directory's entries by
// scanning every file, and the loader lists and stats directories for every
// package: with 2,000 configs that scan dominated the whole compile.
type memFS struct {
	files map[string][]byte
	dirs  map[string][]fs.DirEntry // sorted by name
}

func newMemFS() *memFS {
	return &memFS{files: make(map[string][]byte), dirs: map[string][]fs.DirEntry{".": nil}}
}

// add stores a file and records it, and any new parent directories, in
// their parents' listings.
func (m *memFS) add(name string, data []byte) {
	child := fs.DirEntry(&memEntry{name: path.Base(name), size: int64(len(data))})
	if _, ok := m.files[name]; ok {
		m.files[name] = data
		ents := m.dirs[path.Dir(name)]
		i := slices.IndexFunc(ents, func(e fs.DirEntry) bool { return e.Name() == child.Name() })
		ents[i] = child
		return
	}
	m.files[name] = data
	for dir := path.Dir(name); ; dir = path.Dir(dir) {
		_, existed := m.dirs[dir]
		m.insert(dir, child)
		if existed || dir == "." {
			return
		}
		child = &memEntry{name: path.Base(dir), dir: true}
	}
}

// snapshot returns the contents of the named files. It only reads, and is
// called while configs evaluate, when no file is added any more.
func (m *memFS) snapshot(names []string) map[string][]byte {
	out := make(map[string][]byte, len(names))
	for _, n := range names {
		out[n] = m.files[n]
	}
	return out
}

// filesIn returns the paths of the files directly in dir.
func (m *memFS) filesIn(dir string) []string {
	var out []string
	for _, e := range m.dirs[dir] {
		if !e.IsDir() {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	return out
}

// filesUnder returns the paths of the files in dir and below it.
func (m *memFS) filesUnder(dir string) []string {
	var out []string
	for _, e := range m.dirs[dir] {
		p := path.Join(dir, e.Name())
		if e.IsDir() {
			out = append(out, m.filesUnder(p)...)
		} else {
			out = append(out, p)
		}
	}
	return out
}

func (m *memFS) insert(dir string, e fs.DirEntry) {
	ents := m.dirs[dir]
	i, found := slices.BinarySearchFunc(ents, e.Name(), func(a fs.DirEntry, n string) int { return strings.Compare(a.Name(), n) })
	if found {
		return
	}
	m.dirs[dir] = slices.Insert(ents, i, e)
}

func (m *memFS) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if b, ok := m.files[name]; ok {
		return &memFile{Reader: bytes.NewReader(b), info: &memEntry{name: path.Base(name), size: int64(len(b))}}, nil
	}
	if ents, ok := m.dirs[name]; ok {
		return &memDir{info: &memEntry{name: path.Base(name), dir: true}, ents: ents}, nil
	}
	return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) ReadFile(name string) ([]byte, error) {
	if b, ok := m.files[name]; ok {
		return slices.Clone(b), nil
	}
	return nil, &fs.PathError{Op: "read", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if ents, ok := m.dirs[name]; ok {
		return slices.Clone(ents), nil
	}
	return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrNotExist}
}

func (m *memFS) Stat(name string) (fs.FileInfo, error) {
	if b, ok := m.files[name]; ok {
		return &memEntry{name: path.Base(name), size: int64(len(b))}, nil
	}
	if _, ok := m.dirs[name]; ok {
		return &memEntry{name: path.Base(name), dir: true}, nil
	}
	return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrNotExist}
}

var (
	_ fs.ReadDirFS  = (*memFS)(nil)
	_ fs.ReadFileFS = (*memFS)(nil)
	_ fs.StatFS     = (*memFS)(nil)
)

// memEntry is both the fs.FileInfo and the fs.DirEntry of a file or
// directory.
type memEntry struct {
	name string
	size int64
	dir  bool
}

func (e *memEntry) Name() string { return e.name }
func (e *memEntry) Size() int64  { return e.size }
func (e *memEntry) Mode() fs.FileMode {
	if e.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
func (e *memEntry) ModTime() time.Time         { return time.Time{} }
func (e *memEntry) IsDir() bool                { return e.dir }
func (e *memEntry) Sys() any                   { return nil }
func (e *memEntry) Type() fs.FileMode          { return e.Mode().Type() }
func (e *memEntry) Info() (fs.FileInfo, error) { return e, nil }

type memFile struct {
	*bytes.Reader
	info *memEntry
}

func (f *memFile) Stat() (fs.FileInfo, error) { return f.info, nil }
func (f *memFile) Close() error               { return nil }

type memDir struct {
	info *memEntry
	ents []fs.DirEntry
	off  int
}

func (d *memDir) Stat() (fs.FileInfo, error) { return d.info, nil }
func (d *memDir) Close() error               { return nil }
func (d *memDir) Read([]byte) (int, error) {
	return 0, &fs.PathError{Op: "read", Path: d.info.name, Err: fs.ErrInvalid}
}

// ReadDir follows fs.ReadDirFile: n <= 0 returns the rest at once.
func (d *memDir) ReadDir(n int) ([]fs.DirEntry, error) {
	rest := d.ents[d.off:]
	if n <= 0 {
		d.off = len(d.ents)
		return slices.Clone(rest), nil
	}
	if len(rest) == 0 {
		return nil, io.EOF
	}
	n = min(n, len(rest))
	d.off += n
	return slices.Clone(rest[:n]), nil
}
