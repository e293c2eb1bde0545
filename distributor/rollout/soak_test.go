package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/soak"
)

// TestSoakNoLostDeploy: issue 15, item 2, randomized. Several configs get
// commits at random moments (bursts and pauses around rollouts' holds and
// completions); the deployer hands each config's newest version to whichever
// controller runs now, retrying a hand-off that failed as the tailer does
// (its undeployed set); controllers are replaced at random moments, the old
// one still finishing its step while the new one starts (a lease changing
// hands), and their reads of their own writes lag as a replica's may. After
// the commits stop and the last controller is left alone, every config's
// rollout must complete on its newest version, with every bucket pointing
// at it. A few seconds normally; CUECAST_SOAK=1 runs it for a minute.
func TestSoakNoLostDeploy(t *testing.T) {
	t.Parallel()
	dur := soak.Length(3*time.Second, time.Minute)
	intn := soak.Intn(t)

	srv := natstest.Start(t)
	nc := srv.Connect(t)
	ctx := t.Context()
	d, err := distributor.New(ctx, nc, distributor.Options{Heartbeat: heartbeat})
	if err != nil {
		t.Fatal(err)
	}
	hold := cuecast.Duration(time.Duration(20+intn(80)) * time.Millisecond)
	pol := &policies{p: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, Hold: hold}, {Name: "all", Percent: 100, Hold: hold},
	}}, cons: cuecast.Relaxed}

	// The running controller, replaced at random; the deployer uses the
	// current one.
	type running struct {
		c    *rollout.Controller
		stop func()
	}
	var mu sync.Mutex
	var cur *running
	start := func() *running {
		c, err := rollout.New(ctx, nc, d, pol, rollout.Options{
			Interval: time.Duration(5+intn(40)) * time.Millisecond, Heartbeat: heartbeat, ApplyTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatalf("rollout.New: %v", err)
		}
		rollout.LagOwnWrites(c)
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx) }()
		return &running{c: c, stop: func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller Run: %v", err)
			}
		}}
	}
	cur = start()

	cfgs := []cuecast.ConfigPath{"payments/a", "payments/b", "search/c"}
	newest := map[cuecast.ConfigPath]uint64{}
	var wg sync.WaitGroup
	deadline := time.Now().Add(dur)
	for _, c := range cfgs {
		wg.Go(func() {
			var n uint64
			undeployed := false
			for time.Now().Before(deadline) || undeployed {
				if time.Now().Before(deadline) {
					// A commit, after a pause: none, a few ms, or about a
					// hold (a rollout completing meanwhile).
					soak.Pause(intn, 10*time.Millisecond, time.Duration(hold))
					n++
					v := cuecast.Version{Config: c, Version: n, Commit: fmt.Sprintf("c%039d", n)}
					if err := d.Publish(ctx, v, fmt.Appendf(nil, `{"n":%d}`, n)); err != nil {
						t.Errorf("Publish %s v%d: %v", c, n, err)
						return
					}
					undeployed = true
				} else {
					time.Sleep(10 * time.Millisecond)
				}
				latest, err := d.Latest(ctx, c)
				if err != nil {
					t.Errorf("Latest %s: %v", c, err)
					return
				}
				mu.Lock()
				ctl := cur.c
				mu.Unlock()
				if err := ctl.Deploy(ctx, latest); err != nil {
					if ctx.Err() != nil {
						return
					}
					t.Logf("Deploy %s v%d failed, retrying: %v", c, latest.Version, err)
					continue // still undeployed, as the tailer keeps it
				}
				undeployed = false
			}
			mu.Lock()
			newest[c] = n
			mu.Unlock()
		})
	}
	wg.Go(func() {
		for time.Now().Before(deadline) {
			time.Sleep(time.Duration(100+intn(400)) * time.Millisecond)
			next := start()
			mu.Lock()
			old := cur
			cur = next
			mu.Unlock()
			// The old holder stops a moment later, as a lease's last
			// writes may land after it changed hands.
			time.Sleep(time.Duration(intn(20)) * time.Millisecond)
			old.stop()
		}
	})
	wg.Wait()
	if t.Failed() {
		return
	}
	mu.Lock()
	last := cur
	mu.Unlock()
	defer last.stop()
	for _, c := range cfgs {
		want := newest[c]
		poll.Until(t, fmt.Sprintf("%s complete on v%d everywhere", c, want), poll.Patience, func() (bool, string) {
			rec, err := last.c.Record(ctx, c)
			if err != nil {
				return false, err.Error()
			}
			r := rec.Current
			if r == nil || r.Version != want || r.State != rollout.StateComplete {
				return false, fmt.Sprintf("rollout %+v", rolloutState(r))
			}
			for _, b := range []int{0, 1, 37, 99} {
				p, err := d.Pointer(ctx, c, b)
				if err != nil && !errors.Is(err, cuecast.ErrNotFound) {
					return false, err.Error()
				}
				if p.Version != want {
					return false, fmt.Sprintf("bucket %d on v%d", b, p.Version)
				}
			}
			return true, ""
		})
	}
}

func rolloutState(r *rollout.Rollout) string {
	if r == nil {
		return "none"
	}
	return fmt.Sprintf("v%d %s stage %d note %q reason %q", r.Version, r.State, r.Stage, r.Note, r.Reason)
}
