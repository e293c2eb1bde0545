package integration_test

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestKeyRotation follows docs/OPERATIONS.md, "Rotating the signing key",
// with instances applying versions across it: the old key signed v1; serve
// restarts with the new key and signs v2; instances trusting both apply
// both, one that was not given the new key keeps v1 and says why. After the
// old key is retired, an instance trusting only the new key refuses what
// the old key signs (a leaked old seed) and keeps following the new key's
// pointers, at once rather than at its next anti-entropy read.
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	oldKey, oldPub := e.key, e.pub
	newKey, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	newPub, _ := newKey.PublicKey()
	both, evBoth := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), "both", client.WithTrustedKeys(oldPub, newPub))
	missed, evMissed := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), "missed", client.WithTrustedKeys(oldPub))
	wBoth, wMissed := watch(t, both), watch(t, missed)

	e.ship(1, body(1))
	waitVersion(t, wBoth, evBoth, 1)
	waitVersion(t, wMissed, evMissed, 1)

	// Step 3: serve restarts signing with the new key.
	e.key, e.pub = newKey, newPub
	e.newDistributor(envOpts{})
	e.ship(2, body(2))
	waitVersion(t, wBoth, evBoth, 2)
	waitEvent(t, evMissed, "bad signature on v2", func(ev client.Event) bool {
		return ev.Kind == client.EventRejected && ev.Version == 2 && errors.Is(ev.Err, cuecast.ErrBadSignature)
	})
	if s := wMissed.Current(); s.Version != 1 {
		t.Fatalf("instance without the new key runs %d, want 1", s.Version)
	}

	// Step 5: the old key is retired; an instance trusting only the new key
	// starts from the new key's pointer.
	retired, evRetired := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), "retired",
		client.WithTrustedKeys(newPub), client.WithReconcile(time.Hour))
	wRetired := watch(t, retired)
	waitVersion(t, wRetired, evRetired, 2)

	// The old seed signs v3 (as a leaked key could): refused.
	e.key, e.pub = oldKey, oldPub
	e.newDistributor(envOpts{})
	e.ship(3, body(3))
	waitEvent(t, evRetired, "bad signature on v3", func(ev client.Event) bool {
		return ev.Kind == client.EventRejected && ev.Version == 3 && errors.Is(ev.Err, cuecast.ErrBadSignature)
	})
	// The new key's next pointer is followed.
	e.key, e.pub = newKey, newPub
	e.newDistributor(envOpts{})
	e.ship(4, body(4))
	waitVersion(t, wRetired, evRetired, 4)
	waitApplied(t, evRetired, 4)
	if got := evRetired.applied(); !slices.Equal(got, []uint64{2, 4}) {
		t.Fatalf("retired-key instance applied %v, want [2 4]; events:%s", got, evRetired)
	}
	if _, ok := evRetired.find(func(ev client.Event) bool { return ev.Kind == client.EventResync && ev.Detail == "reconcile" }); ok {
		t.Fatal("an anti-entropy read happened; the test proves nothing about the live path")
	}
	waitVersion(t, wBoth, evBoth, 4)
}

// TestResignAfterRotation: when serve becomes active with a new key
// (Distributor.ResignPointers), every config's pointers are signed again by
// it, so an instance trusting only the new key starts from a config that has
// not changed since the switch, on the pointer that governs it (here its
// bucket's rollback, newer than the all-buckets pointer). An instance
// trusting both keys applies nothing new: the governing pointer reaches it
// first and the others do not govern.
func TestResignAfterRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	oldPub := e.pub
	newKey, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	newPub, _ := newKey.PublicKey()
	const instance = "resigned"
	bucket := cuecast.Cohort(cfg.Namespace(), instance)
	e.ship(1, body(1))
	e.ship(2, body(2))
	e.setPointer(bucket, cuecast.Pointer{Version: 1, Rollback: true})
	if err := e.d.SetInstancePointers(t.Context(), cfg, []string{"elsewhere"}, cuecast.Pointer{Version: 1, Rollback: true}); err != nil {
		t.Fatal(err)
	}
	// Started after those writes, the instance applies the one that
	// governs (v1) and nothing else before the rotation. Started before
	// them, under load it had applied only the first v1 when the test
	// took its events, and its v2 and rollback came after: "applied
	// [1 2 1 3], want [1 3]".
	both, evBoth := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), instance, client.WithTrustedKeys(oldPub, newPub))
	wBoth := watch(t, both)
	waitVersion(t, wBoth, evBoth, 1)
	waitApplied(t, evBoth, 1)
	before := evBoth.applied()

	e.key, e.pub = newKey, newPub
	e.newDistributor(envOpts{})
	n, err := e.d.ResignPointers(t.Context())
	if err != nil || n != 3 {
		t.Fatalf("ResignPointers: %d, %v; want the all-buckets, bucket and instance pointers", n, err)
	}
	if n, err := e.d.ResignPointers(t.Context()); err != nil || n != 0 {
		t.Fatalf("ResignPointers again: %d, %v; want nothing to do", n, err)
	}
	fresh, evFresh := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), instance, client.WithTrustedKeys(newPub))
	wFresh := watch(t, fresh)
	waitVersion(t, wFresh, evFresh, 1)
	other, evOther := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), "elsewhere", client.WithTrustedKeys(newPub))
	waitVersion(t, watch(t, other), evOther, 1)

	// The next change reaches everyone; nothing flipped on the way.
	e.ship(3, body(3))
	waitVersion(t, wBoth, evBoth, 3)
	waitVersion(t, wFresh, evFresh, 3)
	// The applied event follows the swap that Current shows, so wait for it
	// rather than read it at once.
	want := append(before, 3)
	poll.Until(t, "the applied events of the instance trusting both", poll.Patience, func() (bool, string) {
		got := evBoth.applied()
		return slices.Equal(got, want), fmt.Sprintf("applied %v, want %v; events:%s", got, want, evBoth)
	})
}

