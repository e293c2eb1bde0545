package leader_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/internal/leader"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const ttl = 600 * time.Millisecond

// candidate runs one Lease on its own connection and records its terms.
type candidate struct {
	id     string
	nc     *nats.Conn
	lease  *leader.Lease
	cancel context.CancelFunc
	done   chan error
	terms  chan leader.Term
	once   sync.Once
}

// stop cancels the candidate and waits for its Run; safe twice.
func (c *candidate) stop() {
	c.once.Do(func() {
		c.cancel()
		<-c.done
	})
}

func startCandidate(t *testing.T, srv *natstest.Server, id string, active *atomic.Int32, overlap *atomic.Bool) *candidate {
	t.Helper()
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	l, err := leader.New(context.Background(), js, leader.Options{ID: id, TTL: ttl})
	if err != nil {
		t.Fatalf("new lease: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c := &candidate{id: id, nc: nc, lease: l, cancel: cancel, done: make(chan error, 1), terms: make(chan leader.Term, 16)}
	go func() {
		c.done <- l.Run(ctx, func(ctx context.Context, term leader.Term) error {
			if active.Add(1) > 1 {
				overlap.Store(true)
			}
			defer active.Add(-1)
			c.terms <- term
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(c.stop)
	return c
}

func waitTerm(t *testing.T, c *candidate) leader.Term {
	t.Helper()
	select {
	case term := <-c.terms:
		return term
	case <-time.After(20 * time.Second):
		t.Fatalf("%s never acquired the lease", c.id)
	}
	return leader.Term{}
}

func TestTakeover(t *testing.T) {
	for _, tc := range []struct {
		name string
		kill func(*candidate)
	}{
		{"holder stops", func(c *candidate) { c.stop() }},
		{"holder's connection dies", func(c *candidate) { c.nc.Close() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := natstest.Start(t)
			var active atomic.Int32
			var overlap atomic.Bool
			a := startCandidate(t, srv, "a", &active, &overlap)
			first := waitTerm(t, a)
			b := startCandidate(t, srv, "b", &active, &overlap)
			holder, _, err := b.lease.Holder(context.Background())
			if err != nil || holder != "a" {
				t.Fatalf("holder %q (%v), want a", holder, err)
			}
			tc.kill(a)
			second := waitTerm(t, b)
			if second.Revision <= first.Revision {
				t.Errorf("second term revision %d, want above %d", second.Revision, first.Revision)
			}
			if overlap.Load() {
				t.Error("two candidates worked at once")
			}
		})
	}
}

func TestLeaseTakenOverCancelsWork(t *testing.T) {
	srv := natstest.Start(t)
	var active atomic.Int32
	var overlap atomic.Bool
	a := startCandidate(t, srv, "a", &active, &overlap)
	waitTerm(t, a)
	// Someone else writes the lease (the fencing revision moves): the holder
	// notices at its next renewal and stops working.
	js, _ := jetstream.New(srv.Connect(t))
	kv, err := js.KeyValue(context.Background(), "cuecast-lease")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kv.Put(context.Background(), "serve", []byte("intruder")); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "holder stopping", 10*time.Second, func() (bool, string) {
		return active.Load() == 0, fmt.Sprintf("%d working", active.Load())
	})
}

func TestManyCandidatesOneHolder(t *testing.T) {
	srv := natstest.Start(t)
	var active atomic.Int32
	var overlap atomic.Bool
	var cs []*candidate
	for i := range 4 {
		cs = append(cs, startCandidate(t, srv, fmt.Sprintf("c%d", i), &active, &overlap))
	}
	// Stop holders one by one; each time exactly one other takes over.
	var mu sync.Mutex
	left := map[*candidate]bool{}
	for _, c := range cs {
		left[c] = true
	}
	for range 3 {
		var holder *candidate
		poll.Until(t, "a holder", 20*time.Second, func() (bool, string) {
			mu.Lock()
			defer mu.Unlock()
			for c := range left {
				select {
				case <-c.terms:
					holder = c
					return true, ""
				default:
				}
			}
			return false, "none"
		})
		delete(left, holder)
		holder.stop()
	}
	if overlap.Load() {
		t.Error("two candidates worked at once")
	}
}

func TestOptions(t *testing.T) {
	srv := natstest.Start(t)
	js, _ := jetstream.New(srv.Connect(t))
	for _, o := range []leader.Options{{}, {ID: "x", TTL: time.Millisecond}, {ID: "x", Replicas: 7}} {
		if _, err := leader.New(context.Background(), js, o); !errors.Is(err, leader.ErrInvalidOptions) {
			t.Errorf("%+v: got %v, want ErrInvalidOptions", o, err)
		}
	}
}

// TestReclaimOwnLease: a candidate with Reclaim takes a lease held under its
// own ID (a crashed predecessor's) at once, as a new term with a higher
// revision, while a lease held under another ID still waits for expiry.
func TestReclaimOwnLease(t *testing.T) {
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	js := natstest.JetStream(t, nc)
	ctx := t.Context()
	// A TTL the test never waits out: a takeover by expiry would time out.
	const long = time.Hour
	next, err := leader.New(ctx, js, leader.Options{ID: "embedded:/data", TTL: long, Reclaim: true})
	if err != nil {
		t.Fatal(err)
	}
	kv, err := js.KeyValue(ctx, "cuecast-lease")
	if err != nil {
		t.Fatal(err)
	}
	// The predecessor's lease, left behind as a kill -9 leaves it.
	rev, err := kv.Create(ctx, "serve", []byte("embedded:/data"))
	if err != nil {
		t.Fatal(err)
	}
	other, err := leader.New(ctx, js, leader.Options{ID: "replica-2", TTL: long, Reclaim: true})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	otherTerms := make(chan leader.Term, 1)
	go func() {
		_ = other.Run(rctx, func(ctx context.Context, term leader.Term) error { otherTerms <- term; <-ctx.Done(); return nil })
	}()
	terms := make(chan leader.Term, 1)
	done := make(chan error, 1)
	go func() {
		done <- next.Run(rctx, func(ctx context.Context, term leader.Term) error { terms <- term; <-ctx.Done(); return nil })
	}()
	select {
	case term := <-terms:
		if term.Revision <= rev {
			t.Errorf("reclaimed term revision %d, want above the predecessor's %d", term.Revision, rev)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the lease held under its own ID was not reclaimed")
	}
	select {
	case term := <-otherTerms:
		t.Fatalf("another ID took the lease too: %+v", term)
	default:
	}
	if holder, _, err := next.Holder(ctx); err != nil || holder != "embedded:/data" {
		t.Fatalf("holder %q (%v), want embedded:/data", holder, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run: %v", err)
	}
}

// TestHolderStopsWhileItsWritesBlock: a holder whose connection stops
// taking writes (its server stopped reading it, as an embedded server did
// writing a full disk) stops its work 0.9×TTL after its last renewal, as
// one cut off does (docs/SCALING.md), while the renewal it sent is still
// blocked. Its renewal used to block the loop that ends the term, and the
// work went on for as long as the write blocked (a minute, there), past
// the lease's expiry, when another may hold it.
func TestHolderStopsWhileItsWritesBlock(t *testing.T) {
	srv := natstest.Start(t)
	link := natstest.StartLink(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	// Writes never time out: only the lease's own clock ends the term.
	nc, err := nats.Connect("nats://"+link.Addr(), nats.FlusherTimeout(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	t.Cleanup(link.Unstall) // before the connection closes, whatever happened
	js := natstest.JetStream(t, nc)
	l, err := leader.New(t.Context(), js, leader.Options{ID: "blocked", TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	started, stopped := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- l.Run(ctx, func(ctx context.Context, _ leader.Term) error {
			close(started)
			<-ctx.Done()
			close(stopped)
			return nil
		})
	}()
	<-started

	// The server stops reading; writes on the connection fill the
	// kernel's buffers, then block, the lease's renewals with them.
	link.Block()
	go func() {
		junk := make([]byte, 256<<10)
		for nc.Publish("junk", junk) == nil {
		}
	}()
	select {
	case <-stopped:
	case <-time.After(poll.Patience):
		t.Fatalf("the holder's work still runs %s after its writes blocked; its lease expired %s after its last renewal", poll.Patience, ttl)
	}
	link.Unstall()
	cancel()
	<-done
}
