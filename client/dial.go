package client

import (
	"net"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
)

// dialTimeout bounds a TCP dial made by ConnectOptions' dialer: a host that
// is down is found as fast as nats.go's default finds it. The login that
// follows has its own bound, nats.Timeout (handshakeTimeout).
const dialTimeout = 2 * time.Second

// withDialer installs a new closingDialer on each connection it is applied
// to: nats.Connect applies its options to a fresh nats.Options per call, so
// a ConnectOptions() slice shared by several connections gives each its
// own, and one's reconnect never closes another's socket.
func withDialer() nats.Option {
	return func(o *nats.Options) error {
		o.CustomDialer = &closingDialer{timeout: dialTimeout}
		return nil
	}
}

// closingDialer dials one connection's sockets, and closes the one it
// dialed before when it dials again. nats.go dials again only once that
// one is of no more use, yet (v1.55, v1.56) leaves it open when a
// reconnect's login fails (doReconnect after processConnectInit): in a
// reconnect storm each abandoned login cost the service a file descriptor,
// and the server a client that never reads, until the garbage collector
// found them.
type closingDialer struct {
	timeout time.Duration

	// nats.go dials under its connection's lock; mu keeps that true if it
	// ever stops doing so.
	mu   sync.Mutex
	last net.Conn
}

// Dial closes the socket dialed before, then dials address. With a host
// name that resolves to several addresses nats.go calls it once per
// address until one answers, each bounded by the dial timeout (its own
// dialer splits nats.Timeout between them).
func (d *closingDialer) Dial(network, address string) (net.Conn, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.last != nil {
		_ = d.last.Close() // already closed, mostly: nats.go closes a connection it drops
		d.last = nil
	}
	nd := net.Dialer{Timeout: d.timeout}
	c, err := nd.Dial(network, address)
	if err != nil {
		return nil, err // a *net.OpError naming the address, as nats.go's own dialer returns
	}
	d.last = c
	return c, nil
}