// TestVariantIndexAfterRotation: a variant index is a version, signed once
// by the key of its day and never again; after a rotation its all-buckets
// pointer, which serve re-signs, authenticates it (docs/PROTOCOL.md §10
// step 3), so an instance trusting only the new key takes its variant.
// Before the re-signing, such an instance refuses the index and watches the
// base path; when the index reaches it there, signed anew, it says the
// index was refused at its start, not that it started before the config had
// variants, and watched again it takes its variant.
func TestVariantIndexAfterRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.shipVariants()
	newKey, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	e.key = newKey
	e.pub, _ = newKey.PublicKey()
	e.newDistributor(envOpts{})

	c, ev := e.newClient("v-rotated", client.WithDimensions(map[string]string{"env": "prod", "region": "eu"}))
	watch(t, c)
	waitEvent(t, ev, "the old key's index refused", func(e client.Event) bool {
		return e.Kind == client.EventRejected && e.Version == 1 && errors.Is(e.Err, cuecast.ErrBadSignature)
	})
	if n, err := e.d.ResignPointers(t.Context()); err != nil || n == 0 {
		t.Fatalf("ResignPointers: %d, %v; want the index's and the variants' pointers", n, err)
	}
	rej := waitEvent(t, ev, "the re-signed index rejected as content", func(e client.Event) bool {
		return e.Kind == client.EventRejected && errors.Is(e.Err, client.ErrVariant)
	})
	if msg := rej.Err.Error(); !strings.Contains(msg, "its variant index was refused when this watcher started") || strings.Contains(msg, "started before") {
		t.Fatalf("rejection %q; want it to say the index was refused at the watcher's start", msg)
	}
	if s := waitVersion(t, watch(t, c), ev, 1); s.Config != prodEU {
		t.Fatalf("watched again: %s, want %s", s.Config, prodEU)
	}
}

// TestLastKnownGoodAfterRotation: an instance trusting both keys during a
// rotation keeps, in its last-known-good file, the pointer that re-signed
// its version, though the version does not change: restarted after the old
// key is retired, trusting only the new one and with the server out of
// reach, it serves that file instead of refusing it.
func TestLastKnownGoodAfterRotation(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	oldPub := e.pub
	newKey, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	newPub, _ := newKey.PublicKey()
	const instance = "lkg-rotated"
	e.ship(1, body(1))
	path := lkgPath(t)
	both, evBoth := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), instance, client.WithTrustedKeys(oldPub, newPub))
	waitVersion(t, watch(t, both, client.LastKnownGood(path)), evBoth, 1)
	waitApplied(t, evBoth, 1)

	e.key, e.pub = newKey, newPub
	e.newDistributor(envOpts{})
	if n, err := e.d.ResignPointers(t.Context()); err != nil || n == 0 {
		t.Fatalf("ResignPointers: %d, %v; want the all-buckets pointer", n, err)
	}
	resigned := e.pointer(cuecast.Cohort(cfg.Namespace(), instance))
	poll.Until(t, "the re-signed pointer in the last-known-good file", poll.Patience, func() (bool, string) {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), `"sig":"`+resigned.Signature+`"`), fmt.Sprintf("%v %.300s; events:%s", err, b, evBoth)
	})
	if got := evBoth.applied(); !slices.Equal(got, []uint64{1}) {
		t.Fatalf("applied %v, want [1]: the re-signed pointer names what runs", got)
	}

	p := startProxy(t, e.srv.Addr().String())
	p.cut()
	retired, evRetired := newClientOn(t, p.connect(t), instance, client.WithTrustedKeys(newPub))
	w := watch(t, retired, client.LastKnownGood(path))
	if s := w.Current(); s.Version != 1 || !s.FromLastKnownGood {
		t.Fatalf("offline start trusting only the new key: version %d (last-known-good %v), want 1 from the file; events:%s", s.Version, s.FromLastKnownGood, evRetired)
	}
}
