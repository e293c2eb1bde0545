// Package natsserver runs the NATS server with JetStream inside the cuecast
// process, so that `cuecast serve` needs nothing installed but Go.
package natsserver

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Options configures an embedded server.
type Options struct {
	// Dir holds the JetStream store; it survives restarts.
	Dir string
	// Listen is host:port for clients; port 0 (or -1) picks a free port.
	Listen string
	// ServerName names the server in logs and cluster views; default "cuecast".
	ServerName string
	// ReadyTimeout bounds the wait for the server to accept clients. Zero
	// waits until ctx is done, logging every 10 s (progressEvery) that the
	// store is still being recovered: a large or damaged store can take
	// minutes, and a serve that gave up on it would only be started again
	// by its supervisor into the same recovery, for ever.
	ReadyTimeout time.Duration
	// MaxFileStore caps the JetStream file store in bytes (max_file_store);
	// zero: the server's default share of the disk.
	MaxFileStore int64
	// Logger receives the server's warnings and errors (its notices at
	// Debug); nil discards them.
	Logger *slog.Logger
	// ConfigFile, when set, is a nats-server configuration (natsconf's
	// Standalone level: accounts, users, TLS) the server runs with; Dir
	// and Listen still decide the store and the address.
	ConfigFile string
}

// Start runs an embedded NATS server with JetStream and waits until it accepts
// clients. The caller stops it with Shutdown and WaitForShutdown.
func Start(ctx context.Context, o Options) (*server.Server, error) {
	if o.Dir == "" {
		return nil, fmt.Errorf("start nats: a store directory is required")
	}
	host, portStr, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return nil, fmt.Errorf("start nats: listen address %q: %w", o.Listen, err)
	}
	port, err := strconv.Atoi(portStr)
	if err != nil {
		return nil, fmt.Errorf("start nats: listen port %q: %w", portStr, err)
	}
	if port == 0 {
		port = server.RANDOM_PORT
	}
	if err := checkPort("--listen", host, port); err != nil {
		return nil, fmt.Errorf("start nats: %w", err)
	}
	if o.ServerName == "" {
		o.ServerName = "cuecast"
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	opts := &server.Options{}
	if o.ConfigFile != "" {
		if opts, err = server.ProcessConfigFile(o.ConfigFile); err != nil {
			return nil, fmt.Errorf("start nats: %w", err)
		}
	}
	opts.ServerName, opts.Host, opts.Port = o.ServerName, host, port
	opts.JetStream, opts.StoreDir = true, o.Dir
	opts.NoSigs = true
	// Reports and pointers are small, but a fan-out to thousands of local
	// subscribers must not trip slow-consumer disconnects on a busy box.
	opts.WriteDeadline = 10 * time.Second
	// A full store refuses publishes ("insufficient resources") and serve's
	// /readyz says so; see internal/pipeline/space.go.
	opts.JetStreamMaxStore = o.MaxFileStore
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start nats on %s: %w", o.Listen, err)
	}
	// The logger is set even when the caller wants no log: the server's
	// fatal errors (a port taken after checkPort looked, by another
	// process; JetStream that cannot start) reach Start only through it.
	fatal := make(chan string, 1)
	s.SetLoggerV2(slogLogger{log: o.Logger, fatal: fatal}, false, false, false)
	go s.Start()
	if err := waitReady(ctx, s, o, fatal); err != nil {
		s.Shutdown()
		s.WaitForShutdown()
		return nil, err
	}
	return s, nil
}

// progressEvery is how often a start still waiting says so (Warn).
const progressEvery = 10 * time.Second

// waitReady waits until s accepts clients. A fatal error ends the wait at
// once, with the server's own words: the server does not exit on one
// here, it only never becomes ready. Otherwise what the server is still
// doing is recovering the store, which is worth waiting for.
func waitReady(ctx context.Context, s *server.Server, o Options, fatal <-chan string) error {
	start := time.Now()
	var bound <-chan time.Time
	if o.ReadyTimeout > 0 {
		t := time.NewTimer(o.ReadyTimeout)
		defer t.Stop()
		bound = t.C
	}
	progress := time.NewTicker(progressEvery)
	defer progress.Stop()
	for !s.ReadyForConnections(100 * time.Millisecond) {
		select {
		case msg := <-fatal:
			return fmt.Errorf("start nats on %s: %s", o.Listen, msg)
		case <-ctx.Done():
			return fmt.Errorf("start nats on %s: stopped after %s while still recovering the JetStream store in %s: %w", o.Listen, time.Since(start).Round(time.Second), o.Dir, context.Cause(ctx))
		case <-bound:
			return fmt.Errorf("start nats on %s: not ready after %s: still recovering the JetStream store in %s (damaged or very large block files?)", o.Listen, o.ReadyTimeout, o.Dir)
		case <-progress.C:
			o.Logger.Warn("the NATS server is not ready yet: still recovering the JetStream store; waiting", "store", o.Dir, "waited", time.Since(start).Round(time.Second))
		default:
		}
	}
	return nil
}

// ClientURL is where clients on this machine reach s: the server's own
// ClientURL, except that an unspecified listen host (0.0.0.0, ::, empty:
// every interface) becomes the loopback address of its family. A client
// cannot verify a TLS certificate against an unspecified address (no
// certificate can name one), while the certificate serve --secure creates
// always names 127.0.0.1 and ::1.
func ClientURL(s *server.Server) string {
	u, err := url.Parse(s.ClientURL())
	if err != nil {
		return s.ClientURL()
	}
	switch host := u.Hostname(); host {
	case "", "0.0.0.0":
		u.Host = net.JoinHostPort("127.0.0.1", u.Port())
	case "::":
		u.Host = net.JoinHostPort("::1", u.Port())
	}
	return u.String()
}
