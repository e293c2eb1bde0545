package mutator

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/go-git/go-billy/v5"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/index"
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
		return conflictf("another writer is moving %s (%s exists; remove it if no cuecast or git is running); nothing changed: send it again", name.Short(), fs.Join(fs.Root(), lock))
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
	if err := stillAt(r, name, old); err != nil {
		return err
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

// indexLock is git's index.lock, held by a change to the checked-out
// branch from before it moves the branch until the work tree and the
// index follow it. moveRef's lock alone serialised the branch, not what
// follows it: two writers could write the index over each other, leave
// the work tree at the older change, or find the other's change on its
// way into the work tree and refuse it as "uncommitted changes"
// (TestTwoMutatorsKeepWorkTree). The git CLI takes the same lock to write
// the index, so it waits out a change as well.
type indexLock struct {
	fs   billy.Filesystem
	f    billy.File
	done bool
}

const indexLockName = "index.lock"

// lockIndex takes index.lock, or fails with ErrConflict when another
// writer (or git) holds it.
func lockIndex(r *git.Repository) (*indexLock, error) {
	st, ok := r.Storer.(interface{ Filesystem() billy.Filesystem })
	if !ok {
		return nil, errors.New("lock the index: the repository is not on disk")
	}
	fs := st.Filesystem()
	f, err := fs.OpenFile(indexLockName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o666)
	if errors.Is(err, os.ErrExist) {
		return nil, conflictf("another writer is updating the work tree (%s exists; remove it if no cuecast or git is running); nothing changed: send it again", fs.Join(fs.Root(), indexLockName))
	}
	if err != nil {
		return nil, fmt.Errorf("lock the index: %w", err)
	}
	return &indexLock{fs: fs, f: f}, nil
}

// write writes idx into the lock file and renames it over the index, so
// a reader sees the old index or the new one; the lock is released.
func (l *indexLock) write(idx *index.Index) error {
	bw := bufio.NewWriter(l.f)
	if err := index.NewEncoder(bw).Encode(idx); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if err := l.f.Close(); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	if err := l.fs.Rename(indexLockName, "index"); err != nil {
		return fmt.Errorf("write index: %w", err)
	}
	l.done = true
	return nil
}

// release drops the lock unless write already did.
func (l *indexLock) release() {
	if l == nil || l.done {
		return
	}
	l.done = true
	_ = l.f.Close()
	_ = l.fs.Remove(indexLockName)
}

// checkBranchName refuses a branch name git's check-ref-format --branch
// refuses, saying which rule it breaks. Written as given, such a name made
// refs git cannot read or reads as something else: main.lock is git's lock
// of main (every later change to main failed until it was removed), HEAD
// and @ name HEAD, a..b and a~1 are revision syntax, ../x leaves refs/.
func checkBranchName(name string) error {
	bad := func(why string) error { return fmt.Errorf("branch %q is not a branch name git accepts: %s", name, why) }
	switch {
	case name == "@":
		return bad("@ alone is HEAD")
	case name == "HEAD":
		return bad("HEAD names the checked-out commit")
	case strings.HasPrefix(name, "-"):
		return bad("it starts with -")
	case strings.HasPrefix(name, "/"), strings.HasSuffix(name, "/"), strings.Contains(name, "//"):
		return bad("a / at the start or end, or two in a row")
	case strings.HasSuffix(name, "."):
		return bad("it ends with .")
	case strings.Contains(name, ".."):
		return bad("it holds ..")
	case strings.Contains(name, "@{"):
		return bad("it holds @{")
	}
	if i := strings.IndexFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f || strings.ContainsRune(" ~^:?*[\\", r) }); i >= 0 {
		return bad(fmt.Sprintf("it holds %q (no space, control character or any of ~^:?*[\\)", name[i:i+1]))
	}
	for _, c := range strings.Split(name, "/") {
		switch {
		case strings.HasPrefix(c, "."):
			return bad(fmt.Sprintf("the part %q starts with .", c))
		case strings.HasSuffix(c, ".lock"):
			return bad(fmt.Sprintf("the part %q ends with .lock, git's lock files", c))
		}
	}
	return nil
}
