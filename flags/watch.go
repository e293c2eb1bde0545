package flags

import (
	"context"
	"fmt"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

// Watch follows cfg, a flag set config, with client.Typed: each version is
// compiled once (Compile, through UnmarshalJSON) as the client applies it,
// and the Evaluator is swapped atomically with the version, like any
// config's value. A version that does not compile (an invalid set, an
// unsupported schema) is rejected like one failing a validation hook: the
// instance keeps its current evaluator and reports the version as failed
// (EventRejected, with an error wrapping ErrInvalid or
// ErrUnsupportedSchema), which halts a staged rollout's health gate.
//
//	w, err := flags.Watch(ctx, c, "payments/flags", client.LastKnownGood(path))
//	defer w.Stop()
//	err = w.WaitReady(ctx)
//	e, snap := w.Value() // nil Evaluator before a version or after a delete
//	on, res := e.Bool("checkout-v2", flags.Context{"targetingKey": user}, false)
//
// It is client.Typed[*Evaluator] and returns its errors. The methods of a
// nil *Evaluator are safe: every evaluation is an ERROR (ErrorNotReady).
func Watch(ctx context.Context, c *client.Client, cfg cuecast.ConfigPath, opts ...client.WatchOption) (*client.TypedWatcher[*Evaluator], error) {
	return client.Typed[*Evaluator](ctx, c, cfg, opts...)
}

// UnmarshalJSON compiles a flag set into e (Compile), so that client.Typed
// and encoding/json decode a flag set config straight into an Evaluator.
// It is for decoding into a new Evaluator: an Evaluator in use must not be
// decoded into.
func (e *Evaluator) UnmarshalJSON(b []byte) error {
	c, err := Compile(b)
	if err != nil {
		return fmt.Errorf("compile flag set: %w", err)
	}
	*e = *c
	return nil
}
