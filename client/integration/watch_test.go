package integration_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
)

func TestWatchAppliesAndReports(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	v1 := e.ship(1, body(1))
	c, ev := e.newClient("checkout-1", client.WithLabels(map[string]string{"region": "eu"}))
	w := watch(t, c)
	// Watch waits for the first read, so the current version is there at once.
	s := w.Current()
	if s.Version != 1 || s.Checksum != v1.Checksum || !bytes.Equal(s.Content, body(1)) || s.FromLastKnownGood || s.Commit != "c001" {
		t.Fatalf("Current after Watch: got %+v, want version 1", s)
	}
	if u := <-w.Updates(); u.Version != 1 {
		t.Fatalf("first update: got version %d, want 1", u.Version)
	}
	r := e.waitReport("checkout-1", func(r cuecast.Report) bool { return r.Version == 1 })
	if r.Checksum != v1.Checksum || r.Cohort != cuecast.Cohort("payments", "checkout-1") || r.Labels["region"] != "eu" || !r.Healthy || r.LastError != "" {
		t.Fatalf("report: got %+v", r)
	}

	e.ship(2, body(2))
	if u := <-w.Updates(); u.Version != 2 || !bytes.Equal(u.Content, body(2)) {
		t.Fatalf("update: got version %d %q, want 2", u.Version, u.Content)
	}
	e.waitReport("checkout-1", func(r cuecast.Report) bool { return r.Version == 2 })
	if got := ev.applied(); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("applied: got %v, want [1 2]", got)
	}
	w.Stop()
	if _, open := <-w.Updates(); open {
		t.Fatal("Updates still open after Stop")
	}
}

func TestWatchBeforeFirstDeploy(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	c, ev := e.newClient("early")
	w := watch(t, c)
	if s := w.Current(); !s.IsZero() {
		t.Fatalf("Current before any version: got %+v, want zero", s)
	}
	e.ship(1, body(1))
	waitVersion(t, w, ev, 1)
}

func TestOptionsValidate(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	nc := e.srv.Connect(t)
	tests := []struct {
		name string
		opts []client.Option
		want error
	}{
		{"no instance", nil, cuecast.ErrInvalidInstance},
		{"bad instance", []client.Option{client.WithInstance("a.b")}, cuecast.ErrInvalidInstance},
		{"bad trusted key", []client.Option{client.WithInstance("a"), client.WithTrustedKeys("nope")}, errors.New("any")},
		{"zero heartbeat", []client.Option{client.WithInstance("a"), client.WithHeartbeat(0)}, errors.New("any")},
		{"nil health", []client.Option{client.WithInstance("a"), client.WithHealth(nil)}, errors.New("any")},
		{"no trusted keys", []client.Option{client.WithInstance("a")}, client.ErrNoTrustedKeys},
		{"insecure and keys", []client.Option{client.WithInstance("a"), client.WithInsecureSkipVerify(), client.WithTrustedKeys(e.pub)}, errors.New("any")},
		{"empty keys file", []client.Option{client.WithInstance("a"), client.WithTrustedKeysFile(os.DevNull)}, client.ErrNoTrustedKeys},
		{"valid", []client.Option{client.WithInstance("a"), client.WithTrustedKeys(e.pub), client.WithHeartbeat(time.Second), client.WithReconcile(time.Second)}, nil},
		{"insecure", []client.Option{client.WithInstance("a"), client.WithInsecureSkipVerify()}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.New(nc, tt.opts...)
			if tt.want == nil && err != nil || tt.want != nil && (err == nil || tt.want.Error() != "any" && !errors.Is(err, tt.want)) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
		})
	}
	c, _ := e.newClientOn(nc, "a")
	if _, err := c.Watch(t.Context(), "Payments"); !errors.Is(err, cuecast.ErrInvalidPath) {
		t.Fatalf("Watch of invalid path: got %v, want ErrInvalidPath", err)
	}
	if _, err := c.Watch(t.Context(), cfg, client.LastKnownGood("")); err == nil {
		t.Fatal("Watch with empty LastKnownGood path: got success, want error")
	}
}

