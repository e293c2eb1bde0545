package distributor_test

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// twoWriters starts a server and two writers of its stream, each on its own
// connection, with o; old holds the writer fence, for term 5.
func twoWriters(t *testing.T, o distributor.Options) (s *natstest.Server, old, cur *distributor.Distributor) {
	t.Helper()
	s, old, cur = twoDistributors(t, o)
	if err := old.ClaimFence(t.Context(), 5, "old"); err != nil {
		t.Fatalf("old claims: %v", err)
	}
	return s, old, cur
}

// twoDistributors are two Distributors with o, each on its own connection
// to one new server, as two serve processes share a NATS.
func twoDistributors(t *testing.T, o distributor.Options) (s *natstest.Server, d1, d2 *distributor.Distributor) {
	t.Helper()
	s = natstest.Start(t)
	newD := func() *distributor.Distributor {
		d, err := distributor.New(t.Context(), s.Connect(t), o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		return d
	}
	return s, newD(), newD()
}

// TestFenceRefusesStaleWriter: issue 32, defect 1, at the store. A writer
// whose term is over (another claimed the fence since) has its version
// refused by the stream, however it read the latest version; nothing it
// sent is stored, and the writer holding the fence publishes the next
// version as usual. The stale writer cannot take the fence back either.
func TestFenceRefusesStaleWriter(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	_, old, cur := twoWriters(t, distributor.Options{Logger: slog.New(slog.NewTextHandler(t.Output(), nil))})
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

// TestFenceRefusesStalePointerWrites: issue 32's "a version can only be
// published by the holder of the current lease epoch", for pointers. A
// writer whose term is over holds what every replica holds (the signing
// key, a connection allowed to write the stream) and a cache of the
// pointers it wrote. It points an instance's bucket, a subject no writer
// touched since (so its compare-and-swap holds, and its revision is the
// newest), back at v1 as a rollback, and the instance itself too. Nothing
// stored may change, and the instance must go on to the fence holder's
// next version without ever running v1 again.
func TestFenceRefusesStalePointerWrites(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	key, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	pub, _ := key.PublicKey()
	s, old, cur := twoWriters(t, distributor.Options{SigningKey: key}) // replicas share the key
	for n := range uint64(2) {
		if err := old.Deploy(ctx, mustPublish(t, old, n+1, content(int(n+1)))); err != nil {
			t.Fatalf("deploy v%d: %v", n+1, err)
		}
	}
	w := natstest.Watch(t, s.Connect(t), cfg, []client.Option{client.WithInstance("web-1"), client.WithTrustedKeys(pub)})
	var ran []uint64 // the versions web-1 applied, in order
	var mu sync.Mutex
	go func() {
		for u := range w.Updates() {
			mu.Lock()
			ran = append(ran, u.Version)
			mu.Unlock()
		}
	}()
	on := func(n uint64) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("web-1 on v%d", n), poll.Patience, func() (bool, string) {
			return w.Current().Version == n, fmt.Sprint("on v", w.Current().Version)
		})
	}
	// read waits for the reader of Updates to have v n: the watcher's
	// current version moves before its update is read, and a loaded box
	// stopped the watcher with v4 still unread (it read [2 3]). Updates
	// keeps only the newest unread, so v3 is read before v4 is deployed.
	read := func(n uint64) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("web-1's update to v%d read", n), poll.Patience, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			return slices.Contains(ran, n), fmt.Sprint("read ", ran)
		})
	}
	on(2)
	if err := cur.ClaimFence(ctx, 9, "cur"); err != nil {
		t.Fatalf("cur claims: %v", err)
	}
	if err := cur.Deploy(ctx, mustPublish(t, cur, 3, content(3))); err != nil {
		t.Fatalf("deploy v3: %v", err)
	}
	on(3)
	read(3)

	b := w.Bucket()
	before, err := cur.Pointer(ctx, cfg, b)
	if err != nil {
		t.Fatal(err)
	}
	stale := cuecast.Pointer{Version: 1, Rollback: true, Reason: "a decision from before the term ended"}
	if err := old.SetPointers(ctx, cfg, []int{b}, stale); !errors.Is(err, cuecast.ErrFenced) {
		t.Errorf("stale writer moves bucket %d: got %v, want ErrFenced", b, err)
	}
	if err := old.SetInstancePointers(ctx, cfg, []string{"web-1"}, stale); !errors.Is(err, cuecast.ErrFenced) {
		t.Errorf("stale writer moves web-1: got %v, want ErrFenced", err)
	}
	if after, err := cur.Pointer(ctx, cfg, b); err != nil || after.Version != before.Version || after.Revision != before.Revision {
		t.Errorf("bucket %d's pointer after the stale writes: v%d rev %d (%v), want v%d rev %d unchanged",
			b, after.Version, after.Revision, err, before.Version, before.Revision)
	}
	if p, err := cur.InstancePointer(ctx, cfg, "web-1"); !errors.Is(err, cuecast.ErrNotFound) {
		t.Errorf("web-1's own pointer after the stale write: v%d (%v), want none", p.Version, err)
	}

	if err := cur.Deploy(ctx, mustPublish(t, cur, 4, content(4))); err != nil {
		t.Fatalf("deploy v4: %v", err)
	}
	on(4)
	read(4)
	w.Stop()
	mu.Lock()
	defer mu.Unlock()
	if i := slices.Index(ran, 2); i < 0 || !slices.Equal(ran[i:], []uint64{2, 3, 4}) {
		t.Errorf("web-1 applied %v, want v2, v3, v4 and nothing between", ran)
	}
}
