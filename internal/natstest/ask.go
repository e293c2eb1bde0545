package natstest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// AskAgain calls ask, each call with a timeout of its own, until it answers
// or fails with an error that is not Transient, or ctx ends: while
// JetStream settles (a link just up, a leader being elected, a loaded
// machine), a request may find no responder or no answer in time, which
// says nothing of what it asked. It returns the answer, or the last error
// (with ctx's when ctx ended).
func AskAgain[T any](ctx context.Context, ask func(ctx context.Context) (T, error)) (T, error) {
	for {
		try, cancel := context.WithTimeout(ctx, 10*time.Second)
		v, err := ask(try)
		cancel()
		if err == nil || !Transient(err) {
			return v, err
		}
		select {
		case <-ctx.Done():
			return v, fmt.Errorf("%w (asked until %w)", err, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Transient reports whether a request failed without an answer: no
// responders (jetstream reports them as JetStream not enabled), a timeout,
// or JetStream saying it is temporarily unavailable.
func Transient(err error) bool {
	var apiErr *jetstream.APIError
	switch {
	case errors.Is(err, nats.ErrNoResponders), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, nats.ErrTimeout), errors.Is(err, context.DeadlineExceeded):
		return true
	case errors.As(err, &apiErr):
		return apiErr.Code == 503 // "JetStream system temporarily unavailable"
	}
	return false
}
