// Package revert makes revert commits: Git is the audit log of cuecast, and a
// rollback is a commit that restores what a commit changed.
package revert

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/gitfs"
)

// ErrConflict: a later commit changed a file the reverted commit changed, so
// restoring the parent's content would silently undo that later work too.
var ErrConflict = errors.New("revert conflicts with a later commit")

// Commit reverts commit sha in the work tree of r, which must be on its branch
// tip, by restoring the content its first parent had for each file it
// changed, and commits that as "Revert "<subject>"". It refuses, with an error
// wrapping ErrConflict, when a commit after sha touched the same files.
func Commit(r *git.Repository, sha string, author *object.Signature) (plumbing.Hash, error) {
	target, err := r.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: %w", sha, err)
	}
	if target.NumParents() == 0 {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: it is the root commit", cuecast.ShortCommit(sha))
	}
	parent, err := target.Parent(0)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: parent: %w", cuecast.ShortCommit(sha), err)
	}
	changes, err := diff(r.Storer, parent, target)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: %w", cuecast.ShortCommit(sha), err)
	}
	head, err := r.Head()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: head: %w", cuecast.ShortCommit(sha), err)
	}
	headCommit, err := r.CommitObject(head.Hash())
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: head: %w", cuecast.ShortCommit(sha), err)
	}
	if head.Hash() != target.Hash {
		later, err := diff(r.Storer, target, headCommit)
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("revert %s: %w", cuecast.ShortCommit(sha), err)
		}
		for name := range changes {
			if _, ok := later[name]; ok {
				return plumbing.ZeroHash, fmt.Errorf("revert %s: %w: %s changed again after it (revert the later commit first, or edit by hand)", cuecast.ShortCommit(sha), ErrConflict, name)
			}
		}
	}
	wt, err := r.Worktree()
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: %w", cuecast.ShortCommit(sha), err)
	}
	root := wt.Filesystem.Root()
	for name := range changes {
		path := filepath.Join(root, filepath.FromSlash(name))
		f, err := parent.File(name)
		if errors.Is(err, object.ErrFileNotFound) {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return plumbing.ZeroHash, fmt.Errorf("revert %s: remove %s: %w", cuecast.ShortCommit(sha), name, err)
			}
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("revert %s: %s: %w", cuecast.ShortCommit(sha), name, err)
		}
		content, err := f.Contents()
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("revert %s: %s: %w", cuecast.ShortCommit(sha), name, err)
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("revert %s: %w", cuecast.ShortCommit(sha), err)
		}
		if err := restore(path, f.Mode, content); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("revert %s: write %s: %w", cuecast.ShortCommit(sha), name, err)
		}
	}
	for name := range changes {
		if _, err := wt.Add(name); err != nil {
			if _, rmErr := wt.Remove(name); rmErr != nil {
				return plumbing.ZeroHash, fmt.Errorf("revert %s: stage %s: %w", cuecast.ShortCommit(sha), name, err)
			}
		}
	}
	if author == nil {
		author = &object.Signature{Name: "cuecast", Email: "cuecast@localhost"}
	}
	if author.When.IsZero() {
		author.When = time.Now()
	}
	msg := fmt.Sprintf("Revert %q\n\nThis reverts commit %s.\n", subject(target.Message), target.Hash)
	h, err := wt.Commit(msg, &git.CommitOptions{Author: author})
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("revert %s: commit: %w", cuecast.ShortCommit(sha), err)
	}
	return h, nil
}

// Undo takes back a revert of sha on r's current branch, committed by
// Commit or left half-done by its error: the branch goes back to head (the
// commit the revert was made on) and each file the revert touches is, in
// the work tree and the index, as head has it. Nothing else changes, so an
// untracked file stays where it was. It is for a revert that could not be
// published: nothing of it is left, and the same revert can be made again.
func Undo(r *git.Repository, sha string, head plumbing.Hash) error {
	target, err := r.CommitObject(plumbing.NewHash(sha))
	if err != nil {
		return fmt.Errorf("undo revert of %s: %w", cuecast.ShortCommit(sha), err)
	}
	parent, err := target.Parent(0)
	if err != nil {
		return fmt.Errorf("undo revert of %s: parent: %w", cuecast.ShortCommit(sha), err)
	}
	changes, err := diff(r.Storer, parent, target)
	if err != nil {
		return fmt.Errorf("undo revert of %s: %w", cuecast.ShortCommit(sha), err)
	}
	wt, err := r.Worktree()
	if err != nil {
		return fmt.Errorf("undo revert of %s: %w", cuecast.ShortCommit(sha), err)
	}
	files := slices.Sorted(maps.Keys(changes))
	// A hard reset without Files resets the whole work tree, and go-git's
	// deletes the untracked files in it: only the revert's paths are reset.
	mode := git.HardReset
	if len(files) == 0 {
		mode = git.MixedReset
	}
	if err := wt.Reset(&git.ResetOptions{Commit: head, Mode: mode, Files: files}); err != nil {
		return fmt.Errorf("undo revert of %s: reset to %s: %w", cuecast.ShortCommit(sha), cuecast.ShortCommit(head.String()), err)
	}
	return nil
}

// diff returns the paths that differ between two commits' trees
// (gitfs.Diff: the one tree diff the tailer and the PR check use too).
// restore puts a file back at path as the parent had it: its content and
// its mode, a symlink as a symlink (whose content is its target) and an
// executable as one. Whatever is at path goes first, so a symlink there is
// replaced, never written through.
func restore(path string, mode filemode.FileMode, content string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	switch mode {
	case filemode.Symlink:
		return os.Symlink(content, path)
	case filemode.Executable:
		return os.WriteFile(path, []byte(content), 0o755)
	default:
		return os.WriteFile(path, []byte(content), 0o644)
	}
}

func diff(s storer.EncodedObjectStorer, from, to *object.Commit) (map[string]struct{}, error) {
	paths, err := gitfs.Diff(s, nil, from.TreeHash, to.TreeHash)
	if err != nil {
		return nil, err
	}
	out := make(map[string]struct{}, len(paths))
	for _, p := range paths {
		out[p] = struct{}{}
	}
	return out, nil
}

func subject(msg string) string {
	for i, r := range msg {
		if r == '\n' {
			return msg[:i]
		}
	}
	return msg
}
