package integration_test

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
)

// fastReconnect overrides ConnectOptions' backoff so tests reconnect quickly.
func fastReconnect() []nats.Option {
	return append(client.ConnectOptions(), nats.CustomReconnectDelay(func(int) time.Duration { return 20 * time.Millisecond }))
}

// proxy is a TCP proxy a test can cut (the instance is offline) and restore.
type proxy struct {
	t      *testing.T
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *proxy {
	p := &proxy{t: t, target: target, addr: "127.0.0.1:0"}
	p.restore()
	t.Cleanup(p.cut)
	return p
}

func (p *proxy) restore() {
	p.t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Fatalf("proxy listen: %v", err)
	}
	p.mu.Lock()
	p.ln, p.addr = ln, ln.Addr().String()
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { io.Copy(out, in); out.Close() }()
			go func() { io.Copy(in, out); in.Close() }()
		}
	}()
}

// connect connects through p, reconnecting quickly (fastReconnect), for
// the length of the test.
func (p *proxy) connect(t *testing.T) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect("nats://"+p.addr, fastReconnect()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// cutAndWait cuts p and waits until nc has noticed.
func (p *proxy) cutAndWait(t *testing.T, nc *nats.Conn) {
	t.Helper()
	p.cut()
	poll.Until(t, "disconnect", poll.Patience, func() (bool, string) { return !nc.IsConnected(), "connected" })
}

func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// TestOffline50Versions: an instance misses 50 versions, then converges to
// the current one without applying anything in between or older.
func TestOffline50Versions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// run applies version 1, takes the instance away while versions 2-51
		// pass, and brings it back.
		run func(t *testing.T, e *env) (*client.Watcher, *events)
		// want is what the watcher that comes back applies.
		want string
	}{
		{"network cut", func(t *testing.T, e *env) (*client.Watcher, *events) {
			p := startProxy(t, e.srv.Addr().String())
			nc := p.connect(t)
			c, ev := e.newClientOn(nc, "offline")
			w := watch(t, c)
			waitVersion(t, w, ev, 1)
			p.cutAndWait(t, nc)
			ship50(e)
			p.restore()
			waitEvent(t, ev, "resync after reconnect", func(e client.Event) bool { return e.Kind == client.EventResync && e.Detail == "reconnect" })
			return w, ev
		}, "[1 51]"},
		{"process restart", func(t *testing.T, e *env) (*client.Watcher, *events) {
			path := e.writeLKG("offline", 1)
			ship50(e)
			c2, ev2 := e.newClient("offline")
			w2 := watch(t, c2, client.LastKnownGood(path))
			if _, ok := ev2.find(func(e client.Event) bool { return e.Kind == client.EventLoaded && e.Version == 1 }); !ok {
				t.Fatalf("did not start from last-known-good version 1; events:%s", ev2)
			}
			return w2, ev2
		}, "[51]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.ship(1, body(1))
			w, ev := tt.run(t, e)
			waitVersion(t, w, ev, 51)
			waitApplied(t, ev, 51) // seen failing under load without it: applied [1] with the watcher on 51
			if got := fmt.Sprint(ev.applied()); got != tt.want {
				t.Fatalf("applied: got %s, want %s", got, tt.want)
			}
		})
	}
}

func ship50(e *env) {
	for n := uint64(2); n <= 51; n++ {
		e.ship(n, body(n))
	}
}

