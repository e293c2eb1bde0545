package gitfs

import (
	"fmt"
	"path"
	"slices"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Diff returns the slash paths of the files that differ between trees a and
// b of s: modified, added and deleted files (a rename is its old and its new
// path; a file that becomes a directory is both). A zero a is the empty tree,
// so Diff(s, c, ZeroHash, b) lists every file of b. Subtrees with equal hashes
// are skipped without being read, so the cost follows the size of the change,
// not of the repository. c may be nil. The result is sorted.
func Diff(s storer.EncodedObjectStorer, c *Cache, a, b plumbing.Hash) ([]string, error) {
	if c == nil {
		c = NewCache(1024)
	}
	var out []string
	if err := diffTrees(s, c, "", a, b, &out); err != nil {
		return nil, err
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func diffTrees(s storer.EncodedObjectStorer, c *Cache, prefix string, a, b plumbing.Hash, out *[]string) error {
	if a == b {
		return nil
	}
	ea, err := entries(s, c, a)
	if err != nil {
		return err
	}
	eb, err := entries(s, c, b)
	if err != nil {
		return err
	}
	byName := make(map[string]object.TreeEntry, len(ea))
	for _, e := range ea {
		byName[e.Name] = e
	}
	for _, e := range eb {
		old, ok := byName[e.Name]
		delete(byName, e.Name)
		p := path.Join(prefix, e.Name)
		switch {
		case !ok:
			if err := addAll(s, c, p, e, out); err != nil {
				return err
			}
		case old.Hash == e.Hash && old.Mode == e.Mode:
		case old.Mode == filemode.Dir && e.Mode == filemode.Dir:
			if err := diffTrees(s, c, p, old.Hash, e.Hash, out); err != nil {
				return err
			}
		default: // a file changed, or a file became a directory or back
			if err := addAll(s, c, p, old, out); err != nil {
				return err
			}
			if err := addAll(s, c, p, e, out); err != nil {
				return err
			}
		}
	}
	for _, e := range byName {
		if err := addAll(s, c, path.Join(prefix, e.Name), e, out); err != nil {
			return err
		}
	}
	return nil
}

func entries(s storer.EncodedObjectStorer, c *Cache, h plumbing.Hash) ([]object.TreeEntry, error) {
	if h.IsZero() {
		return nil, nil
	}
	t, err := c.tree(s, h)
	if err != nil {
		return nil, fmt.Errorf("read tree %s: %w", h, err)
	}
	return t.Entries, nil
}

// addAll adds p, or every file below it when e is a directory.
func addAll(s storer.EncodedObjectStorer, c *Cache, p string, e object.TreeEntry, out *[]string) error {
	if e.Mode != filemode.Dir {
		*out = append(*out, p)
		return nil
	}
	return diffTrees(s, c, p, plumbing.ZeroHash, e.Hash, out)
}
