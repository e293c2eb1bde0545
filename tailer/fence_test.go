package tailer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/tailer"
)

// TestRunStopsWhenFenced: issue 32, defect 1. A tailer whose writer fence
// another writer claimed since (a later lease term) has its next version
// refused by the store; Run returns that refusal, wrapping
// cuecast.ErrFenced, instead of polling on with state another writer is
// moving, and neither the version nor the cursor is written.
//
// The first commit is processed by a Poll that has returned, cursor saved,
// before the fence moves: a commit publishes several configs (pay/a, pay/b,
// web/c here) and only then moves the cursor, so a claim made on seeing one
// of its versions can land before the rest (that is
// TestFencedBetweenVersionsOfOneCommit).
func TestRunStopsWhenFenced(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	first := r.CommitFiles("initial", baseRepo())
	if err := e.dist.ClaimFence(e.ctx, 1, "stale"); err != nil {
		t.Fatal(err)
	}
	tl := e.tailer(tailer.Config{Interval: time.Hour})
	if sum := e.poll(tl); sum.Cursor != first || sum.Versions != 3 {
		t.Fatalf("first poll: cursor %s with %d versions, want %s with 3", sum.Cursor, sum.Versions, first)
	}
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()

	later, err := distributor.New(e.ctx, e.srv.Connect(t), distributor.Options{Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := later.ClaimFence(e.ctx, 2, "later"); err != nil {
		t.Fatal(err)
	}
	r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	tl.Wake()
	if err := poll.Receive(t, "Run's return after the store refused its version as fenced (still polling)", 30*time.Second, done); !errors.Is(err, cuecast.ErrFenced) {
		t.Fatalf("Run: got %v, want an error wrapping ErrFenced", err)
	}
	if v, err := later.Latest(e.ctx, "pay/b"); err != nil || v.Version != 1 {
		t.Errorf("pay/b latest: v%d (%v), want v1: the refused version is not stored", v.Version, err)
	}
	st, err := tl.State(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if st.Cursor != first {
		t.Errorf("cursor at %s, want still %s", st.Cursor, first)
	}
}

// TestFencedBetweenVersionsOfOneCommit: issue 32, defect 1. The fence moves
// after a commit's second version and before its third: the third is
// refused, the cursor does not pass the commit (it was not wholly
// published), and the new holder's tailer, reading the cursor afresh,
// publishes the rest of that commit and takes the two versions already
// stored as they are, publishing neither again.
func TestFencedBetweenVersionsOfOneCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.repo.CommitFiles("initial", baseRepo())
	if err := e.dist.ClaimFence(e.ctx, 1, "stale"); err != nil {
		t.Fatal(err)
	}
	later, err := distributor.New(e.ctx, e.srv.Connect(t), distributor.Options{Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	tl := e.tailer(tailer.Config{Interval: time.Hour})
	tailer.SetAfterPublish(tl, func(v cuecast.Version) {
		if v.Config == "pay/b" {
			if err := later.ClaimFence(e.ctx, 2, "later"); err != nil {
				t.Errorf("claim fence after pay/b: %v", err)
			}
		}
	})
	if _, err := tl.Poll(e.ctx); !errors.Is(err, cuecast.ErrFenced) {
		t.Fatalf("Poll: got %v, want an error wrapping ErrFenced", err)
	}
	st, err := tl.State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Cursor != "" {
		t.Errorf("cursor at %s after web/c was refused, want none: the commit was not wholly published", st.Cursor)
	}
	if vs := e.versions("web/c"); len(vs) != 0 {
		t.Errorf("web/c has %d versions after the fence moved, want none", len(vs))
	}

	next, err := tailer.New(e.ctx, tailer.Config{Repo: e.repo.Dir, Interval: time.Hour, Logger: e.log}, e.js, later, later)
	if err != nil {
		t.Fatal(err)
	}
	sum, err := next.Poll(e.ctx)
	if err != nil {
		t.Fatalf("the new holder's Poll: %v", err)
	}
	if sum.Cursor != first || sum.Versions != 1 {
		t.Errorf("the new holder's poll: cursor %s with %d versions, want %s with 1 (web/c)", sum.Cursor, sum.Versions, first)
	}
	for _, cp := range []cuecast.ConfigPath{"pay/a", "pay/b", "web/c"} {
		vs := e.versions(cp)
		if len(vs) != 1 || vs[0].Commit != first {
			t.Errorf("%s: %d versions, want one, of %s", cp, len(vs), first)
		}
	}
}
