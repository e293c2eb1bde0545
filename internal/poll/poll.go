// Package poll is how tests wait: check a condition every few milliseconds
// until it holds or a deadline passes, instead of sleeping a guessed time.
package poll

import (
	"testing"
	"time"
)

// Patience is the timeout for a condition that should hold soon: generous,
// since the machine may be shared; a guard against a hang, not a timing
// assertion.
const Patience = 60 * time.Second

// Until calls cond every 10ms until it reports true, and fails t after
// timeout with what and cond's last description of the state it saw.
func Until(t testing.TB, what string, timeout time.Duration, cond func() (ok bool, state string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var last string
	for {
		var ok bool
		if ok, last = cond(); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still %s after %s", what, last, timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Receive waits up to timeout for a value on ch and returns it; after
// timeout it fails t saying what did not arrive (the outcome of a call
// the test runs in the background, say).
func Receive[T any](t testing.TB, what string, timeout time.Duration, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(timeout):
		t.Fatalf("%s: nothing after %s", what, timeout)
		var zero T
		return zero
	}
}

// Every calls f now and then every d, in a goroutine of its own, until t
// ends; t's cleanup waits for a call under way. It is a beat a test keeps
// up in the background, such as reports an instance made by hand sends.
func Every(t testing.TB, d time.Duration, f func()) {
	stop, done := make(chan struct{}), make(chan struct{})
	t.Cleanup(func() { close(stop); <-done })
	go func() {
		defer close(done)
		tk := time.NewTicker(d)
		defer tk.Stop()
		for {
			f()
			select {
			case <-stop:
				return
			case <-tk.C:
			}
		}
	}()
}
