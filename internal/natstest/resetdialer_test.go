package natstest

import (
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/internal/poll"
)

// TestResetDialerResetsEveryConnection: clients dialing through a
// ResetDialer lose their connections together at Reset, the server sees
// them go, and every client comes back through it.
func TestResetDialerResetsEveryConnection(t *testing.T) {
	s := Start(t)
	var d ResetDialer
	const n = 20
	var ncs []*nats.Conn
	for range n {
		ncs = append(ncs, s.Connect(t, nats.SetCustomDialer(d.Client()), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond)))
	}
	if got := d.Open(); got != n {
		t.Fatalf("open: got %d, want %d", got, n)
	}
	if got := d.Reset(); got != n {
		t.Fatalf("reset: got %d, want %d", got, n)
	}
	poll.Until(t, "every client reconnected through the dialer", poll.Patience, func() (bool, string) {
		back := 0
		for _, nc := range ncs {
			if nc.IsConnected() && nc.Reconnects > 0 {
				back++
			}
		}
		return back == n && d.Open() == n && s.NumClients() == n,
			fmt.Sprintf("%d of %d back, %d open, the server has %d clients", back, n, d.Open(), s.NumClients())
	})
}

// TestResetDialerClosesWhatItReplaces: a client's dialer closes the
// connection it dialed before when it dials again. nats.go (v1.55) leaves
// a connection open when a reconnect's handshake fails and dials another;
// in a storm of 5,000 instances in one process that exhausted the file
// descriptors.
func TestResetDialerClosesWhatItReplaces(t *testing.T) {
	addr := echo(t)
	var d ResetDialer
	cd := d.Client()
	first, err := cd.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	second, err := cd.Dial("tcp", addr) // the first left open, as nats.go leaves it
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if got := d.Open(); got != 1 {
		t.Errorf("open: got %d, want 1", got)
	}
	_ = first.SetReadDeadline(time.Now().Add(poll.Patience)) // a guard against a hang
	if _, err := first.Read(make([]byte, 1)); !errors.Is(err, net.ErrClosed) {
		t.Errorf("the replaced connection reads %v, want net.ErrClosed", err)
	}
	if _, err := roundTrip(second, []byte("ping")); err != nil {
		t.Errorf("the new connection: %v", err)
	}
}