// TestLastKnownGoodWithoutNetwork: an instance starts and serves its
// last-known-good file while the whole pipeline is down.
func TestLastKnownGoodWithoutNetwork(t *testing.T) {
	t.Parallel()
	e, rs, path, nc2 := lastKnownGoodOutage(t, "lkg", 2)
	c2, ev2 := e.newClientOn(nc2, "lkg")
	w2 := watch(t, c2, client.LastKnownGood(path))
	s := w2.Current()
	if s.Version != 2 || !s.FromLastKnownGood || !bytes.Equal(s.Content, body(2)) {
		t.Fatalf("Current with the server down: got %+v, want version 2 from last-known-good", s)
	}
	if _, ok := ev2.find(func(e client.Event) bool { return e.Kind == client.EventLoaded && e.Version == 2 }); !ok {
		t.Fatalf("no loaded event; events:%s", ev2)
	}

	// The server comes back (same store, same address): the watcher confirms
	// version 2 and reports it as no longer last-known-good.
	rs.start()
	poll.Until(t, "confirmation of the last-known-good version", poll.Patience, func() (bool, string) {
		return !w2.Current().FromLastKnownGood, "events:" + ev2.String()
	})
	if got := ev2.applied(); len(got) != 0 {
		t.Fatalf("applied after confirming: got %v, want nothing re-applied", got)
	}
}

func TestCorruptLastKnownGood(t *testing.T) {
	t.Parallel()
	good := func(t *testing.T, path string) []byte {
		e := newEnv(t, envOpts{})
		e.ship(1, body(1))
		e.writeLKGAt(path, "writer", 1)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name    string
		corrupt func(valid []byte) []byte
	}{
		{"empty", func([]byte) []byte { return nil }},
		{"garbage", func([]byte) []byte { return []byte("\x00\x01not a header\n{}") }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-3] }},
		{"flipped content byte", func(b []byte) []byte {
			b = bytes.Clone(b)
			b[len(b)-2] ^= 0x20
			return b
		}},
		{"other config", func(b []byte) []byte {
			return bytes.Replace(b, []byte(`"config":"payments/checkout"`), []byte(`"config":"payments/other"`), 1)
		}},
		{"unknown format", func(b []byte) []byte { return bytes.Replace(b, []byte("cuecast-lkg-v2"), []byte("cuecast-lkg-v9"), 1) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := lkgPath(t)
			valid := good(t, path)
			if err := os.WriteFile(path, tt.corrupt(valid), 0o644); err != nil {
				t.Fatal(err)
			}
			e := newEnv(t, envOpts{})
			c, ev := e.newClient("reader")
			w := watch(t, c, client.LastKnownGood(path))
			if s := w.Current(); !s.IsZero() {
				t.Fatalf("Current from a corrupt file: got %+v, want zero", s)
			}
			waitEvent(t, ev, "an error event about the file", func(e client.Event) bool {
				return e.Kind == client.EventError && strings.Contains(e.Err.Error(), path)
			})
			// The next good version replaces the file.
			e.ship(1, body(7))
			waitVersion(t, w, ev, 1)
			w.Stop()
			c2, ev2 := e.newClient("reader2")
			w2 := watch(t, c2, client.LastKnownGood(path))
			waitEvent(t, ev2, "loaded event", func(e client.Event) bool { return e.Kind == client.EventLoaded && e.Version == 1 })
			if !bytes.Equal(w2.Current().Content, body(7)) {
				t.Fatalf("rewritten last-known-good: got %q, want %q", w2.Current().Content, body(7))
			}
		})
	}
}

