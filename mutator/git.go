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
// tree from the head: the change would overwrite someone's edit.
func cleanInWorkTree(wt *git.Worktree, base map[string][]byte) error {
	root := wt.Filesystem.Root()
	for name, want := range base {
		got, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(name)))
		if errors.Is(err, os.ErrNotExist) && want == nil {
			continue
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("read %s: %w", name, err)
		}
		if err != nil || !bytes.Equal(got, want) {
			return badRequest("%s has uncommitted changes in the work tree; commit or stash them first", name)
		}
	}
	return nil
}

// syncWorkTree writes the changed files into the work tree and the index,
// so the branch just moved is checked out clean; a nil content removes the
// file (undo of a file the change created). The index is read and
// written once: staging file by file (Worktree.Add) rewrote it per file,
// which made a 300-config change spend seconds there.
//
// The caller holds l, index.lock, which write releases.
func syncWorkTree(r *git.Repository, wt *git.Worktree, files map[string][]byte, l *indexLock) error {
	root := wt.Filesystem.Root()
	idx, err := r.Storer.Index()
	if err != nil {
		return fmt.Errorf("read index: %w", err)
	}
	for name, b := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if b == nil {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("update work tree: %w", err)
			}
			_, _ = idx.Remove(name) // absent from the index: nothing to remove
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("update work tree: %w", err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return fmt.Errorf("update work tree: %w", err)
		}
		fi, err := os.Stat(p)
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
