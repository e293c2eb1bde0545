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
	// ReadyTimeout bounds the wait for the server to accept clients; default 10s.
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
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = 10 * time.Second
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
	opts.NoLog = o.Logger == nil
	s, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("start nats on %s: %w", o.Listen, err)
	}
	if o.Logger != nil {
		s.SetLoggerV2(slogLogger{o.Logger}, false, false, false)
	}
	go s.Start()
	deadline := time.Now().Add(o.ReadyTimeout)
	for !s.ReadyForConnections(100 * time.Millisecond) {
		if ctx.Err() != nil || time.Now().After(deadline) {
			s.Shutdown()
			// The port was free (checkPort): what is left is recovering the
			// store, which on damaged block files can take very long.
			return nil, fmt.Errorf("start nats on %s: not ready after %s: still recovering the JetStream store in %s (damaged or very large block files?)", o.Listen, o.ReadyTimeout, o.Dir)
		}
	}
	return s, nil
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
