package tailer_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/tailer"
)

// TestRunStopsWhenFenced: issue 32, defect 1. A tailer whose writer fence
// another writer claimed since (a later lease term) has its next version
// refused by the store; Run returns that refusal, wrapping
// cuecast.ErrFenced, instead of polling on with state another writer is
// moving, and neither the version nor the cursor is written.
func TestRunStopsWhenFenced(t *testing.T) {
	e := newEnv(t)
	r := e.repo
	sub, err := e.nc.SubscribeSync("ccr.pay.v.b")
	if err != nil {
		t.Fatal(err)
	}
	first := r.CommitFiles("initial", baseRepo())
	if err := e.dist.ClaimFence(e.ctx, 1, "stale"); err != nil {
		t.Fatal(err)
	}
	tl := e.tailer(tailer.Config{Interval: time.Hour})
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()
	nextVersion(t, sub, 1)

	later, err := distributor.New(e.ctx, e.srv.Connect(t), distributor.Options{Logger: e.log})
	if err != nil {
		t.Fatal(err)
	}
	if err := later.ClaimFence(e.ctx, 2, "later"); err != nil {
		t.Fatal(err)
	}
	r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	tl.Wake()
	select {
	case err := <-done:
		if !errors.Is(err, cuecast.ErrFenced) {
			t.Fatalf("Run: got %v, want an error wrapping ErrFenced", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run went on polling after the store refused its version as fenced")
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