// TestServerRestartMidStream: versions keep coming while the server stops
// and starts again over the same store; the instance ends on the last one,
// having applied versions only in increasing order, none twice.
func TestServerRestartMidStream(t *testing.T) {
	t.Parallel()
	rs := startRestartable(t)
	dnc, err := nats.Connect(rs.url(), fastReconnect()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(dnc.Close)
	e := &env{t: t, dnc: dnc}
	e.newDistributor(envOpts{})
	nc, err := nats.Connect(rs.url(), fastReconnect()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	c, ev := e.newClientOn(nc, "restart")
	w := watch(t, c)

	const last = 30
	progress := make(chan uint64, last)
	done := make(chan error, 1)
	go func() {
		for n := uint64(1); n <= last; n++ {
			v := cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("c%d", n)}
			// Retry through the outage: Publish and Deploy are idempotent.
			deadline := time.Now().Add(30 * time.Second)
			for {
				err := e.d.Publish(t.Context(), v, body(n))
				if err == nil {
					err = e.d.Deploy(t.Context(), v)
				}
				if err == nil {
					break
				}
				if time.Now().After(deadline) {
					done <- fmt.Errorf("ship %d: %w", n, err)
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			progress <- n
		}
		done <- nil
	}()
	for n := range progress {
		if n == 10 {
			rs.stop()
			poll.Until(t, "instance disconnected", poll.Patience, func() (bool, string) { return !nc.IsConnected(), "connected" })
			rs.start()
		}
		if n == last {
			break
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitVersion(t, w, ev, last)
	applied := ev.applied()
	for i := 1; i < len(applied); i++ {
		if applied[i] <= applied[i-1] {
			t.Fatalf("applied out of order or twice: %v", applied)
		}
	}
}

func TestSignatures(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))

	t.Run("untrusted key", func(t *testing.T) {
		other, _ := nkeys.CreateAccount()
		otherPub, _ := other.PublicKey()
		c, ev := newClientOn(t, e.srv.Connect(t, client.ConnectOptions()...), "distrustful", client.WithTrustedKeys(otherPub))
		w := watch(t, c)
		waitEvent(t, ev, "bad signature", func(e client.Event) bool {
			return e.Kind == client.EventRejected && errors.Is(e.Err, cuecast.ErrBadSignature)
		})
		if !w.Current().IsZero() {
			t.Fatalf("Current: got %+v, want nothing applied", w.Current())
		}
		// A refused pointer is reported as such, not as a failure to
		// apply (issue 15, item 5).
		e.waitReport("distrustful", func(r cuecast.Report) bool {
			return strings.Contains(r.Refused, "bad signature") && r.LastError == ""
		})
	})

	w, ev := e.watching("trusting", 1)
	e.ship(2, body(2))
	waitVersion(t, w, ev, 2)
	ptrSubj := fmt.Sprintf("ccr.payments.p.%d.checkout", w.Bucket())

	attacker, _ := nkeys.CreateAccount()
	// forge signs p for the bucket's subject with a revision above any
	// seen, so that the watcher judges it rather than dropping it as old.
	forge := func(p cuecast.Pointer, key nkeys.KeyPair) []byte {
		p.Subject = cuecast.PointerSubject(cfg, w.Bucket())
		if p.Revision == 0 {
			p.Revision = uint64(time.Now().UnixNano())
		}
		if key != nil {
			sig, _ := key.Sign(p.SigningBytes())
			p.Signature = base64.RawURLEncoding.EncodeToString(sig)
		}
		b, _ := json.Marshal(p)
		return b
	}
	cur := e.pointer(w.Bucket())
	js, _ := jetstream.New(e.dnc)
	st, _ := js.Stream(t.Context(), "CUECAST")
	lastOn := func(t *testing.T, subj string) *jetstream.RawStreamMsg {
		t.Helper()
		m, err := st.GetLastMsgForSubject(t.Context(), subj)
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"forged pointer signed by another key", forge(cuecast.Pointer{Config: cfg, Version: 1, Seq: 1, Checksum: cuecast.Checksum(body(1)), Rollback: true, SetAt: time.Now()}, attacker)},
		{"unsigned pointer", forge(cuecast.Pointer{Config: cfg, Version: 1, Seq: 1, Checksum: cuecast.Checksum(body(1)), Rollback: true, SetAt: time.Now()}, nil)},
		{"real pointer altered", func() []byte {
			p := cur
			p.Version, p.Rollback = 1, true
			p.Subject, p.Revision = cuecast.PointerSubject(cfg, w.Bucket()), uint64(time.Now().UnixNano())
			b, _ := json.Marshal(p)
			return b
		}()},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := nats.NewMsg(ptrSubj)
			m.Header.Set("Nats-Sequence", strconv.Itoa(1_000_000+i))
			m.Header.Set("Nats-Last-Sequence", "0")
			m.Header.Set("Cuecast-Pointer", string(tt.data))
			if err := e.dnc.PublishMsg(m); err != nil {
				t.Fatal(err)
			}
			waitEvent(t, ev, "rejection", func(e client.Event) bool {
				return e.Kind == client.EventRejected && errors.Is(e.Err, cuecast.ErrBadSignature) && e.Version == 1
			})
			if s := w.Current(); s.Version != 2 {
				t.Fatalf("Current: got %d, want 2", s.Version)
			}
			ev.mu.Lock()
			ev.all = nil
			ev.mu.Unlock()
		})
	}

	t.Run("tampered content behind a valid pointer", func(t *testing.T) {
		// A damaged store: a version message whose metadata (and signature)
		// are genuine but whose bytes are not, named by a validly signed
		// pointer.
		v3 := cuecast.Version{Config: cfg, Version: 3, Commit: "c003"}
		if err := e.d.Publish(t.Context(), v3, body(3)); err != nil {
			t.Fatal(err)
		}
		real := lastOn(t, "cc.payments.v.checkout")
		m := nats.NewMsg("cc.payments.v.checkout")
		m.Header.Set("Cuecast-Meta", real.Header.Get("Cuecast-Meta"))
		m.Data = []byte(`{"limit":100000,"name":"checkout"}`)
		ack, err := js.PublishMsg(t.Context(), m)
		if err != nil {
			t.Fatal(err)
		}
		var meta cuecast.Version
		_ = json.Unmarshal([]byte(real.Header.Get("Cuecast-Meta")), &meta)
		p := cuecast.Pointer{Config: cfg, Version: 3, Seq: ack.Sequence, Checksum: meta.Checksum, Size: meta.Size, SetAt: time.Now()}
		pm := nats.NewMsg(fmt.Sprintf("cc.payments.p.%d.checkout", w.Bucket()))
		pm.Header.Set("Cuecast-Pointer", string(forge(p, e.key)))
		if _, err := js.PublishMsg(t.Context(), pm); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ev, "checksum rejection", func(e client.Event) bool {
			return e.Kind == client.EventRejected && errors.Is(e.Err, cuecast.ErrChecksumMismatch) && e.Version == 3
		})
		e.waitReport("trusting", func(r cuecast.Report) bool {
			return r.Version == 2 && strings.Contains(r.LastError, "checksum mismatch")
		})
		if s := w.Current(); s.Version != 2 {
			t.Fatalf("Current: got %d, want 2", s.Version)
		}
	})

	t.Run("tampered inline content behind a valid pointer", func(t *testing.T) {
		// Bytes damaged on the way, or swapped by someone who can publish
		// on the subject: the pointer's signed checksum catches them and
		// the stored version is applied instead.
		v4 := cuecast.Version{Config: cfg, Version: 4, Commit: "c004"}
		if err := e.d.Publish(t.Context(), v4, body(4)); err != nil {
			t.Fatal(err)
		}
		stored := lastOn(t, "cc.payments.v.checkout")
		real := lastOn(t, fmt.Sprintf("cc.payments.p.%d.checkout", w.Bucket()))
		p := cuecast.Pointer{Config: cfg, Version: 4, Seq: stored.Sequence, Checksum: cuecast.Checksum(body(4)),
			Size: int64(len(body(4))), Commit: "c004", Inline: true, SetAt: time.Now()}
		m := nats.NewMsg(ptrSubj)
		m.Header.Set("Nats-Sequence", strconv.FormatUint(real.Sequence+1000, 10))
		m.Header.Set("Nats-Last-Sequence", strconv.FormatUint(real.Sequence, 10))
		m.Header.Set("Cuecast-Pointer", string(forge(p, e.key)))
		m.Data = []byte(`{"limit":100000,"name":"checkout"}`)
		if err := e.dnc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		waitEvent(t, ev, "inline rejection", func(e client.Event) bool {
			return e.Kind == client.EventRejected && errors.Is(e.Err, cuecast.ErrChecksumMismatch) && e.Version == 4
		})
		waitContent(t, w, ev, 4, "content")
	})

	t.Run("undecodable pointer", func(t *testing.T) {
		// Damaged bytes, or junk from whoever can publish on the subject,
		// are a refused pointer (docs/PROTOCOL.md §4.3), not a failure of
		// this instance: last_error stays empty, so no health gate counts
		// an honest instance as failing for what it was sent.
		m := nats.NewMsg(ptrSubj)
		m.Header.Set("Nats-Sequence", "2000000")
		m.Header.Set("Nats-Last-Sequence", "0")
		m.Header.Set("Cuecast-Pointer", `{"config":"payments/checkout","rev":`)
		if err := e.dnc.PublishMsg(m); err != nil {
			t.Fatal(err)
		}
		e.waitReport("trusting", func(r cuecast.Report) bool {
			return r.Version == 4 && r.LastError == "" &&
				strings.HasPrefix(r.Refused, "version 0: pointer: undecodable Cuecast-Pointer header: ")
		})
	})
}

