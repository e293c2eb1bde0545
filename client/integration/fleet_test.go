package integration_test

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestFleetConverges runs 1,000 instances (200 with -short) in this process
// on shared connections and checks that every one applies each version and
// that status counts them all.
func TestFleetConverges(t *testing.T) {
	t.Parallel()
	n, conns := 1000, 20
	if testing.Short() {
		n, conns = 200, 10
	}
	e := newEnv(t, envOpts{})
	e.ship(1, body(1))
	ncs := make([]*nats.Conn, conns)
	for i := range ncs {
		ncs[i] = e.srv.Connect(t, client.ConnectOptions()...)
	}
	// One process: the instances share a Keyring, as a sidecar would.
	keys, err := client.NewKeyring(e.pub)
	if err != nil {
		t.Fatal(err)
	}
	ws := make([]*client.Watcher, n)
	evs := make([]*events, n)
	var wg sync.WaitGroup
	// At most 50 instances start at once. Watch returns after its start
	// read (three direct gets); 1,000 at once in one race-instrumented
	// process on a busy box queued 3,000 gets behind each other past the
	// 5 s request timeout, and every retry joined the same queue, so no
	// read succeeded for a minute: a herd this test does not mean to
	// measure, since a fleet is not started in one instant.
	starting := make(chan struct{}, 50)
	for i := range n {
		wg.Go(func() {
			starting <- struct{}{}
			defer func() { <-starting }()
			c, ev := newClientOn(t, ncs[i%conns], fmt.Sprintf("fleet-%04d", i), client.WithKeyring(keys))
			w, err := c.Watch(t.Context(), cfg)
			if err != nil {
				t.Errorf("Watch %d: %v", i, err)
				return
			}
			ws[i], evs[i] = w, ev
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	onVersion := func(v uint64) func() (bool, string) {
		return func() (bool, string) {
			var ids []string
			for i, w := range ws {
				if w.Current().Version != v {
					ids = append(ids, fmt.Sprintf("%d@%d", i, w.Current().Version))
					if len(ids) < 3 {
						ids = append(ids, evs[i].String())
					}
				}
			}
			return len(ids) == 0, fmt.Sprintf("%d behind: %v", len(ids), ids[:min(len(ids), 10)])
		}
	}
	poll.Until(t, "every instance on version 1", poll.Patience, onVersion(1))
	e.ship(2, body(2))
	poll.Until(t, "every instance on version 2", poll.Patience, onVersion(2))
	// The snapshot is swapped in a moment before the applied event is
	// emitted: wait for the events before judging them.
	poll.Until(t, "every instance's applied event for version 2", poll.Patience, func() (bool, string) {
		for i, ev := range evs {
			if a := ev.applied(); len(a) == 0 || a[len(a)-1] != 2 {
				return false, fmt.Sprintf("instance %d applied %v", i, a)
			}
		}
		return true, ""
	})
	for i, ev := range evs {
		if got := ev.applied(); !slices.Equal(got, []uint64{1, 2}) {
			t.Fatalf("instance %d applied %v, want [1 2]", i, got)
		}
	}
	poll.Until(t, "status counting every instance", poll.Patience, func() (bool, string) {
		sts, err := e.d.Status(t.Context(), cfg)
		return err == nil && sts[0].Instances == n && sts[0].OnLatest == n, fmt.Sprintf("status %+v %v", sts, err)
	})
	for _, w := range ws {
		w.Stop()
	}
}

// TestFootprint: client imports only the root package, nats.go (with what
// nats.go itself needs) and the standard library, and so do its tests.
func TestFootprint(t *testing.T) {
	t.Parallel()
	list := func(args ...string) []string {
		out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
		if err != nil {
			t.Fatalf("go list %v: %v", args, err)
		}
		return strings.Fields(string(out))
	}
	allowed := map[string]bool{"github.com/cuecast/cuecast": true, "github.com/cuecast/cuecast/client": true}
	for _, p := range list("-deps", "github.com/nats-io/nats.go") {
		allowed[p] = true
	}
	for _, p := range list("std") {
		allowed[p] = true
	}
	deps := list("-deps", "github.com/cuecast/cuecast/client")
	for _, p := range deps {
		if !allowed[p] && !strings.HasPrefix(p, "vendor/") {
			t.Errorf("client depends on %s, which is neither the root package, nats.go's nor the standard library's", p)
		}
	}
	if !slices.Contains(deps, "github.com/nats-io/nats.go") {
		t.Fatalf("go list -deps client: got %d packages without nats.go; is the listing broken?", len(deps))
	}
	// A service's `go mod tidy` also records what the client's own tests
	// import: they must need no server, CUE or Git either, or every service
	// gets nats-server in its go.sum (issue 17, item 4). Tests that need a
	// server live here, in client/integration.
	for _, p := range list("-test", "-deps", "github.com/cuecast/cuecast/client") {
		for _, heavy := range []string{"github.com/nats-io/nats-server", "cuelang.org/", "github.com/go-git/", "github.com/cuecast/cuecast/internal/"} {
			if strings.HasPrefix(p, heavy) {
				t.Errorf("client's tests depend on %s: a service importing client would get it in its go.sum", p)
			}
		}
	}
}
