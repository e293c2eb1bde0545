package cli

import (
	"errors"
	"fmt"
	"time"

	"github.com/cuecast/cuecast/mutator"
)

// Exit codes. Scripts and CI branch on them, so each has one meaning.
const (
	ExitOK      = 0 // success
	ExitFailure = 1 // cuecast itself failed (I/O, NATS, a bug)
	ExitUsage   = 2 // the command was called wrong: bad flag, missing repo or branch
	ExitInvalid = 3 // the configs are invalid (compile or lint errors)
	ExitHalted  = 4 // a rollout is halted, or a wait timed out with stragglers
	// ExitConflict: cuecast set's --expect did not hold; the value changed.
	ExitConflict = 5
	// ExitRefused: cuecast set will not edit a value where it comes from
	// (computed, a reference, a tag, a schema's default).
	ExitRefused = 6
)

// UsageError means the invocation was wrong; Hint says what to do instead.
type UsageError struct {
	Err  error
	Hint string
}

func (e *UsageError) Error() string {
	if e.Hint == "" {
		return e.Err.Error()
	}
	return fmt.Sprintf("%v\nhint: %s", e.Err, e.Hint)
}

func (e *UsageError) Unwrap() error { return e.Err }

func usageErrorf(hint, format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...), Hint: hint}
}

// positive refuses a duration flag of 0 or less, which a timer, a ticker
// or a timeout cannot run on (a ticker panics, a timeout fails at once);
// like is an example value.
func positive(flag string, d time.Duration, like string) error {
	if d > 0 {
		return nil
	}
	return usageErrorf("use a duration like --"+flag+" "+like, "--%s %s: want a positive duration", flag, d)
}

// checkHeartbeat refuses a --heartbeat under a second: serve's, and the
// summarizer's, which must be serve's.
func checkHeartbeat(d time.Duration) error {
	if d >= time.Second {
		return nil
	}
	return usageErrorf("use 1s or more, the same on serve, summarize and every instance, like --heartbeat 60s", "--heartbeat %s: too short", d)
}

// errInvalid marks a run whose configs are invalid. The diagnostics were
// already printed; the error only carries the exit code.
var errInvalid = errors.New("configs are invalid")

// errSilent is returned by commands that already explained the failure.
type silentError struct{ code int }

func (e *silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// ExitCode maps an error returned by a command to the process exit status.
// This is the one place where errors become exit codes.
func ExitCode(err error) int {
	var ue *UsageError
	var se *silentError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errInvalid), errors.Is(err, mutator.ErrInvalid):
		return ExitInvalid
	case errors.Is(err, mutator.ErrConflict):
		return ExitConflict
	case errors.Is(err, mutator.ErrRefused), errors.Is(err, mutator.ErrForbidden):
		return ExitRefused
	case errors.Is(err, mutator.ErrBadRequest):
		return ExitUsage
	case errors.As(err, &se):
		return se.code
	case errors.As(err, &ue):
		return ExitUsage
	default:
		return ExitFailure
	}
}
