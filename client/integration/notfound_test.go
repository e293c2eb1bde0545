package integration_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
)

// notFound lists the EventNotFound events of ev.
func notFound(ev *events) []client.Event {
	var out []client.Event
	for _, e := range ev.list() {
		if e.Kind == client.EventNotFound {
			out = append(out, e)
		}
	}
	return out
}

// TestNotFoundMisspeltConfig: a watcher of a config that does not exist
// says so after its start read, and again about once per reconcile
// interval, never more often (it used to wait in silence).
func TestNotFoundMisspeltConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	e.ship(1, body(1)) // payments/checkout exists; payments/chekout does not
	const reconcile = 300 * time.Millisecond
	c, ev := e.newClient("nf-1", client.WithReconcile(reconcile))
	w, err := c.Watch(t.Context(), "payments/chekout")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	first := waitEvent(t, ev, "a not-found warning", func(e client.Event) bool { return e.Kind == client.EventNotFound })
	if !strings.Contains(first.Detail, "payments/chekout does not exist") || !errors.Is(first.Err, cuecast.ErrNotFound) {
		t.Fatalf("warning: got %q (err %v), want it to say payments/chekout does not exist", first.Detail, first.Err)
	}
	poll.Until(t, "three warnings", poll.Patience, func() (bool, string) { return len(notFound(ev)) >= 3, "events:" + ev.String() })
	got := notFound(ev)
	for i := 1; i < len(got); i++ {
		if gap := got[i].At.Sub(got[i-1].At); gap < reconcile/2 {
			t.Fatalf("warnings %d and %d only %s apart, want about the reconcile interval %s; events:%s", i-1, i, gap, reconcile, ev)
		}
	}
	if s := w.Current(); !s.IsZero() {
		t.Fatalf("Current: got %+v, want zero", s)
	}
}

// TestNotFoundUntilDeployed: a config published but not deployed to the
// instance is told apart from a missing one, and the warnings stop once a
// version is applied.
func TestNotFoundUntilDeployed(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	v := cuecast.Version{Config: cfg, Version: 1, Commit: "c001", Author: "ann"}
	if err := e.d.Publish(t.Context(), v, body(1)); err != nil {
		t.Fatal(err)
	}
	const reconcile = 200 * time.Millisecond
	c, ev := e.newClient("nf-2", client.WithReconcile(reconcile))
	w := watch(t, c)
	warn := waitEvent(t, ev, "a not-found warning", func(e client.Event) bool { return e.Kind == client.EventNotFound })
	if !strings.Contains(warn.Detail, "has versions (newest 1) but none is deployed to this instance") {
		t.Fatalf("warning: got %q, want it to say version 1 exists but is not deployed here", warn.Detail)
	}
	if err := e.d.Deploy(t.Context(), v); err != nil {
		t.Fatal(err)
	}
	waitVersion(t, w, ev, 1)
	n := len(notFound(ev))
	// Two reconciles after the apply: no further warning.
	poll.Until(t, "two reconciles after the apply", poll.Patience, func() (bool, string) {
		k := 0
		for _, e := range ev.list() {
			if e.Kind == client.EventResync && e.Detail == "reconcile" {
				k++
			}
		}
		return k >= 2, "events:" + ev.String()
	})
	if got := len(notFound(ev)); got != n {
		t.Fatalf("not-found warnings after the apply: got %d more; events:%s", got-n, ev)
	}
}