func TestValidationHookRejects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	hook := func(b []byte) error {
		var v struct{ Limit int }
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if v.Limit > 100 {
			return fmt.Errorf("limit %d over 100", v.Limit)
		}
		return nil
	}
	path := lkgPath(t)
	c, ev := e.newClient("hooked")
	w := watch(t, c, client.Validate(hook), client.LastKnownGood(path))
	waitVersion(t, w, ev, 1)

	e.ship(2, body(500))
	waitEvent(t, ev, "rejection of version 2", func(e client.Event) bool { return e.Kind == client.EventRejected && e.Version == 2 })
	r := e.waitReport("hooked", func(r cuecast.Report) bool { return strings.Contains(r.LastError, "limit 500 over 100") })
	if r.Version != 1 {
		t.Fatalf("report after rejection: got version %d, want 1", r.Version)
	}
	if s := w.Current(); s.Version != 1 {
		t.Fatalf("Current after rejection: got %d, want 1", s.Version)
	}
	b, _ := os.ReadFile(path)
	if !bytes.HasSuffix(b, body(1)) {
		t.Fatalf("last-known-good after rejection: got %q, want version 1's content", b)
	}

	e.ship(3, body(3))
	waitVersion(t, w, ev, 3)
	e.waitReport("hooked", func(r cuecast.Report) bool { return r.Version == 3 && r.LastError == "" })
	if got := ev.applied(); fmt.Sprint(got) != "[1 3]" {
		t.Fatalf("applied: got %v, want [1 3]", got)
	}
}

func TestRollbackAndNeverBackwards(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	e.ship(2, body(2))
	w, ev := e.watching("rb", 2)
	bucket := w.Bucket()

	e.setPointer(bucket, cuecast.Pointer{Version: 1})
	waitEvent(t, ev, "skipped older pointer", func(e client.Event) bool { return e.Kind == client.EventSkipped && e.Version == 1 })
	if s := w.Current(); s.Version != 2 {
		t.Fatalf("after an older pointer without rollback: got version %d, want 2", s.Version)
	}
	e.setPointer(bucket, cuecast.Pointer{Version: 1, Rollback: true, Reason: "bad deploy"})
	waitContent(t, w, ev, 1, "after rollback")
}

func TestTombstone(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	w, ev := e.watching("tomb", 1)
	v := cuecast.Version{Config: cfg, Version: 2, Commit: "c002", Deleted: true}
	if err := e.d.Publish(t.Context(), v, nil); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Deploy(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	s := waitVersion(t, w, ev, 2)
	if !s.Deleted || len(s.Content) != 0 {
		t.Fatalf("tombstone: got %+v, want Deleted with no content", s)
	}
}

// TestPurgedFallsBackToPointer: a pointer naming a purged version is
// reported, the watcher re-reads the pointer and follows it once it moves.
// TestPurgedFallsBackToPointer: a pointer naming a purged version, with no
// inline copy to fall back on, makes the watcher say so and wait for the
// next pointer.
func TestPurgedFallsBackToPointer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{retain: 2, inline: -1})
	e.ship(1, body(1))
	for n := uint64(2); n <= 4; n++ {
		if err := e.d.Publish(t.Context(), cuecast.Version{Config: cfg, Version: n, Commit: "c"}, body(n)); err != nil {
			t.Fatal(err)
		}
	}
	c, ev := e.newClient("purged")
	w := watch(t, c)
	waitEvent(t, ev, "purged error", func(e client.Event) bool { return e.Err != nil && errors.Is(e.Err, cuecast.ErrPurged) })
	waitEvent(t, ev, "resync after purge", func(e client.Event) bool { return e.Kind == client.EventResync && e.Detail == "purged" })
	if s := w.Current(); !s.IsZero() {
		t.Fatalf("Current: got %+v, want nothing applied", s)
	}
	if err := e.d.Deploy(t.Context(), cuecast.Version{Config: cfg, Version: 4}); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, w, ev, 4)
}

