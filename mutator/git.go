package mutator

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/format/index"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// writeTree stores the tree root with files (repo-relative slash paths ▶
// content) written over it, and returns its hash. Only the trees on the
// way to a changed file are rewritten; root may be the zero hash (a
// directory the change creates).
func writeTree(s storer.EncodedObjectStorer, root plumbing.Hash, files map[string][]byte) (plumbing.Hash, error) {
	var entries []object.TreeEntry
	if !root.IsZero() {
		t, err := object.GetTree(s, root)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("read tree %s: %w", root, err)
		}
		entries = append(entries, t.Entries...)
	}
	here := map[string][]byte{}
	below := map[string]map[string][]byte{}
	for p, b := range files {
		dir, rest, ok := strings.Cut(p, "/")
		if !ok {
			here[p] = b
			continue
		}
		if below[dir] == nil {
			below[dir] = map[string][]byte{}
		}
		below[dir][rest] = b
	}
	index := map[string]int{}
	for i, e := range entries {
		index[e.Name] = i
	}
	put := func(e object.TreeEntry) {
		if i, ok := index[e.Name]; ok {
			entries[i] = e
			return
		}
		index[e.Name] = len(entries)
		entries = append(entries, e)
	}
	for name, b := range here {
		h, err := writeBlob(s, b)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		mode := filemode.Regular
		if i, ok := index[name]; ok && entries[i].Mode == filemode.Executable {
			mode = filemode.Executable
		}
		put(object.TreeEntry{Name: name, Mode: mode, Hash: h})
	}
	for dir, sub := range below {
		var from plumbing.Hash
		if i, ok := index[dir]; ok {
			if entries[i].Mode != filemode.Dir {
				return plumbing.ZeroHash, fmt.Errorf("%s is a file, not a directory", dir)
			}
			from = entries[i].Hash
		}
		h, err := writeTree(s, from, sub)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		put(object.TreeEntry{Name: dir, Mode: filemode.Dir, Hash: h})
	}
	// Git's order: names compared as if a directory's ended in "/".
	key := func(e object.TreeEntry) string {
		if e.Mode == filemode.Dir {
			return e.Name + "/"
		}
		return e.Name
	}
	sort.Slice(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
	obj := s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode tree: %w", err)
	}
	return s.SetEncodedObject(obj)
}

func writeBlob(s storer.EncodedObjectStorer, b []byte) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	obj.SetSize(int64(len(b)))
	w, err := obj.Writer()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	if _, err := w.Write(b); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("write blob: %w", err)
	}
	return s.SetEncodedObject(obj)
}

func writeCommit(s storer.EncodedObjectStorer, c *object.Commit) (plumbing.Hash, error) {
	obj := s.NewEncodedObject()
	if err := c.Encode(obj); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("encode commit: %w", err)
	}
	return s.SetEncodedObject(obj)
}

// checkedOut returns the work tree of r when branch is checked out in it,
// nil otherwise (a bare repository, another branch).
func checkedOut(r *git.Repository, branch plumbing.ReferenceName) (*git.Worktree, error) {
	wt, err := r.Worktree()
	if errors.Is(err, git.ErrIsBareRepository) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("open work tree: %w", err)
	}
	head, err := r.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return nil, fmt.Errorf("read HEAD: %w", err)
	}
	if head.Type() != plumbing.SymbolicReference || head.Target() != branch {
		return nil, nil
	}
	return wt, nil
}

// cleanInWorkTree refuses when a file the change edits differs in the work
// tree or in the index from the head, or something (a file, a link, an
// entry staged) is already where the change creates one: the change would
// overwrite someone's edit, and a staged one is an edit even where the
// work-tree copy is the head's. A file that cannot be opened for writing
// fails here too, before the branch moves, rather than in syncWorkTree
// after it.
func cleanInWorkTree(r *git.Repository, wt *git.Worktree, base map[string][]byte) error {
	root := wt.Filesystem.Root()
	idx, err := r.Storer.Index()
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	for name, want := range base {
		e, err := idx.Entry(name)
		switch {
		case err != nil && !errors.Is(err, index.ErrEntryNotFound):
			return fmt.Errorf("read index: %w", err)
		case err == nil && want == nil:
			return badRequest("%s is staged in the index but not in the branch, and the change creates it; commit or unstage it first", name)
		case err != nil && want != nil:
			return badRequest("%s has uncommitted changes staged in the index (its removal); commit or unstage them first", name)
		case err == nil && e.Hash != plumbing.ComputeHash(plumbing.BlobObject, want):
			return badRequest("%s has uncommitted changes staged in the index; commit or unstage them first", name)
		}
		p := filepath.Join(root, filepath.FromSlash(name))
		if want == nil {
			// Lstat, not a read: a link to nowhere reads as absent, and
			// writing through it would fail after the branch moved.
			_, err := os.Lstat(p)
			switch {
			case errors.Is(err, os.ErrNotExist):
				continue
			case err != nil:
				return fmt.Errorf("work tree: %s cannot be written: %w; nothing changed", name, err)
			}
			return badRequest("%s is in the work tree but not in the branch (untracked), and the change creates it; move it away first", name)
		}
		got, err := os.ReadFile(p)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if err != nil || !bytes.Equal(got, want) {
			return badRequest("%s has uncommitted changes in the work tree; commit or stash them first", name)
		}
		// Opened, not written: the write itself comes after the branch
		// moved. Mode bits, an immutable file, a read-only mount.
		f, err := os.OpenFile(p, os.O_WRONLY, 0)
		if err != nil {
			return fmt.Errorf("work tree: %s cannot be written: %w; nothing changed", name, err)
		}
		_ = f.Close()
	}
	return nil
}

// syncWorkTree writes the changed files into the work tree and the index,
// so the branch just moved is checked out clean; a nil content removes the
// file (undo of a file the change created). The index is read and
// written once: staging file by file (Worktree.Add) rewrote it per file,
// which made a 300-config change spend seconds there.
//
// When a file cannot be written, the files already written get their
// content of prev back (nil: removed), the index is left as it was, and
// the error names the file; the caller then moves the branch back.
//
// The caller holds l, index.lock, which write releases.
func syncWorkTree(r *git.Repository, wt *git.Worktree, files, prev map[string][]byte, l *indexLock) error {
	root := wt.Filesystem.Root()
	idx, err := r.Storer.Index()
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	for i, name := range names {
		if err := writeWorkFile(root, name, files[name]); err != nil {
			for _, done := range names[:i] {
				if rerr := writeWorkFile(root, done, prev[done]); rerr != nil {
					err = fmt.Errorf("%w; restoring %s failed too: %v", err, done, rerr)
				}
			}
			return fmt.Errorf("update work tree: %w", err)
		}
	}
	for _, name := range names {
		b := files[name]
		if b == nil {
			_, _ = idx.Remove(name) // absent from the index: nothing to remove
			continue
		}
		fi, err := os.Stat(filepath.Join(root, filepath.FromSlash(name)))
		if err != nil {
			return fmt.Errorf("update work tree: %w", err)
		}
		e, err := idx.Entry(name)
		if err != nil {
			e = idx.Add(name)
			e.Mode = filemode.Regular
		}
		e.Hash = plumbing.ComputeHash(plumbing.BlobObject, b)
		e.Size = uint32(len(b))
		e.ModifiedAt = fi.ModTime()
	}
	return l.write(idx)
}

// writeWorkFile writes b to name in the work tree at root; nil removes it.
func writeWorkFile(root, name string, b []byte) error {
	p := filepath.Join(root, filepath.FromSlash(name))
	if b == nil {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove %s: %w", name, err)
		}
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}