// TestGapTriggersResync: a new pointer whose Nats-Last-Sequence is not the
// last one seen makes the watcher re-read the stored pointer.
func TestGapTriggersResync(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	w, ev := e.watching("gappy", 1)
	p := e.pointer(w.Bucket())
	// A genuine pointer for the bucket, newer than any seen, as if the
	// distributor had written it after one the watcher missed.
	p.Subject, p.Revision = cuecast.PointerSubject(cfg, w.Bucket()), p.Revision+1
	sig, _ := e.key.Sign(p.SigningBytes())
	p.Signature = base64.RawURLEncoding.EncodeToString(sig)
	m := nats.NewMsg(fmt.Sprintf("ccr.payments.p.%d.checkout", w.Bucket()))
	m.Header.Set("Nats-Sequence", "5000")
	m.Header.Set("Nats-Last-Sequence", "4999")
	enc, _ := json.Marshal(p)
	m.Header.Set("Cuecast-Pointer", string(enc))
	m.Data = body(1)
	if err := e.dnc.PublishMsg(m); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, ev, "gap resync", func(e client.Event) bool { return e.Kind == client.EventResync && e.Detail == "gap" })
	// The resync restored the real sequence, so real pointers are followed.
	e.ship(2, body(2))
	waitVersion(t, w, ev, 2)
}