// TestPurgedButInline: an inline pointer still delivers a version that
// retention has purged from the stream, since it carries the content.
func TestPurgedButInline(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{retain: 2})
	e.ship(1, body(1))
	for n := uint64(2); n <= 4; n++ {
		if err := e.d.Publish(t.Context(), cuecast.Version{Config: cfg, Version: n, Commit: "c"}, body(n)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := e.d.Version(t.Context(), cfg, 1); !errors.Is(err, cuecast.ErrPurged) {
		t.Fatalf("version 1: got %v, want it purged", err)
	}
	c, ev := e.newClient("inline")
	w := watch(t, c)
	waitContent(t, w, ev, 1, "content")
}

func TestLargeConfig16MiB(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	big := make([]byte, 16<<20)
	for i := range big {
		big[i] = 'a' + byte(i%26)
	}
	big[0], big[len(big)-1] = '"', '"'
	c, ev := e.newClient("big")
	w := watch(t, c, client.LastKnownGood(lkgPath(t)))
	e.ship(1, big)
	s := waitVersion(t, w, ev, 1)
	if !bytes.Equal(s.Content, big) {
		t.Fatalf("16 MiB content: got %d bytes, differs from the %d published", len(s.Content), len(big))
	}
}

// checkout is the typed view of body(n) that the Typed tests decode into.
type checkout struct {
	Limit int    `json:"limit"`
	Name  string `json:"name"`
}

// TestTyped: a config gaining a field (a compatible change for `cuecast
// check`) is applied by a default Typed watcher, which ignores the field,
// and refused (reported, not applied) by a StrictDecoding one; updates
// arrive decoded; ValidateValue checks the decoded value. Typed used to
// decode strictly, so an added field halted a rollout (issue 17, item 5).
func TestTyped(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(5))
	lenient, lev := e.newClient("typed-lenient")
	tw := watchTyped[checkout](t, lenient, client.ValidateValue(func(c checkout) error {
		if c.Limit > 100 {
			return fmt.Errorf("limit %d above 100", c.Limit)
		}
		return nil
	}))
	strict, sev := e.newClient("typed-strict")
	sw := watchTyped[checkout](t, strict, client.StrictDecoding())
	for _, w := range []*client.TypedWatcher[checkout]{tw, sw} {
		v, s := w.Value()
		if v != (checkout{Limit: 5, Name: "checkout"}) || s.Version != 1 {
			t.Fatalf("Value: got %+v at %d, want limit 5 at 1", v, s.Version)
		}
		if l := w.Load(); l != v {
			t.Fatalf("Load: got %+v, want Value's %+v", l, v)
		}
		if u := <-w.Updates(); u.Value != v || u.Version != 1 {
			t.Fatalf("first typed update: got %+v, want limit 5 at 1", u)
		}
	}

	e.ship(2, []byte(`{"limit":6,"name":"checkout","retry_budget":3}`))
	if u := <-tw.Updates(); u.Value != (checkout{Limit: 6, Name: "checkout"}) || u.Version != 2 {
		t.Fatalf("lenient typed update with an added field: got %+v, want limit 6 at 2", u)
	}
	rej := waitEvent(t, sev, "the strict watcher's rejection of the added field",
		func(e client.Event) bool { return e.Kind == client.EventRejected && e.Version == 2 })
	if rej.Detail != "decode" || !strings.Contains(rej.Err.Error(), `unknown field "retry_budget"`) {
		t.Fatalf("strict rejection: got %s, want a decode error naming retry_budget", rej)
	}
	if r := e.waitReport("typed-strict", func(r cuecast.Report) bool { return r.LastError != "" }); r.Version != 1 {
		t.Fatalf("strict instance report: got version %d, want 1 kept", r.Version)
	}
	if v, s := sw.Value(); v.Limit != 5 || s.Version != 1 {
		t.Fatalf("strict Value after the refusal: got %+v at %d, want limit 5 at 1", v, s.Version)
	}
	if v := sw.Load(); v.Limit != 5 {
		t.Fatalf("strict Load after the refusal: got %+v, want limit 5", v)
	}

	e.ship(3, body(700))
	waitEvent(t, lev, "the value hook's rejection", func(e client.Event) bool {
		return e.Kind == client.EventRejected && e.Version == 3 && e.Detail == "validation hook" && strings.Contains(e.Err.Error(), "limit 700 above 100")
	})
	e.ship(4, body(7))
	waitVersion(t, tw.Watcher, lev, 4)
	waitVersion(t, sw.Watcher, sev, 4)
	if v, _ := tw.Value(); v.Limit != 7 {
		t.Fatalf("Value: got %+v, want limit 7", v)
	}
	if v := tw.Load(); v.Limit != 7 {
		t.Fatalf("Load: got %+v, want limit 7", v)
	}
	tw.Stop()
	for range tw.Updates() {
	}

	c, _ := e.newClient("typed-misuse")
	if _, err := c.Watch(t.Context(), cfg, client.StrictDecoding()); err == nil {
		t.Fatal("Watch with StrictDecoding: got success, want an error (it is Typed's)")
	}
}

