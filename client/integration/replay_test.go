package integration_test

import (
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestReplayedPointersNeverMoveBackOrFreeze: genuine, signed, older pointers
// (a rollback, an instance pointer, a staged and an activation pointer, an
// all-buckets pointer) are sent again on every pointer subject an instance
// follows, with forged headers: a huge Nats-Sequence, and a
// Nats-Last-Sequence that either matches the subject's last real one (no
// gap to notice) or does not. Neither an instance that saw them the first
// time nor one started later applies older content, and both apply the
// next genuine pointer at once: with anti-entropy an hour away, only the
// live path can deliver it. Before pointers carried a signed revision, the
// sequence in the headers decided which pointer governed, and such a replay
// froze subscribers until their next re-read.
func TestReplayedPointersNeverMoveBackOrFreeze(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	const instance = "replayed"
	bucket := cuecast.Cohort(cfg.Namespace(), instance)
	live, evLive := e.newClient(instance, client.WithReconcile(time.Hour))
	wLive := watch(t, live)

	js := natstest.JetStream(t, e.dnc)
	st, err := js.Stream(t.Context(), "CUECAST")
	if err != nil {
		t.Fatal(err)
	}
	// capture keeps the stored message on subj: each is replaced (rolled
	// up) by the next write there, so it is kept as soon as it is written.
	var old []*jetstream.RawStreamMsg
	capture := func(subj string) {
		t.Helper()
		m, err := st.GetLastMsgForSubject(t.Context(), subj)
		if err != nil {
			t.Fatalf("read %s: %v", subj, err)
		}
		old = append(old, m)
	}

	// The history: v1 everywhere, then v2, then a rollback of this
	// instance's bucket to v1, an instance pointer to v2, and a cutover of
	// v2 (staged, activated).
	e.ship(1, body(1))
	capture(cuecast.AllPointerSubject(cfg))
	waitVersion(t, wLive, evLive, 1)
	e.ship(2, body(2))
	waitVersion(t, wLive, evLive, 2)
	e.setPointer(bucket, cuecast.Pointer{Version: 1, Rollback: true, Reason: "bad v2"})
	capture(cuecast.PointerSubject(cfg, bucket))
	waitVersion(t, wLive, evLive, 1)
	if err := e.d.SetInstancePointers(t.Context(), cfg, []string{instance}, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	capture(cuecast.InstancePointerSubject(cfg, instance))
	waitVersion(t, wLive, evLive, 2)
	if err := e.d.Stage(t.Context(), cfg, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	capture(cuecast.StagedSubject(cfg))
	if err := e.d.Activate(t.Context(), cfg, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	capture(cuecast.ActivationSubject(cfg))

	// Now v3 everywhere; an instance started now has seen none of the
	// above.
	e.ship(3, body(3))
	waitVersion(t, wLive, evLive, 3)
	late, evLate := e.newClient(instance, client.WithReconcile(time.Hour))
	wLate := watch(t, late)
	waitVersion(t, wLate, evLate, 3)

	subjects := []string{
		cuecast.PointerSubject(cfg, bucket), cuecast.AllPointerSubject(cfg), cuecast.InstancePointerSubject(cfg, instance),
		cuecast.StagedSubject(cfg), cuecast.ActivationSubject(cfg),
	}
	replays := 0
	for _, subj := range subjects {
		last := uint64(0)
		if m, err := st.GetLastMsgForSubject(t.Context(), subj); err == nil {
			last = m.Sequence
		}
		for _, m := range old {
			for _, lastHeader := range []uint64{last, 999_999_998} {
				r := nats.NewMsg("ccr" + subj[2:])
				for k, v := range m.Header {
					r.Header[k] = v
				}
				r.Header.Set("Nats-Stream", "CUECAST")
				r.Header.Set("Nats-Subject", subj)
				r.Header.Set("Nats-Sequence", "999999999")
				r.Header.Set("Nats-Last-Sequence", strconv.FormatUint(lastHeader, 10))
				r.Data = m.Data
				if err := e.dnc.PublishMsg(r); err != nil {
					t.Fatal(err)
				}
				replays++
			}
		}
	}
	if err := e.dnc.Flush(); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d replays", replays)

	// The next genuine pointer is applied by both, and nothing older was
	// applied after v3.
	e.ship(4, body(4))
	for _, w := range []watched{{"live", wLive, evLive}, {"late", wLate, evLate}} {
		waitVersion(t, w.w, w.ev, 4)
		waitApplied(t, w.ev, 4)
		w.appliedSince3(t)
		if _, ok := w.ev.find(func(e client.Event) bool { return e.Kind == client.EventResync && e.Detail == "reconcile" }); ok {
			t.Errorf("%s instance: an anti-entropy read happened; the test proves nothing", w.name)
		}
		if s := w.w.Current(); s.Version != 4 || string(s.Content) != string(body(4)) {
			t.Errorf("%s instance runs %d %q, want 4 %q", w.name, s.Version, s.Content, body(4))
		}
	}
}

// TestPointerWithoutRevisionRejected: a pointer in the format before signed
// revisions (a serve not yet upgraded) is refused and said, not silently
// taken for "no pointer yet".
func TestPointerWithoutRevisionRejected(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	w, ev := e.watching("upgraded", 1)
	p := e.pointer(w.Bucket())
	p.Version, p.Revision, p.Subject = 2, 0, cuecast.PointerSubject(cfg, w.Bucket())
	enc, _ := json.Marshal(p)
	m := nats.NewMsg("ccr" + p.Subject[2:])
	m.Header.Set("Cuecast-Pointer", string(enc))
	if err := e.dnc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ev, "rejection of a pointer without revision", func(e client.Event) bool {
		return e.Kind == client.EventRejected && e.Version == 2 && errors.Is(e.Err, cuecast.ErrBadSignature)
	})
	if s := w.Current(); s.Version != 1 {
		t.Fatalf("Current: got %d, want 1", s.Version)
	}
}

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
		return ev.Kind == client.EventApplied || ev.Kind == client.EventRejected
	})
	// The operator sees it: the running instance reports the refusal.
	e.waitReport("live", func(r cuecast.Report) bool { return strings.Contains(r.Refused, "an old rollback stored again") })

	for _, w := range []watched{{"running", wLive, evLive}, {"restarted", wRestarted, evRestarted}} {
		if s := w.w.Current(); s.Version != 3 {
			t.Errorf("%s instance runs version %d after a stored replay of the rollback to 1, want 3; events:%s", w.name, s.Version, w.ev)
		}
	}

	// The next genuine change reaches both, and nothing older ran since 3.
	e.ship(4, body(4))
	for _, w := range []watched{{"running", wLive, evLive}, {"restarted", wRestarted, evRestarted}} {
		waitVersion(t, w.w, w.ev, 4)
		waitApplied(t, w.ev, 4)
		w.appliedSince3(t)
	}
}

// watched is an instance a replay test follows.
type watched struct {
	name string
	w    *client.Watcher
	ev   *events
}

// appliedSince3 checks that the instance applied 3 and 4 and nothing
// else from the moment it ran 3 (a restarted one served 3 from its
// last-known-good file: nothing but 4).
func (w watched) appliedSince3(t *testing.T) {
	t.Helper()
	applied := w.ev.applied()
	since := applied
	if i := slices.Index(applied, 3); i >= 0 {
		since = applied[i+1:]
	}
	if !slices.Equal(since, []uint64{4}) {
		t.Errorf("%s instance applied %v after version 3, want [4]; events:%s", w.name, since, w.ev)
	}
}
