package integration_test

import (
	"bufio"
	"fmt"
	"net"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// loginServer is a NATS server on loopback too busy to log its clients in
// promptly: it sends each connection its INFO at once, then answers the
// client's first PING (the end of the handshake) only after pong, or
// never if pong is negative. It notes which of its connections the client
// closed.
type loginServer struct {
	ln   net.Listener
	pong time.Duration

	mu     sync.Mutex
	closed []bool // by accept order: the client closed it
}

func startLoginServer(t *testing.T, pong time.Duration) *loginServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &loginServer{ln: ln, pong: pong}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.mu.Lock()
			i := len(s.closed)
			s.closed = append(s.closed, false)
			s.mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serve(c, i)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return s
}

func (s *loginServer) url() string { return "nats://" + s.ln.Addr().String() }

// serve logs connection i in, slowly, and reads it until the client closes it.
func (s *loginServer) serve(c net.Conn, i int) {
	defer func() {
		s.mu.Lock()
		s.closed[i] = true
		s.mu.Unlock()
	}()
	if _, err := fmt.Fprintf(c, "INFO {\"server_id\":\"slow\",\"max_payload\":1048576}\r\n"); err != nil {
		return
	}
	r := bufio.NewReader(c)
	pinged := false
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return // the client closed it (or the test ended)
		}
		if !strings.HasPrefix(line, "PING") {
			continue
		}
		if !pinged && s.pong < 0 {
			continue // the login never ends
		}
		if !pinged {
			time.Sleep(s.pong)
			pinged = true
		}
		if _, err := c.Write([]byte("PONG\r\n")); err != nil {
			return
		}
	}
}

// accepted is how many connections the server accepted, and how many of
// the first n of them are still open.
func (s *loginServer) accepted(n int) (total, open int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < n && i < len(s.closed); i++ {
		if !s.closed[i] {
			open++
		}
	}
	return len(s.closed), open
}

// TestConnectOptionsCloseAbandonedHandshakes: a client that gives up on a
// login and dials again closes the socket it gave up on. nats.go (v1.55)
// leaves it open when a reconnect's handshake fails, so a storm of failed
// logins cost the service a file descriptor each, and the server a client
// that never reads, until the garbage collector closed them.
func TestConnectOptionsCloseAbandonedHandshakes(t *testing.T) {
	// The garbage collector closes a socket nobody holds, some time later;
	// the test asks whether the client does, so it keeps it out of the way.
	// The switch is the whole process's: not t.Parallel, so that no other
	// test runs without a collector, nor collects, beside it.
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	srv := startLoginServer(t, -1)
	// A short handshake and reconnect wait make the attempts quick; they
	// leave the dialer, which is what is tested, ConnectOptions' own.
	nc, err := nats.Connect(srv.url(), append(client.ConnectOptions(),
		nats.Timeout(100*time.Millisecond),
		nats.CustomReconnectDelay(func(int) time.Duration { return time.Millisecond }))...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	const n = 10
	poll.Until(t, "ten logins attempted", poll.Patience, func() (bool, string) {
		total, _ := srv.accepted(0)
		return total >= n, fmt.Sprintf("%d attempted", total)
	})
	// When the client dialed the n-th, it had given up on the n-1 before.
	poll.Until(t, "the abandoned logins' sockets closed by the client", poll.Patience, func() (bool, string) {
		_, open := srv.accepted(n - 1)
		return open == 0, fmt.Sprintf("%d of the first %d open", open, n-1)
	})
}

// TestConnectOptionsWaitForASlowLogin: a server that completes a login in
// 3 s (its logins queue under one lock after a storm) is waited for.
// nats.go's own 2 s bound on dial and handshake together gave up on every
// such login and made it again, lengthening the queue.
func TestConnectOptionsWaitForASlowLogin(t *testing.T) {
	t.Parallel()
	srv := startLoginServer(t, 3*time.Second)
	nc, err := nats.Connect(srv.url(), client.ConnectOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	poll.Until(t, "connected", poll.Patience, func() (bool, string) {
		total, _ := srv.accepted(0)
		return nc.IsConnected(), fmt.Sprintf("%s after %d logins", nc.Status(), total)
	})
	if total, _ := srv.accepted(0); total != 1 {
		t.Errorf("connected after %d logins, want the first one waited for", total)
	}
}

// TestConnectOptionsReusedForTwoConnections: one ConnectOptions() slice
// may serve several connections; each gets its own dialer, so one's
// reconnect does not close the other's socket.
func TestConnectOptionsReusedForTwoConnections(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	opts := client.ConnectOptions()
	nc1, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc1.Close()
	nc2, err := nats.Connect(srv.ClientURL(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc2.Close()
	if err := nc1.ForceReconnect(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the first connection reconnected", poll.Patience, func() (bool, string) {
		return nc1.Stats().Reconnects > 0 && nc1.IsConnected(), fmt.Sprintf("%s, %d reconnects", nc1.Status(), nc1.Stats().Reconnects)
	})
	if err := nc2.FlushTimeout(poll.Patience); err != nil {
		t.Fatalf("the second connection after the first reconnected: %v", err)
	}
	if got := nc2.Stats().Reconnects; got != 0 {
		t.Errorf("the second connection reconnected %d times, want 0: the first one's dial closed its socket", got)
	}
}
