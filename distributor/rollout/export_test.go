package rollout

import (
	"context"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// LagOwnWrites makes c's reads of its bucket behave like those of a replica
// that has not applied the last write yet, the first time each revision
// this controller wrote is read: the read returns the revision before it
// (or no record). A later read of the same revision sees it.
func LagOwnWrites(c *Controller) {
	var mu sync.Mutex
	lagged := map[uint64]bool{}
	c.readHook = func(ctx context.Context, k string, val []byte, rev uint64) ([]byte, uint64, error) {
		if !c.ownWrite(k, rev) {
			return val, rev, nil
		}
		mu.Lock()
		done := lagged[rev]
		lagged[rev] = true
		mu.Unlock()
		if done {
			return val, rev, nil
		}
		hist, err := c.kv.History(ctx, k)
		if err != nil {
			return nil, 0, err
		}
		for i := len(hist) - 1; i >= 0; i-- {
			if hist[i].Revision() < rev {
				return hist[i].Value(), hist[i].Revision(), nil
			}
		}
		return nil, 0, jetstream.ErrKeyNotFound
	}
}

// WatchFailures is how many times Run could not watch its bucket and tried
// again.
func WatchFailures(c *Controller) uint64 { return c.watchFailures.Load() }

// Ticks is how many ticks Run has finished.
func Ticks(c *Controller) uint64 { return c.ticks.Load() }

// StepNow runs cfg's record through its transitions as the running controller
// does on a tick, for tests that drive the controller without Run.
func StepNow(ctx context.Context, c *Controller, cfg cuecast.ConfigPath) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settle(ctx, cfg)
}

// SetStoreWait sets how long c's judgements wait for the report stream to
// hold what they rest on (storeWait).
func SetStoreWait(c *Controller, d time.Duration) { c.storeWait = d }

// ViewReports is cfg's live reports as the running controller sees them.
func ViewReports(ctx context.Context, c *Controller, cfg cuecast.ConfigPath) ([]cuecast.Report, error) {
	return c.reports(ctx, cfg)
}
