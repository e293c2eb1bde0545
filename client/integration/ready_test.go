package integration_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cuecast/cuecast/client"
)

// TestReadyAtFirstVersion: Ready stays open while nothing is deployed (and
// WaitReady says so with a typed error when its context ends), and closes
// at the first verified version.
func TestReadyAtFirstVersion(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	c, ev := e.newClient("ready-1")
	w := watch(t, c)
	select {
	case <-w.Ready():
		t.Fatalf("Ready closed before any version; current %+v", w.Current())
	default:
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := w.WaitReady(ctx)
	if !errors.Is(err, client.ErrNotReady) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitReady before any version: got %v, want ErrNotReady and DeadlineExceeded", err)
	}

	e.ship(1, body(1))
	if err := w.WaitReady(t.Context()); err != nil {
		t.Fatalf("WaitReady after version 1: %v; events:%s", err, ev)
	}
	if s := w.Current(); s.Version != 1 {
		t.Fatalf("Current once ready: got version %d, want 1", s.Version)
	}
	w.Stop()
	if err := w.WaitReady(t.Context()); err != nil {
		t.Fatalf("WaitReady after Stop of a ready watcher: %v", err)
	}
}

// TestReadyFromLastKnownGood: with the server down, a verified
// last-known-good file makes the watcher ready at once; a watcher that
// stops without a version reports ErrNotReady.
func TestReadyFromLastKnownGood(t *testing.T) {
	t.Parallel()
	e, _, path, nc2 := lastKnownGoodOutage(t, "ready-lkg", 1)
	c2, _ := e.newClientOn(nc2, "ready-lkg")
	w2 := watch(t, c2, client.LastKnownGood(path))
	select {
	case <-w2.Ready():
	default:
		t.Fatalf("Ready not closed with a verified last-known-good file; current %+v", w2.Current())
	}
	if s := w2.Current(); s.Version != 1 || !s.FromLastKnownGood {
		t.Fatalf("Current: got %+v, want version 1 from last-known-good", s)
	}

	// No file, no server: not ready; stopping says so.
	c3, _ := e.newClientOn(nc2, "ready-none")
	w3 := watch(t, c3, client.LastKnownGood(lkgPath(t)))
	w3.Stop()
	if err := w3.WaitReady(t.Context()); !errors.Is(err, client.ErrNotReady) {
		t.Fatalf("WaitReady of a stopped watcher without a version: got %v, want ErrNotReady", err)
	}
}
