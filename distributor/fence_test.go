package distributor_test

import (
	"errors"
	"log/slog"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestFenceRefusesStaleWriter: issue 32, defect 1, at the store. A writer
// whose term is over (another claimed the fence since) has its version
// refused by the stream, however it read the latest version; nothing it
// sent is stored, and the writer holding the fence publishes the next
// version as usual. The stale writer cannot take the fence back either.
func TestFenceRefusesStaleWriter(t *testing.T) {
	s := natstest.Start(t)
	log := slog.New(slog.NewTextHandler(t.Output(), nil))
	ctx := t.Context()
	newD := func() *distributor.Distributor {
		d, err := distributor.New(ctx, s.Connect(t), distributor.Options{Logger: log})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	old, cur := newD(), newD()
	if err := old.ClaimFence(ctx, 5, "old"); err != nil {
		t.Fatalf("old claims: %v", err)
	}
	mustPublish(t, old, 1, content(1))
	mustPublish(t, old, 2, content(2)) // a fenced publish after a fenced publish
	if err := cur.ClaimFence(ctx, 9, "cur"); err != nil {
		t.Fatalf("cur claims: %v", err)
	}

	// The stale writer knows v2 is the latest (its cache is right): only
	// the fence can refuse it.
	err := old.Publish(ctx, version(3), content(30))
	if !errors.Is(err, cuecast.ErrFenced) {
		t.Fatalf("stale writer's publish: got %v, want ErrFenced", err)
	}
	if v, err := cur.Latest(ctx, cfg); err != nil || v.Version != 2 {
		t.Fatalf("latest after the refused publish: v%d (%v), want v2", v.Version, err)
	}
	if err := old.ClaimFence(ctx, 5, "old"); !errors.Is(err, cuecast.ErrFenced) {
		t.Fatalf("stale writer claims again: got %v, want ErrFenced", err)
	}
	if err := old.Publish(ctx, version(3), content(30)); !errors.Is(err, cuecast.ErrFenced) {
		t.Fatalf("stale writer's second publish: got %v, want ErrFenced", err)
	}

	want := mustPublish(t, cur, 3, content(3))
	got, body, err := old.Version(ctx, cfg, 3)
	if err != nil || got.Checksum != want.Checksum || string(body) != string(content(3)) {
		t.Fatalf("v3: %+v %q (%v), want the fence holder's", got, body, err)
	}
	mustPublish(t, cur, 4, content(4))
}
