// Package natstest starts real embedded NATS servers for tests: JetStream on,
// random port, store in t.TempDir(), shut down by t.Cleanup.
package natstest

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natsserver"
	"github.com/cuecast/cuecast/internal/poll"
)

// Server is a running test server with its store directory.
type Server struct {
	*server.Server
	Dir string
	t   testing.TB
}

// Start runs a fresh server with its own store directory.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartIn(t, t.TempDir())
}

// StartIn runs a server on a random port over an existing store directory, so a
// test can stop a server and start another on the same data.
func StartIn(t testing.TB, dir string) *Server {
	t.Helper()
	// A bound, where serve waits on: a test store is small, and a start
	// that hangs should fail the test, not run into its timeout.
	s, err := natsserver.Start(context.Background(), natsserver.Options{Dir: dir, Listen: "127.0.0.1:0", ReadyTimeout: time.Minute})
	if err != nil {
		t.Fatalf("start nats: %v", err)
	}
	srv := &Server{Server: s, Dir: dir, t: t}
	t.Cleanup(srv.Stop)
	return srv
}

// Stop shuts the server down and waits for it; safe to call twice.
func (s *Server) Stop() {
	if s.Server == nil {
		return
	}
	s.Shutdown()
	s.WaitForShutdown()
}

// Connect opens a client connection closed by t.Cleanup, asking again
// while a login ends unjudged (Dial).
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{nats.Timeout(5 * time.Second)}, opts...)
	ctx, cancel := context.WithTimeout(context.Background(), poll.Patience)
	defer cancel()
	nc, err := Dial(ctx, s.ClientURL(), opts...)
	if err != nil {
		t.Fatalf("connect nats: %v", err)
	}
	t.Cleanup(nc.Close)
	return nc
}

// JetStream is nc's JetStream context; jetstream.New's error (it has one
// only for a connection it cannot use) fails t.
func JetStream(t testing.TB, nc *nats.Conn) jetstream.JetStream {
	t.Helper()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("jetstream: %v", err)
	}
	return js
}

// Watch is a client on nc with opts watching cfg with wopts, the watcher
// stopped when the test ends; an error of client.New or Watch fails t.
func Watch(t testing.TB, nc *nats.Conn, cfg cuecast.ConfigPath, opts []client.Option, wopts ...client.WatchOption) *client.Watcher {
	t.Helper()
	cl, err := client.New(nc, opts...)
	if err != nil {
		t.Fatalf("new client: %v", err)
	}
	w, err := cl.Watch(context.Background(), cfg, wopts...)
	if err != nil {
		t.Fatalf("watch %s: %v", cfg, err)
	}
	t.Cleanup(w.Stop)
	return w
}