// TestReconcile: the periodic re-read repairs a watcher that missed a
// pointer without any gap signal.
func TestReconcile(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	_, ev := e.watching("reconciled", 1, client.WithReconcile(50*time.Millisecond))
	waitEvent(t, ev, "reconcile", func(e client.Event) bool { return e.Kind == client.EventResync && e.Detail == "reconcile" })
}

// TestHeartbeat: reports are repeated, carrying the health provider's view.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	var mu sync.Mutex
	healthy := true
	health := func() cuecast.Health { mu.Lock(); defer mu.Unlock(); return cuecast.Health{Healthy: healthy} }
	e.watching("beating", 1, client.WithHeartbeat(20*time.Millisecond), client.WithHealth(health))
	e.waitReport("beating", func(r cuecast.Report) bool { return r.Healthy })
	mu.Lock()
	healthy = false
	mu.Unlock()
	e.waitReport("beating", func(r cuecast.Report) bool { return !r.Healthy && r.Version == 1 })
}

// TestEveryWatcherOfAClientResyncsAfterReconnect: the Client listens to its
// connection once and wakes each of its watchers on a reconnect, so every
// watcher re-reads its pointers, including one started after every earlier
// watcher had stopped (the listener is dropped with the last watcher and
// taken again by the next). A watcher that missed a version while the
// connection was down applies it.
func TestEveryWatcherOfAClientResyncsAfterReconnect(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	p := startProxy(t, e.srv.Addr().String())
	nc := p.connect(t)
	c, ev := e.newClientOn(nc, "forwarded")
	reconnects := func() int {
		n := 0
		for _, e := range ev.list() {
			if e.Kind == client.EventResync && e.Detail == "reconnect" {
				n++
			}
		}
		return n
	}
	outage := func(v uint64) {
		t.Helper()
		p.cutAndWait(t, nc)
		e.ship(v, body(v))
		p.restore()
	}

	ws := []*client.Watcher{watch(t, c), watch(t, c), watch(t, c)}
	for _, w := range ws {
		waitVersion(t, w, ev, 1)
	}
	outage(2)
	poll.Until(t, "three reconnect resyncs", poll.Patience, func() (bool, string) {
		return reconnects() == len(ws), fmt.Sprintf("%d; events:%s", reconnects(), ev)
	})
	for _, w := range ws {
		waitVersion(t, w, ev, 2)
		w.Stop()
	}

	before := reconnects()
	w := watch(t, c)
	waitVersion(t, w, ev, 2)
	outage(3)
	poll.Until(t, "the new watcher's reconnect resync", poll.Patience, func() (bool, string) {
		return reconnects() == before+1, fmt.Sprintf("%d after %d; events:%s", reconnects(), before, ev)
	})
	waitVersion(t, w, ev, 3)
}
