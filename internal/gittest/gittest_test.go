package gittest_test

import (
	"sync"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/internal/gittest"
)

// TestCommitMovesMainAtomically: a process reading main while commits land
// (a serve starting, a poll) always finds it, at some commit. go-git
// truncates and rewrites a ref in place, and `cuecast serve` started
// during a test's commit exited with "no such branch".
func TestCommitMovesMainAtomically(t *testing.T) {
	repo := gittest.New(t)
	repo.CommitFiles("first", map[string]string{"a.txt": "0"})
	var wg sync.WaitGroup
	done := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := range 30 {
			repo.CommitFiles("next", map[string]string{"a.txt": string(rune('a' + i%26))})
		}
	}()
	reads := 0
	for {
		select {
		case <-done:
			wg.Wait()
			if reads == 0 {
				t.Fatal("no read raced the commits")
			}
			return
		default:
		}
		r, err := git.PlainOpen(repo.Dir)
		if err != nil {
			t.Fatalf("open while committing: %v", err)
		}
		if _, err := r.Reference(plumbing.NewBranchReferenceName("main"), true); err != nil {
			t.Fatalf("read main while committing: %v", err)
		}
		if _, err := r.Head(); err != nil {
			t.Fatalf("read HEAD while committing: %v", err)
		}
		reads++
	}
}
