package gitfs

import (
	"testing"

	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// TestGitCompare holds gitCompare to comparing gitSortName's strings.
func TestGitCompare(t *testing.T) {
	names := []string{"", "a", "a.cue", "a/", "a/b", "a0", "a-", "ab", "b", "a.", "/"}
	for _, name := range names {
		if name == "" {
			continue
		}
		for _, mode := range []filemode.FileMode{filemode.Regular, filemode.Dir} {
			e := &object.TreeEntry{Name: name, Mode: mode}
			for _, key := range names {
				want := 0
				switch n := gitSortName(e); {
				case n < key:
					want = -1
				case n > key:
					want = 1
				}
				if got := gitCompare(e, key); got != want {
					t.Errorf("gitCompare(%q dir=%v, %q) = %d, want %d", name, mode == filemode.Dir, key, got, want)
				}
			}
		}
	}
}
