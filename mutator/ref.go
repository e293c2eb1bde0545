package mutator

import (
	"errors"
	"fmt"
	"os"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
)

// moveRef moves the branch name to to, only from old: nil means the
// branch must not exist yet, a zero to deletes it. A branch that is
// elsewhere fails with ErrConflict and is left as it is.
//
// It moves the ref as git does, not as go-git's CheckAndSetReference
// does, which left two windows between two writers (two Mutators, two
// processes) in which an update was lost: with no old ref it writes
// unconditionally, so a writer creating a branch overwrote the one that
// had created it an instant before; and it truncates the ref file and
// writes it again in place, so a writer reading the branch in between
// found it absent, based its change on the other branch's head and then
// "created" the branch over the other's commit. Here the writer takes
// <ref>.lock (O_EXCL: one writer at a time, the git CLI included),
// compares the ref with old while holding it, writes the new head into
// the lock file and renames it over the ref, so a reader sees the old head
// or the new one, never none.
func moveRef(r *git.Repository, name plumbing.ReferenceName, to plumbing.Hash, old *plumbing.Reference) (err error) {
	st, ok := r.Storer.(interface{ Filesystem() billy.Filesystem })
	if !ok {
		return fmt.Errorf("move %s: the repository is not on disk: no lock file to move its branch under", name.Short())
	}
	fs := st.Filesystem()
	lock := name.String() + ".lock"
	f, err := fs.OpenFile(lock, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, os.ErrExist) {
		return fmt.Errorf("%w: another writer is moving %s (%s exists; remove it if no cuecast or git is running); nothing changed: send it again", ErrConflict, name.Short(), fs.Join(fs.Root(), lock))
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", name.Short(), err)
	}
	renamed := false
	defer func() {
		if renamed {
			return
		}
		// The lock stays only if it cannot be removed; then git and the
		// next writer name it.
		_ = f.Close()
		if rerr := fs.Remove(lock); rerr != nil && err == nil {
			err = fmt.Errorf("unlock %s: %w", name.Short(), rerr)
		}
	}()
	cur, err := r.Storer.Reference(name)
	switch {
	case errors.Is(err, plumbing.ErrReferenceNotFound):
		if old != nil {
			return fmt.Errorf("%w: %s was deleted while the change was verified; nothing changed: send it again", ErrConflict, name.Short())
		}
	case err != nil:
		return fmt.Errorf("read %s: %w", name.Short(), err)
	case old == nil:
		return fmt.Errorf("%w: branch %s was created while the change was verified; nothing changed: send it again", ErrConflict, name.Short())
	case cur.Hash() != old.Hash():
		return fmt.Errorf("%w: %s moved while the change was verified; nothing changed: send it again", ErrConflict, name.Short())
	}
	if to.IsZero() {
		if err := r.Storer.RemoveReference(name); err != nil {
			return fmt.Errorf("remove %s: %w", name.Short(), err)
		}
		return nil
	}
	if _, err := f.Write([]byte(to.String() + "\n")); err != nil {
		return fmt.Errorf("write %s: %w", lock, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", lock, err)
	}
	if err := fs.Rename(lock, name.String()); err != nil {
		return fmt.Errorf("move %s: %w", name.Short(), err)
	}
	renamed = true
	return nil
}
