package rollout_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
)

// bucketDistributor keeps the cohort pointers of one config in memory: what
// each bucket runs, for a property over many rollouts without a fleet.
type bucketDistributor struct {
	cfg     cuecast.ConfigPath
	mu      sync.Mutex
	n       uint64 // versions 1..n are published
	buckets [cuecast.Buckets]uint64
	// whole is the version every bucket pointed at the last time they all
	// pointed at one (a halt that moves everyone back lowers it: the
	// version it moved them off is not one to fall back to).
	whole uint64
}

func (d *bucketDistributor) Versions(_ context.Context, c cuecast.ConfigPath) ([]cuecast.Version, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []cuecast.Version
	for v := d.n; v >= 1; v-- {
		out = append(out, bucketVersion(c, v))
	}
	return out, nil
}

func bucketVersion(cfg cuecast.ConfigPath, v uint64) cuecast.Version {
	return cuecast.Version{Config: cfg, Version: v, Checksum: fmt.Sprintf("sum-%d", v), Commit: fmt.Sprintf("c%d", v)}
}

func (d *bucketDistributor) Version(_ context.Context, c cuecast.ConfigPath, n uint64) (cuecast.Version, []byte, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n == 0 || n > d.n {
		return cuecast.Version{}, nil, cuecast.ErrNotFound
	}
	return bucketVersion(c, n), fmt.Appendf(nil, `{"v":%d}`, n), nil
}

func (d *bucketDistributor) SetPointers(_ context.Context, _ cuecast.ConfigPath, buckets []int, p cuecast.Pointer) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, b := range buckets {
		d.buckets[b] = p.Version
	}
	if first := d.buckets[0]; !slices.ContainsFunc(d.buckets[:], func(v uint64) bool { return v != first }) {
		d.whole = first
	}
	return nil
}

func (d *bucketDistributor) SetInstancePointers(context.Context, cuecast.ConfigPath, []string, cuecast.Pointer) error {
	return nil
}

func (d *bucketDistributor) Reports(context.Context, cuecast.ConfigPath) ([]cuecast.Report, error) {
	return nil, nil
}

func (d *bucketDistributor) Pointer(_ context.Context, _ cuecast.ConfigPath, b int) (cuecast.Pointer, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.buckets[b] == 0 {
		return cuecast.Pointer{}, cuecast.ErrNotFound
	}
	return cuecast.Pointer{Config: d.cfg, Version: d.buckets[b]}, nil
}

// TestHaltNeverFallsBelowWholeFleet: issue 15, item 12, as a property over
// random bursts of commits (each superseding the rollout before it),
// stages passing, and halts: a halt moves its cohort back to a version no
// older than the newest one the whole fleet ran before the halted rollout
// began. The fallback was the last completed version, which a burst of
// superseded rollouts leaves far behind: a halt of v52 pointed a fleet
// running v51 at v1.
func TestHaltNeverFallsBelowWholeFleet(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 15))
	for trial := range 20 {
		cfg := cuecast.ConfigPath(fmt.Sprintf("payments/prop%d", trial))
		d := &bucketDistributor{cfg: cfg}
		began := map[uint64]uint64{} // version: the whole fleet's version when its rollout began
		now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
		// Every stage holds, the last one too: a rollout superseded while
		// its last stage holds had moved everyone, and never completes.
		hold := cuecast.Duration(time.Minute)
		pol := &policies{p: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "canary", Percent: 1, Hold: hold}, {Name: "early", Percent: 10, Hold: hold}, {Name: "all", Percent: 100, Hold: hold},
		}}, cons: cuecast.Relaxed}
		if trial%2 == 1 {
			pol.p = cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100, Hold: hold}}}
		}
		c, err := rollout.New(t.Context(), nc, d, pol, rollout.Options{Now: func() time.Time { return now }, ApplyTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		halts := 0
		for range 60 {
			switch op := rnd.IntN(10); {
			case op < 5: // a commit: deploy the next version
				d.mu.Lock()
				d.n++
				v, before := bucketVersion(cfg, d.n), d.whole
				d.mu.Unlock()
				if err := c.Deploy(t.Context(), v); err != nil {
					t.Fatalf("trial %d: Deploy v%d: %v", trial, v.Version, err)
				}
				began[v.Version] = before
			case op < 8: // time passes, holds end, stages advance
				now = now.Add(time.Duration(rnd.IntN(90)) * time.Second)
				if err := rollout.StepNow(t.Context(), c, cfg); err != nil {
					t.Fatalf("trial %d: step: %v", trial, err)
				}
			default: // an operator halts the rollout under way
				rec, err := c.Record(t.Context(), cfg)
				if err != nil || rec.Current == nil || !rec.Current.State.Active() {
					continue
				}
				if _, err := c.Halt(t.Context(), cfg, rollout.Action{Actor: "prop", Reason: "property"}); err != nil {
					t.Fatalf("trial %d: Halt: %v", trial, err)
				}
				halts++
				r := rec.Current
				floor := began[r.Version]
				d.mu.Lock()
				low := slices.Min(d.buckets[:])
				d.mu.Unlock()
				if low < floor {
					t.Fatalf("trial %d: halt of v%d left a bucket on v%d; the whole fleet ran v%d before it began (from v%d)",
						trial, r.Version, low, floor, r.From)
				}
			}
		}
		t.Logf("trial %d: %d versions, %d halts", trial, d.n, halts)
	}
}
