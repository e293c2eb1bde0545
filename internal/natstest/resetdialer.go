package natstest

import (
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// ResetDialer dials a server straight from its clients and can abort every
// connection it made at once, as Link.Reset does: the fault of a fleet's
// connections to its server dropped together. Each client dials through its
// own Client dialer (nats.SetCustomDialer).
//
// It exists for fleets too large for a Link in one test process. A Link
// costs four file descriptors a connection (the client's socket, the
// proxy's two, the server's), so 5,000 instances need 20,000, the limit of
// this machine (ulimit -n): the reconnect storm of 5,000 ran out of them
// and the fleet never came back. Through a ResetDialer a connection costs
// two. It offers only Reset: for cuts, delays and stalls, use a Link.
type ResetDialer struct {
	// Timeout bounds each dial; zero means 5s.
	Timeout time.Duration

	mu    sync.Mutex
	conns map[*resetConn]struct{}
}

// Client returns a dialer for one client connection. Dialing again closes
// the connection it dialed before: a nats.Conn dials only once that one is
// of no more use, and nats.go (v1.55) leaves it open when the handshake of
// a reconnect fails (doReconnect after processConnectInit), so that a storm
// of failed handshakes in one process exhausts its file descriptors long
// before the garbage collector closes them, and leaves the server holding
// each as a client that never reads.
func (d *ResetDialer) Client() nats.CustomDialer { return &clientDialer{d: d} }

// Reset aborts every connection open now with a TCP reset (RST, no FIN),
// and returns how many. Dials go on succeeding: the clients reconnect.
func (d *ResetDialer) Reset() int {
	d.mu.Lock()
	conns := d.conns
	d.conns = nil
	d.mu.Unlock()
	for c := range conns {
		_ = c.SetLinger(0) // Close sends RST
		_ = c.TCPConn.Close()
	}
	return len(conns)
}

// Open is how many of its connections are open.
func (d *ResetDialer) Open() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.conns)
}

func (d *ResetDialer) dial(network, address string) (*resetConn, error) {
	nd := net.Dialer{Timeout: d.Timeout}
	if nd.Timeout == 0 {
		nd.Timeout = 5 * time.Second
	}
	c, err := nd.Dial(network, address)
	if err != nil {
		return nil, fmt.Errorf("reset dialer: %w", err)
	}
	tc, ok := c.(*net.TCPConn)
	if !ok {
		c.Close()
		return nil, fmt.Errorf("reset dialer: %s is not TCP", network)
	}
	rc := &resetConn{TCPConn: tc, d: d}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.conns == nil {
		d.conns = map[*resetConn]struct{}{}
	}
	d.conns[rc] = struct{}{}
	return rc, nil
}

// clientDialer is one client's dialer (ResetDialer.Client). nats.go dials
// from one goroutine at a time per connection.
type clientDialer struct {
	d    *ResetDialer
	last *resetConn
}

func (c *clientDialer) Dial(network, address string) (net.Conn, error) {
	if c.last != nil {
		_ = c.last.Close()
		c.last = nil
	}
	rc, err := c.d.dial(network, address)
	if err != nil {
		return nil, err
	}
	c.last = rc
	return rc, nil
}

// resetConn is a dialed connection, forgotten by its dialer once closed.
type resetConn struct {
	*net.TCPConn
	d *ResetDialer
}

func (c *resetConn) Close() error {
	c.d.mu.Lock()
	delete(c.d.conns, c)
	c.d.mu.Unlock()
	return c.TCPConn.Close()
}