// TestRollbackToPreviousNeedsNoRead: the watcher keeps the version before the
// current one, so an emergency rollback to it is applied without a read
// (here the stream no longer has it: a read would fail with ErrPurged).
func TestRollbackToPreviousNeedsNoRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{retain: 1})
	e.ship(1, body(1))
	w, ev := e.watching("rb-prev", 1)
	p1 := e.pointer(w.Bucket())
	e.ship(2, body(2))
	waitVersion(t, w, ev, 2)
	if _, _, err := e.d.Version(t.Context(), cfg, 1); !errors.Is(err, cuecast.ErrPurged) {
		t.Fatalf("version 1 in the stream: got %v, want ErrPurged", err)
	}
	back := cuecast.Pointer{Version: 1, Seq: p1.Seq, Checksum: p1.Checksum, Size: p1.Size, Rollback: true, Reason: "incident"}
	e.setPointer(w.Bucket(), back)
	waitContent(t, w, ev, 1, "after rollback")
}

// TestConnectionClosed: a connection that will never come back is reported,
// and the watcher keeps serving what it has.
func TestConnectionClosed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	nc := e.srv.Connect(t)
	c, ev := e.newClientOn(nc, "closing")
	w := watch(t, c)
	waitVersion(t, w, ev, 1)
	nc.Close()
	waitEvent(t, ev, "connection closed event", func(e client.Event) bool {
		return e.Kind == client.EventError && errors.Is(e.Err, nats.ErrConnectionClosed)
	})
	if s := w.Current(); s.Version != 1 {
		t.Fatalf("Current after close: got %d, want 1", s.Version)
	}
}

// TestLastKnownGoodSignature: with trusted keys, a last-known-good file is
// served only if its version's signature verifies.
func TestLastKnownGoodSignature(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	path := e.writeLKG("writer", 1)

	other, _ := nkeys.CreateAccount()
	otherPub, _ := other.PublicKey()
	tests := []struct {
		name   string
		key    string
		loaded bool
	}{
		{"trusted key", e.pub, true},
		{"another key", otherPub, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// A connection to nowhere: only the file can provide a value.
			nc, err := nats.Connect("nats://127.0.0.1:1", client.ConnectOptions()...)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(nc.Close)
			c, ev := newClientOn(t, nc, "reader", client.WithTrustedKeys(tt.key))
			w := watch(t, c, client.LastKnownGood(path))
			if got := w.Current().Version == 1; got != tt.loaded {
				t.Fatalf("served the file: got %t, want %t; events:%s", got, tt.loaded, ev)
			}
			if !tt.loaded {
				if _, ok := ev.find(func(e client.Event) bool {
					return e.Kind == client.EventError && errors.Is(e.Err, cuecast.ErrBadSignature)
				}); !ok {
					t.Fatalf("no bad-signature event; events:%s", ev)
				}
			}
		})
	}
}

// sameBucket returns two instance IDs of cfg's namespace that hash into one
// cohort bucket.
func sameBucket(t *testing.T) (string, string, int) {
	t.Helper()
	first := map[int]string{}
	for i := range 10000 {
		id := fmt.Sprintf("web-%d", i)
		b := cuecast.Cohort(cfg.Namespace(), id)
		if other, ok := first[b]; ok {
			return other, id, b
		}
		first[b] = id
	}
	t.Fatal("no two instances share a bucket")
	return "", "", 0
}

