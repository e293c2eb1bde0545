package mutator

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

// refWriters is how many writers race on one ref in the tests below, each
// with its own repository handle (as two processes have).
const refWriters = 8

// TestMoveRefCreatesOnce: writers that each create the same new branch
// (old nil: it must not exist) at once; exactly one may succeed, every
// other gets ErrConflict, and the branch is the winner's. A create that
// overwrote a branch made in between is the lost update of
// TestTwoMutators (the first request on a new branch).
func TestMoveRefCreatesOnce(t *testing.T) {
	t.Parallel()
	r := gittest.New(t)
	for round := range 20 {
		name := plumbing.NewBranchReferenceName(fmt.Sprintf("new-%d", round))
		errs := make([]error, refWriters)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range refWriters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				repo, err := gitfs.Open(r.Dir)
				if err != nil {
					errs[i] = err
					return
				}
				<-start
				errs[i] = moveRef(repo, name, fakeHash(round*refWriters+i), nil)
			}()
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: writers %d and %d both created %s", round, winner, i, name.Short())
			case err == nil:
				winner = i
			case !errors.Is(err, ErrConflict):
				t.Fatalf("round %d: writer %d: %v, want success or a conflict", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no writer created %s", round, name.Short())
		}
		ref, err := r.Git.Reference(name, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := fakeHash(round*refWriters + winner); ref.Hash() != want {
			t.Fatalf("round %d: %s at %s, want the winner's %s", round, name.Short(), ref.Hash(), want)
		}
	}
}

// TestMoveRefNeverAbsent: while writers move an existing branch, one step
// each from the head they read, a reader never finds the branch missing
// (a ref written in place is empty for a moment, which go-git reads as
// absent: a writer then created the branch again over the other's commit),
// and every move that succeeded is one step from the move before it.
func TestMoveRefNeverAbsent(t *testing.T) {
	t.Parallel()
	r := gittest.New(t)
	name := plumbing.NewBranchReferenceName("moving")
	if err := r.Git.Storer.SetReference(plumbing.NewHashReference(name, fakeHash(0))); err != nil {
		t.Fatal(err)
	}
	const moves = 200
	var wg sync.WaitGroup
	var mu sync.Mutex
	landed := map[plumbing.Hash]plumbing.Hash{} // new ▶ old
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		repo, err := gitfs.Open(r.Dir)
		if err != nil {
			readerErr <- err
			return
		}
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := repo.Storer.Reference(name); err != nil {
				readerErr <- fmt.Errorf("reader: %s: %w", name.Short(), err)
				return
			}
		}
	}()
	for w := range refWriters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			repo, err := gitfs.Open(r.Dir)
			if err != nil {
				t.Error(err)
				return
			}
			for i := range moves / refWriters {
				cur, err := repo.Storer.Reference(name)
				if err != nil {
					t.Errorf("writer %d: read %s: %v", w, name.Short(), err)
					return
				}
				to := fakeHash(1 + w*moves + i)
				err = moveRef(repo, name, to, cur)
				switch {
				case err == nil:
					mu.Lock()
					landed[to] = cur.Hash()
					mu.Unlock()
				case !errors.Is(err, ErrConflict):
					t.Errorf("writer %d: %v", w, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	// Walk back from the head: every landed move, each on the one before.
	ref, err := r.Git.Storer.Reference(name)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for h := ref.Hash(); h != fakeHash(0); n++ {
		prev, ok := landed[h]
		if !ok {
			t.Fatalf("%s is at %s after %d moves back, which no writer moved it to", name.Short(), h, n)
		}
		h = prev
	}
	t.Logf("%d of %d moves landed", len(landed), moves)
	if len(landed) == 0 {
		t.Fatal("no move landed")
	}
	if n != len(landed) {
		t.Fatalf("%d moves landed, %d on the branch: %d overwritten", len(landed), n, len(landed)-n)
	}
}

// fakeHash is a hash for a ref; moving a ref does not read the commit.
func fakeHash(i int) plumbing.Hash { return plumbing.NewHash(fmt.Sprintf("%040x", i+1)) }
