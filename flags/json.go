package flags

import "fmt"

// UnmarshalJSON compiles a flag set into e (Compile), so that client.Typed
// and encoding/json decode a flag set config straight into an Evaluator: a
// service follows a flag set config with
//
//	w, err := client.Typed[*flags.Evaluator](ctx, c, "payments/flags", client.LastKnownGood(path))
//
// and each version is compiled once, as the client applies it, and swapped
// atomically with it. A version that does not compile (an invalid set, an
// unsupported schema) is rejected like one failing a validation hook: the
// instance keeps its current evaluator and reports the version as failed
// (EventRejected, with an error wrapping ErrInvalid or ErrUnsupportedSchema),
// which halts a staged rollout's health gate. The methods of a nil
// *Evaluator (no version yet, or the config deleted) are safe: every
// evaluation is an ERROR (ErrorNotReady).
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
