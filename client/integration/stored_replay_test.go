package integration_test

import (
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestStoredReplayOfAGenuineRollback plays whoever holds a connection that
// may write the version stream (the distributor credential, the hub's
// host) but not the signing key: it stores an old, genuine, signed
// all-buckets rollback pointer again, over the newer pointer it rolled
// up. The stream now says the rollback governs, and a re-read is
// authoritative (a stream restored from a backup must be followed), so
// before the fix a running instance went back to the rollback's version
// at its next reconcile, and an instance restarted on its last-known-good
// file at its start read. Neither may move back: a rollback pointer is
// only followed when its signed revision is above that of the pointer the
// instance runs. Everyone still applies the next genuine change.
func TestStoredReplayOfAGenuineRollback(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	live, evLive := e.newClient("live", client.WithReconcile(300*time.Millisecond))
	wLive := watch(t, live)
	path := lkgPath(t)

	js := natstest.JetStream(t, e.dnc)
	st, err := js.Stream(t.Context(), "CUECAST")
	if err != nil {
		t.Fatal(err)
	}
	all := cuecast.AllPointerSubject(cfg)
	buckets := make([]int, cuecast.Buckets)
	for i := range buckets {
		buckets[i] = i
	}

	// The history: v1, v2, an emergency rollback of every bucket to v1
	// (captured as stored), then v3.
	e.ship(1, body(1))
	e.ship(2, body(2))
	waitVersion(t, wLive, evLive, 2)
	if err := e.d.SetPointers(t.Context(), cfg, buckets, cuecast.Pointer{Version: 1, Rollback: true, Reason: "bad v2"}); err != nil {
		t.Fatal(err)
	}
	rollback, err := st.GetLastMsgForSubject(t.Context(), all)
	if err != nil {
		t.Fatal(err)
	}
	waitVersion(t, wLive, evLive, 1)
	e.ship(3, body(3))
	waitVersion(t, wLive, evLive, 3)
	e.writeLKGAt(path, "restarted", 3)

	// The attack: the rollback stored again, on its own subject.
	replay := nats.NewMsg(all)
	replay.Header.Set(cuecast.HeaderPointer, rollback.Header.Get(cuecast.HeaderPointer))
	replay.Header.Set("Nats-Rollup", "sub")
	replay.Data = rollback.Data
	if _, err := js.PublishMsg(t.Context(), replay); err != nil {
		t.Fatalf("store the replay: %v", err)
	}
	stored, err := st.GetLastMsgForSubject(t.Context(), all)
	if err != nil || stored.Header.Get(cuecast.HeaderPointer) != rollback.Header.Get(cuecast.HeaderPointer) {
		t.Fatalf("the replay is not what the stream holds (%v): the test proves nothing", err)
	}
	replayedAt := time.Now()

	// The running instance re-reads the stored pointers twice since.
	for range 2 {
		waitEvent(t, evLive, "a reconcile after the replay", func(ev client.Event) bool {
			return ev.Kind == client.EventResync && ev.Detail == "reconcile" && ev.At.After(replayedAt)
		})
		replayedAt = time.Now()
	}
	// An instance restarted on its last-known-good file reads them at start.
	restarted, evRestarted := e.newClient("restarted", client.WithReconcile(time.Hour))
	wRestarted := watch(t, restarted, client.LastKnownGood(path))
	waitEvent(t, evRestarted, "the replayed rollback skipped", func(ev client.Event) bool {
		return ev.Kind == client.EventApplied || ev.Kind == client.EventSkipped
	})

	for _, w := range []struct {
		name string
		w    *client.Watcher
		ev   *events
	}{{"running", wLive, evLive}, {"restarted", wRestarted, evRestarted}} {
		if s := w.w.Current(); s.Version != 3 {
			t.Errorf("%s instance runs version %d after a stored replay of the rollback to 1, want 3; events:%s", w.name, s.Version, w.ev)
		}
	}

	// The next genuine change reaches both, and nothing older ran since 3.
	e.ship(4, body(4))
	for _, w := range []struct {
		name string
		w    *client.Watcher
		ev   *events
	}{{"running", wLive, evLive}, {"restarted", wRestarted, evRestarted}} {
		waitVersion(t, w.w, w.ev, 4)
		applied := w.ev.applied()
		if i := slices.Index(applied, 3); i >= 0 && !slices.Equal(applied[i:], []uint64{3, 4}) {
			t.Errorf("%s instance applied %v after version 3, want [3 4]", w.name, applied[i:])
		}
		if slices.Contains(applied, 1) && w.name == "restarted" {
			t.Errorf("restarted instance applied version 1: %v", applied)
		}
	}
}
