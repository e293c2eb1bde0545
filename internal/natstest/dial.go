package natstest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/nats-io/nats.go"
)

// Dial connects to url as nats.Connect does, and asks again while a login
// ends unjudged (Unjudged): on a loaded machine the server may close a
// connection whose credentials it had no time to check ("Authentication
// Timeout", or a close before the PONG), which says nothing about the
// credentials. A judged login returns at once: a connection, or the
// server's refusal (nats.ErrAuthorization…), which a test expecting a
// refusal must see as such. It gives up when ctx ends, returning the last
// error with the context's.
func Dial(ctx context.Context, url string, opts ...nats.Option) (*nats.Conn, error) {
	for {
		nc, err := nats.Connect(url, opts...)
		if err == nil || !Unjudged(err) {
			return nc, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connect %s: every login unjudged: %w (%w)", url, err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Unjudged reports whether a login failed without the server judging its
// credentials: the server's authentication timer fired first, the
// connection closed or was reset before the server answered the first PING,
// or the client's own timeout ran out. An authorization violation, an
// expired or revoked credential, and a refused connection (no server) are
// judged.
func Unjudged(err error) bool {
	switch {
	case err == nil, errors.Is(err, nats.ErrAuthorization), errors.Is(err, nats.ErrAuthExpired),
		errors.Is(err, nats.ErrAuthRevoked), errors.Is(err, nats.ErrAccountAuthExpired),
		errors.Is(err, nats.ErrNoServers), errors.Is(err, syscall.ECONNREFUSED):
		return false
	case strings.Contains(strings.ToLower(err.Error()), "authentication timeout"),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, net.ErrClosed),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, os.ErrDeadlineExceeded):
		return true
	}
	return false
}
