package integration_test

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/poll"
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
//
// Only the applies may run between the two counts of stack in use. The
// report after an apply (built on the watcher's goroutine, deeper) comes
// 0.5–1.5 s later with these settings (watcher_timers.go, reportSoon), so
// a round counts only when every watcher applied within reportQuiet of the
// first; a slower round (a loaded machine) is measured again once its
// reports are in.
func TestApplyFitsAnIdleStack(t *testing.T) {
	// Not t.Parallel, unlike the rest of the package: it counts the whole
	// process's stacks in use, and Go runs it before any parallel test
	// starts, so nothing else runs beside it.
	const (
		n           = 500
		reportQuiet = 400 * time.Millisecond
		attempts    = 5
	)
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
			var mu sync.Mutex
			applied := map[uint64]int{}
			first := map[uint64]time.Time{}
			countApplied := func(v uint64) (int, time.Time) {
				mu.Lock()
				defer mu.Unlock()
				return applied[v], first[v]
			}
			// Watchers sharing one connection: theirs are the only
			// goroutines per watcher, so the stacks in use grow by about
			// n times one watcher's growth.
			nc := e.srv.Connect(t, client.ConnectOptions()...)
			ws := make([]*client.Watcher, n)
			for i := range n {
				c, err := client.New(nc, client.WithInstance(fmt.Sprintf("stack-%03d", i)), trust,
					// No heartbeat or reconcile during the test: neither is an apply.
					client.WithHeartbeat(time.Hour), client.WithReconcile(time.Hour),
					client.WithEvents(func(ev client.Event) {
						if ev.Kind != client.EventApplied {
							return
						}
						mu.Lock()
						if applied[ev.Version] == 0 {
							first[ev.Version] = time.Now()
						}
						applied[ev.Version]++
						mu.Unlock()
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
			reported := func(v uint64) {
				t.Helper()
				poll.Until(t, fmt.Sprintf("every instance reporting version %d", v), poll.Patience, func() (bool, string) {
					reps, err := e.d.Reports(t.Context(), cfg)
					if err != nil {
						return false, err.Error()
					}
					k := 0
					for _, r := range reps {
						if r.Version == v {
							k++
						}
					}
					return k == n, fmt.Sprintf("%d of %d", k, n)
				})
			}
			reported(1)
			// No collection between the two counts: it would shrink
			// stacks again.
			defer debug.SetGCPercent(debug.SetGCPercent(-1))
			for attempt := range attempts {
				v := uint64(attempt + 2)
				runtime.GC()
				runtime.GC()
				before := stackInUse()
				e.ship(v, simfleet.Content(v))
				poll.Until(t, fmt.Sprintf("every watcher applying version %d", v), poll.Patience, func() (bool, string) {
					k, _ := countApplied(v)
					return k == n, fmt.Sprintf("%d of %d", k, n)
				})
				grown := int64(stackInUse()) - int64(before)
				_, at := countApplied(v)
				if took := time.Since(at); took >= reportQuiet {
					t.Logf("version %d: %s from the first apply to the count, so reports may have run: measuring again", v, took)
					reported(v)
					continue
				}
				if per := grown / n; per >= 1024 {
					t.Errorf("goroutine stacks grew by %d bytes per watcher applying a pointer, want none (less than 1 KiB each)", per)
				} else {
					t.Logf("goroutine stacks in use: %d bytes before the apply, %+d after", before, grown)
				}
				return
			}
			t.Fatalf("in %d rounds the %d watchers never all applied within %s of the first, before any report could run", attempts, n, reportQuiet)
		})
	}
}

func stackInUse() uint64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.StackInuse
}