// TestInstancePointer: a pointer written for one instance moves exactly that
// instance, not the others in its bucket, and the newer of the bucket's and
// the instance's pointer governs, at start as well as while watching.
func TestInstancePointer(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	named, neighbour, bucket := sameBucket(t)
	cn, evn := e.newClient(named)
	wn := watch(t, cn)
	co, evo := e.newClient(neighbour)
	wo := watch(t, co)
	waitVersion(t, wn, evn, 1)
	waitVersion(t, wo, evo, 1)

	if err := e.d.Publish(t.Context(), cuecast.Version{Config: cfg, Version: 2, Commit: "c002"}, body(2)); err != nil {
		t.Fatal(err)
	}
	if err := e.d.SetInstancePointers(t.Context(), cfg, []string{named}, cuecast.Pointer{Version: 2, Rollout: "canary"}); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, wn, evn, 2)

	// A watcher starting now reads both pointers and follows the newer.
	cl, evl := e.newClient(named)
	late := watch(t, cl)
	waitVersion(t, late, evl, 2)

	// The instance is taken back alone.
	if err := e.d.SetInstancePointers(t.Context(), cfg, []string{named}, cuecast.Pointer{Version: 1, Rollback: true}); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, wn, evn, 1)

	// A later bucket write governs again.
	e.setPointer(bucket, cuecast.Pointer{Version: 2})
	waitVersion(t, wn, evn, 2)
	waitVersion(t, wo, evo, 2)
	for _, id := range []string{named, neighbour} {
		e.waitReport(id, func(r cuecast.Report) bool { return r.Version == 2 })
	}
	// The neighbour never ran the instance's versions.
	if got := evo.applied(); !slices.Equal(got, []uint64{1, 2}) {
		t.Fatalf("neighbour applied %v, want [1 2]", got)
	}
	if got := evn.applied(); !slices.Equal(got, []uint64{1, 2, 1, 2}) {
		t.Fatalf("named instance applied %v, want [1 2 1 2]", got)
	}
}

// TestInsecureSkipVerifySaysSo: the only way to run without trusted keys is
// to ask for it, and every watcher then says, as an error event, that it
// does not verify; it still applies what it receives.
func TestInsecureSkipVerifySaysSo(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	nc := e.srv.Connect(t, client.ConnectOptions()...)
	if _, err := client.New(nc, client.WithInstance("keyless")); !errors.Is(err, client.ErrNoTrustedKeys) {
		t.Fatalf("New without keys: got %v, want ErrNoTrustedKeys", err)
	}
	c, ev := newClientOn(t, nc, "keyless", client.WithInsecureSkipVerify())
	w := watch(t, c)
	waitVersion(t, w, ev, 1)
	if _, ok := ev.find(func(e client.Event) bool {
		return e.Kind == client.EventError && strings.Contains(e.Detail, "NOT verified")
	}); !ok {
		t.Fatalf("no event saying signatures are not verified; events:%s", ev)
	}
}

// TestTypedStrictRefusesAtStage: a strict config's staged version that a
// StrictDecoding watcher cannot decode is refused when staged (reported, not
// counted as staged), not only at the activation; a lenient one stages it.
// Staging used to run only the bytes-level hook.
func TestTypedStrictRefusesAtStage(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	lenient, _ := e.newClient("stage-lenient")
	watchTyped[checkout](t, lenient)
	strict, sev := e.newClient("stage-strict")
	watchTyped[checkout](t, strict, client.StrictDecoding())
	v2 := cuecast.Version{Config: cfg, Version: 2, Commit: "c002", Author: "ann"}
	if err := e.d.Publish(t.Context(), v2, []byte(`{"limit":2,"name":"checkout","retry_budget":3}`)); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Stage(t.Context(), cfg, cuecast.Pointer{Version: 2}); err != nil {
		t.Fatal(err)
	}
	e.waitReport("stage-lenient", func(r cuecast.Report) bool { return r.Staged == 2 })
	rej := waitEvent(t, sev, "the strict watcher's refusal at staging", func(e client.Event) bool {
		return e.Kind == client.EventRejected && e.Version == 2
	})
	if rej.Detail != "decode" || !strings.Contains(rej.Err.Error(), `unknown field "retry_budget"`) {
		t.Fatalf("strict refusal at staging: got %s, want a decode error naming retry_budget", rej)
	}
	if r := e.waitReport("stage-strict", func(r cuecast.Report) bool { return r.LastError != "" }); r.Staged == 2 || r.Version != 1 {
		t.Fatalf("strict report: got staged %d at version %d, want nothing staged at 1", r.Staged, r.Version)
	}
}

