package integration_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/simfleet"
)

// TestApplyFitsAnIdleStack: a collection shrinks each idle watcher's
// goroutine stack to the least that holds it waiting (4 KiB), and any
// process collects at least every two minutes, so most applies start on a
// shrunk stack. Applying a pointer with its content inline must fit in it:
// a stack that grows is copied, frame by frame, on every such apply (30–80
// ms of CPU in a 10,000-instance round; BENCHMARKS.md, "Distribution").
// Unsigned, and with a shared Keyring that has verified the pointer once;
// an instance verifying the signature itself runs ed25519, whose frames do
// not fit.
func TestApplyFitsAnIdleStack(t *testing.T) {
	for _, mode := range []string{"unsigned", "signed-shared"} {
		t.Run(mode, func(t *testing.T) {
			e := newEnv(t, envOpts{})
			e.ship(1, simfleet.Content(1))
			trust := client.WithInsecureSkipVerify()
			if mode == "signed-shared" {
				k, err := client.NewKeyring(e.pub)
				if err != nil {
					t.Fatal(err)
				}
				trust = client.WithKeyring(k)
			}
			// Watchers sharing one connection: theirs are the only
			// goroutines per watcher, so the stacks in use grow by about
			// n times one watcher's growth.
			const n = 500
			nc := e.srv.Connect(t, client.ConnectOptions()...)
			var applied atomic.Int64
			all := make(chan struct{})
			ws := make([]*client.Watcher, n)
			for i := range n {
				c, err := client.New(nc, client.WithInstance(fmt.Sprintf("stack-%03d", i)), trust,
					// No heartbeat during the test: a report is not an apply.
					client.WithHeartbeat(time.Hour),
					client.WithEvents(func(ev client.Event) {
						if ev.Kind == client.EventApplied && ev.Version == 2 && applied.Add(1) == n {
							close(all)
						}
					}))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(c.Close)
				ws[i] = watch(t, c)
			}
			for i, w := range ws {
				if err := w.WaitReady(t.Context()); err != nil {
					t.Fatalf("watcher %d: %v", i, err)
				}
			}
			// No collection between the two counts: it would shrink
			// stacks again.
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			runtime.GC()
			runtime.GC()
			before := stackInUse()
			e.ship(2, simfleet.Content(2))
			select {
			case <-all:
			case <-time.After(time.Minute):
				t.Fatalf("%d of %d watchers applied version 2 in a minute", applied.Load(), n)
			}
			// Before the reports, which start half a second after the
			// apply (watcher_timers.go, reportSoon) and are not measured.
			grown := int64(stackInUse()) - int64(before)
			if per := grown / n; per >= 1024 {
				t.Errorf("goroutine stacks grew by %d bytes per watcher applying a pointer, want none (less than 1 KiB each)", per)
			} else {
				t.Logf("goroutine stacks in use: %d bytes before the apply, %+d after", before, grown)
			}
		})
	}
}

func stackInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}
