package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsserver"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const cfg = cuecast.ConfigPath("payments/checkout")

// env is one embedded server with a distributor writing to it.
type env struct {
	t   *testing.T
	srv *natstest.Server
	d   *distributor.Distributor
	dnc *nats.Conn
	key nkeys.KeyPair
	pub string
}

type envOpts struct {
	retain int
	inline int // distributor.Options.InlineLimit
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	e := &env{t: t, srv: natstest.Start(t)}
	e.dnc = e.srv.Connect(t, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	e.newDistributor(o)
	return e
}

func (e *env) newDistributor(o envOpts) {
	t := e.t
	t.Helper()
	dopts := distributor.Options{Retain: o.retain, InlineLimit: o.inline, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	// Signed, as serve always signs; a second distributor keeps the key.
	if e.key == nil {
		kp, err := nkeys.CreateAccount()
		if err != nil {
			t.Fatal(err)
		}
		e.key = kp
		e.pub, _ = kp.PublicKey()
	}
	dopts.SigningKey = e.key
	d, err := distributor.New(t.Context(), e.dnc, dopts)
	if err != nil {
		t.Fatalf("distributor.New: %v", err)
	}
	e.d = d
}

func body(n uint64) []byte { return fmt.Appendf(nil, `{"limit":%d,"name":"checkout"}`, n) }

// ship publishes version n of cfg with content b and deploys it to every bucket.
func (e *env) ship(n uint64, b []byte) cuecast.Version {
	e.t.Helper()
	v := cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("c%03d", n), Author: "ann"}
	if err := e.d.Publish(e.t.Context(), v, b); err != nil {
		e.t.Fatalf("Publish %d: %v", n, err)
	}
	if err := e.d.Deploy(e.t.Context(), v); err != nil {
		e.t.Fatalf("Deploy %d: %v", n, err)
	}
	v.Checksum, v.Size = cuecast.Checksum(b), int64(len(b))
	return v
}

// events records a client's events.
type events struct {
	mu  sync.Mutex
	all []client.Event
}

func (r *events) add(e client.Event) {
	r.mu.Lock()
	r.all = append(r.all, e)
	r.mu.Unlock()
}

func (r *events) list() []client.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.all)
}

// find returns the first event matching f.
func (r *events) find(f func(client.Event) bool) (client.Event, bool) {
	for _, e := range r.list() {
		if f(e) {
			return e, true
		}
	}
	return client.Event{}, false
}

// applied lists the versions applied, in order.
func (r *events) applied() []uint64 {
	var out []uint64
	for _, e := range r.list() {
		if e.Kind == client.EventApplied {
			out = append(out, e.Version)
		}
	}
	return out
}

func (r *events) String() string {
	var s string
	for _, e := range r.list() {
		s += "\n  " + e.String()
	}
	return s
}

// newClient connects a fresh connection and client for instance id,
// trusting the distributor's key.
func (e *env) newClient(id string, opts ...client.Option) (*client.Client, *events) {
	e.t.Helper()
	nc := e.srv.Connect(e.t, client.ConnectOptions()...)
	return e.newClientOn(nc, id, opts...)
}

// newClientOn is a client for instance id on nc, trusting the distributor's
// key.
func (e *env) newClientOn(nc *nats.Conn, id string, opts ...client.Option) (*client.Client, *events) {
	e.t.Helper()
	return newClientOn(e.t, nc, id, append([]client.Option{client.WithTrustedKeys(e.pub)}, opts...)...)
}

func newClientOn(t *testing.T, nc *nats.Conn, id string, opts ...client.Option) (*client.Client, *events) {
	t.Helper()
	ev := &events{}
	opts = append([]client.Option{client.WithInstance(id), client.WithEvents(ev.add), client.WithRequestTimeout(2 * time.Second)}, opts...)
	c, err := client.New(nc, opts...)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	t.Cleanup(c.Close)
	return c, ev
}

func watch(t *testing.T, c *client.Client, opts ...client.WatchOption) *client.Watcher {
	t.Helper()
	w, err := c.Watch(t.Context(), cfg, opts...)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

// watchTyped is c's typed watcher of cfg, stopped when the test ends.
func watchTyped[T any](t *testing.T, c *client.Client, opts ...client.WatchOption) *client.TypedWatcher[T] {
	t.Helper()
	w, err := client.Typed[T](t.Context(), c, cfg, opts...)
	if err != nil {
		t.Fatalf("Typed: %v", err)
	}
	t.Cleanup(w.Stop)
	return w
}

// watching is a client for instance id (newClient) watching cfg, once it
// has applied version n.
func (e *env) watching(id string, n uint64, opts ...client.Option) (*client.Watcher, *events) {
	e.t.Helper()
	c, ev := e.newClient(id, opts...)
	w := watch(e.t, c)
	waitVersion(e.t, w, ev, n)
	return w, ev
}

func waitVersion(t *testing.T, w *client.Watcher, ev *events, n uint64) client.Snapshot {
	t.Helper()
	poll.Until(t, fmt.Sprintf("version %d", n), poll.Patience, func() (bool, string) {
		at := w.Current().Version
		return at == n, fmt.Sprintf("at %d; events:%s", at, ev)
	})
	return w.Current()
}

// waitContent waits for version n and fails the test unless its content
// is body(n); what says when, for the failure.
func waitContent(t *testing.T, w *client.Watcher, ev *events, n uint64, what string) {
	t.Helper()
	if s := waitVersion(t, w, ev, n); !bytes.Equal(s.Content, body(n)) {
		t.Fatalf("%s: got %q, want %q", what, s.Content, body(n))
	}
}

// waitApplied waits until ev's newest applied event is version n: the
// watcher swaps its snapshot a moment before it emits the applied event, so
// a test that judges the events after waitVersion must wait for them too.
func waitApplied(t *testing.T, ev *events, n uint64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("the applied event of version %d", n), poll.Patience, func() (bool, string) {
		a := ev.applied()
		return len(a) > 0 && a[len(a)-1] == n, "events:" + ev.String()
	})
}

