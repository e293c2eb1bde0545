package distributor_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// A pointer write whose acknowledgement is lost with its connection (the
// link to NATS cut after the server stored the write, before the answer
// came back) must not leave Deploy waiting: pointers are written
// asynchronously, and the tailer calls Deploy with a context that has no
// deadline, so a wait without end would hang its poll with no error to
// log. nats.go fails the pending acknowledgements when the connection
// drops; this holds it to that (checked while looking for the cause of
// TestSoakFaults/external's silent stalls, which it was not), and the next
// Deploy finds every bucket written.
func TestDeployReturnsWhenAPointerWriteAckIsLost(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	link := natstest.StartLink(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, err := nats.Connect("nats://"+link.Addr(), nats.Timeout(5*time.Second),
		nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := newDistOn(t, nc, distributor.Options{})
	v1 := mustPublish(t, d, 1, content(1))
	if err := d.Deploy(t.Context(), v1); err != nil {
		t.Fatal(err)
	}
	v2 := mustPublish(t, d, 2, content(2))

	err = link.LoseAnswer(t, srv, "cc.payments.p.>", func() error { return d.Deploy(context.Background(), v2) })
	t.Logf("Deploy(v2) after its acknowledgements were lost: %v", err)
	// Whatever Deploy said, the next one leaves every bucket at v2.
	poll.Until(t, "every bucket at v2", poll.Patience, func() (bool, string) {
		if err := d.Deploy(t.Context(), v2); err != nil {
			return false, err.Error()
		}
		for b := range cuecast.Buckets {
			p, err := d.Pointer(t.Context(), cfg, b)
			if err != nil || p.Version != 2 {
				return false, fmt.Sprintf("bucket %d: v%d %v", b, p.Version, err)
			}
		}
		return true, ""
	})
}

// The answers to pointer writes held without the connection dropping (a
// one-way partition: the client notices only at its ping timeout, minutes
// later) kept Deploy, and so the tailer, waiting as long: jetstream waits
// for an asynchronous acknowledgement without limit unless told. Deploy
// now gives up after 10 s with an error, and once the way back
// flows again the next Deploy finds every bucket written.
func TestDeployReturnsWhenPointerWriteAcksAreHeld(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	link := natstest.StartLink(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, err := nats.Connect("nats://"+link.Addr(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d := newDistOn(t, nc, distributor.Options{})
	v1 := mustPublish(t, d, 1, content(1))
	link.StallBackOn([]byte("PUB cc.payments.p."))
	done := make(chan error, 1)
	go func() { done <- d.Deploy(context.Background(), v1) }()
	err = poll.Receive(t, "Deploy's return with acknowledgements held on a live connection (still waiting)", poll.Patience, done)
	if err == nil {
		t.Fatal("Deploy returned no error though no write was acknowledged")
	}
	t.Logf("Deploy with its acknowledgements held: %v", err)
	link.Unstall()
	poll.Until(t, "every bucket at v1", poll.Patience, func() (bool, string) {
		if err := d.Deploy(t.Context(), v1); err != nil {
			return false, err.Error()
		}
		p, err := d.Pointer(t.Context(), cfg, cuecast.Buckets-1)
		return err == nil && p.Version == 1, fmt.Sprintf("bucket %d: v%d %v", cuecast.Buckets-1, p.Version, err)
	})
}