// The last-known-good file passes the same checks as a version from the
// server: content the validation hook refuses is not served, and the event
// names the file and the check.
func TestLastKnownGoodValidationHookRejects(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	path := e.writeLKG("lkg-hook", 1)

	refuse := func([]byte) error { return errors.New("refused by the hook") }
	c2, ev2 := e.newClient("lkg-hook")
	w2 := watch(t, c2, client.Validate(refuse), client.LastKnownGood(path))
	if s := w2.Current(); s.FromLastKnownGood || s.Version != 0 {
		t.Fatalf("Current with a last-known-good file the hook refuses: got version %d (last-known-good %t), want none", s.Version, s.FromLastKnownGood)
	}
	ev, ok := ev2.find(func(e client.Event) bool {
		return e.Kind == client.EventError && strings.HasPrefix(e.Detail, "ignoring last-known-good file")
	})
	if !ok {
		t.Fatalf("no event ignoring the last-known-good file; events:%s", ev2)
	}
	if want := "last-known-good " + path + ": validation hook: refused by the hook"; ev.Err == nil || ev.Err.Error() != want {
		t.Fatalf("ignoring event's error: got %v, want %q", ev.Err, want)
	}
	if _, ok := ev2.find(func(e client.Event) bool { return e.Kind == client.EventLoaded }); ok {
		t.Fatalf("loaded a last-known-good file the hook refuses; events:%s", ev2)
	}
}

// TestStagingClearsAStageError: a failure to stage one version ("version N:
// stage: …", a failed fetch the instance retries) is cleared by the next
// version staged, as an apply clears last_error (docs/PROTOCOL.md §4.3):
// otherwise status shows the instance failing long after it staged.
func TestStagingClearsAStageError(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	w, _ := e.watching("stager", 1)

	v2 := cuecast.Version{Config: cfg, Version: 2, Commit: "c002"}
	if err := e.d.Publish(t.Context(), v2, body(2)); err != nil {
		t.Fatal(err)
	}
	// A staged pointer, validly signed, naming version 2 at a sequence that
	// holds version 1: the fetch fails its metadata check.
	v1 := e.pointer(w.Bucket())
	p := cuecast.Pointer{Config: cfg, Subject: cuecast.StagedSubject(cfg), Revision: uint64(time.Now().UnixNano()),
		Version: 2, Seq: v1.Seq, Checksum: cuecast.Checksum(body(2)), Size: int64(len(body(2))), Commit: "c002", SetAt: time.Now()}
	sig, _ := e.key.Sign(p.SigningBytes())
	p.Signature = base64.RawURLEncoding.EncodeToString(sig)
	hdr, _ := json.Marshal(p)
	js, _ := jetstream.New(e.dnc)
	m := nats.NewMsg(cuecast.StagedSubject(cfg))
	m.Header.Set("Cuecast-Pointer", string(hdr))
	if _, err := js.PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	e.waitReport("stager", func(r cuecast.Report) bool { return strings.HasPrefix(r.LastError, "version 2: stage: ") })

	v3 := cuecast.Version{Config: cfg, Version: 3, Commit: "c003"}
	if err := e.d.Publish(t.Context(), v3, body(3)); err != nil {
		t.Fatal(err)
	}
	if err := e.d.Stage(t.Context(), cfg, cuecast.Pointer{Version: 3}); err != nil {
		t.Fatal(err)
	}
	e.waitReport("stager", func(r cuecast.Report) bool { return r.Staged == 3 && r.LastError == "" && r.Version == 1 })
}