func waitEvent(t *testing.T, ev *events, what string, f func(client.Event) bool) client.Event {
	t.Helper()
	poll.Until(t, what, poll.Patience, func() (bool, string) { _, ok := ev.find(f); return ok, "events:" + ev.String() })
	e, _ := ev.find(f)
	return e
}

// pointer is the distributor's stored pointer of cfg for bucket.
func (e *env) pointer(bucket int) cuecast.Pointer {
	e.t.Helper()
	p, err := e.d.Pointer(e.t.Context(), cfg, bucket)
	if err != nil {
		e.t.Fatalf("pointer of bucket %d: %v", bucket, err)
	}
	return p
}

// setPointer points cfg's bucket at p, as a deploy or rollback does.
func (e *env) setPointer(bucket int, p cuecast.Pointer) {
	e.t.Helper()
	if err := e.d.SetPointers(e.t.Context(), cfg, []int{bucket}, p); err != nil {
		e.t.Fatalf("set pointer of bucket %d: %v", bucket, err)
	}
}

// waitReport polls the distributor until instance's report satisfies f.
func (e *env) waitReport(instance string, f func(cuecast.Report) bool) cuecast.Report {
	e.t.Helper()
	var last []cuecast.Report
	find := func() (cuecast.Report, bool) {
		rs, err := e.d.Reports(e.t.Context(), cfg)
		if err != nil {
			return cuecast.Report{}, false
		}
		last = rs
		for _, r := range rs {
			if r.Instance == instance && f(r) {
				return r, true
			}
		}
		return cuecast.Report{}, false
	}
	poll.Until(e.t, "report from "+instance, poll.Patience, func() (bool, string) {
		_, ok := find()
		return ok, fmt.Sprintf("reports: %+v", last)
	})
	r, _ := find()
	return r
}

func lkgPath(t *testing.T) string { return filepath.Join(t.TempDir(), "checkout.lkg") }

// writeLKG has a watcher of instance id write version n to a last-known-good
// file in a fresh directory, and stop; it returns the file's path.
func (e *env) writeLKG(id string, n uint64) string {
	e.t.Helper()
	path := lkgPath(e.t)
	e.writeLKGAt(path, id, n)
	return path
}

// writeLKGAt has a watcher of instance id write version n to the
// last-known-good file at path, and stop.
func (e *env) writeLKGAt(path, id string, n uint64) {
	e.t.Helper()
	c, ev := e.newClient(id)
	w := watch(e.t, c, client.LastKnownGood(path))
	waitVersion(e.t, w, ev, n)
	w.Stop()
}

// restartableServer is a server on a fixed address that a test can stop and
// start again over the same store.
type restartableServer struct {
	t    *testing.T
	dir  string
	addr string
	s    interface {
		Shutdown()
		WaitForShutdown()
		ClientURL() string
	}
}

func startRestartable(t *testing.T) *restartableServer {
	t.Helper()
	r := &restartableServer{t: t, dir: t.TempDir(), addr: "127.0.0.1:0"}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *restartableServer) start() {
	r.t.Helper()
	s, err := natsserver.Start(context.Background(), natsserver.Options{Dir: r.dir, Listen: r.addr})
	if err != nil {
		r.t.Fatalf("start server: %v", err)
	}
	r.s = s
	r.addr = s.Addr().(*net.TCPAddr).String()
}

func (r *restartableServer) stop() {
	if r.s != nil {
		r.s.Shutdown()
		r.s.WaitForShutdown()
		r.s = nil
	}
}

func (r *restartableServer) url() string { return "nats://" + r.addr }

// lastKnownGoodOutage is an instance restarting during an outage: versions
// 1..n shipped, instance id saw the newest and saved it to a last-known-good
// file, then the server stopped. It returns the file and a connection made
// with the server down (client.ConnectOptions keep it reconnecting).
func lastKnownGoodOutage(t *testing.T, id string, n uint64) (e *env, rs *restartableServer, path string, nc *nats.Conn) {
	t.Helper()
	rs = startRestartable(t)
	dnc, err := nats.Connect(rs.url())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dnc.Close)
	e = &env{t: t, dnc: dnc}
	e.newDistributor(envOpts{})
	for v := uint64(1); v <= n; v++ {
		e.ship(v, body(v))
	}
	path = lkgPath(t)
	nc1, err := nats.Connect(rs.url())
	if err != nil {
		t.Fatal(err)
	}
	c1, ev1 := e.newClientOn(nc1, id)
	w1 := watch(t, c1, client.LastKnownGood(path))
	waitVersion(t, w1, ev1, n)
	w1.Stop()
	nc1.Close()

	rs.stop()
	nc, err = nats.Connect(rs.url(), client.ConnectOptions()...)
	if err != nil {
		t.Fatalf("connect with the server down: %v", err)
	}
	t.Cleanup(nc.Close)
	return e, rs, path, nc
}
