package rollout_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
)

// forge publishes, every 50 ms until the test ends, the report of a
// compromised instance "evil" on its own subject (all its credential may
// report on) with a body that speaks for another instance.
func (e *env) forge(body cuecast.Report) {
	e.t.Helper()
	nc := e.instConn()
	subj := cuecast.ReportSubject(cfg, "evil")
	poll.Every(e.t, 50*time.Millisecond, func() {
		body.At = time.Now().UTC()
		if b, err := json.Marshal(body); err == nil {
			_ = nc.Publish(subj, b)
		}
	})
}

// TestForgedReportsCannotHaltARollout: docs/SECURITY.md, one compromised
// instance cannot halt a rollout by speaking for others. "evil" reports,
// on its own subject, the canary failing to apply v2 and unhealthy; the
// controller takes the instance from the subject, drops the report, and
// the healthy rollout completes: everyone else gets v2.
func TestForgedReportsCannotHaltARollout(t *testing.T) {
	t.Parallel()
	bothModes(t, func(t *testing.T) {
		e := newEnv(t, threeStages(300*time.Millisecond), cuecast.Relaxed)
		e.baseline()
		canary, early, late := e.fleet()
		e.forge(cuecast.Report{Instance: canary[0].id, Config: cfg, Version: 1, Healthy: false,
			LastError: "version 2: validation hook: forged"})
		e.deploy(e.publish(2, content(2)))
		rec := e.waitState(2, rollout.StateComplete, 2)
		waitOn(t, 2, slices.Concat(canary, early, late)...)
		if rec.Current.Reason != "" && rec.Current.State != rollout.StateComplete {
			t.Errorf("rollout %s: %s", rec.Current.State, rec.Current.Reason)
		}
	})
}

// TestForgedReportsCannotHideABadCanary: the reverse, one compromised
// instance speaking for a sick canary, healthy on v2: the canary's own
// report still halts the rollout, and nobody outside the canary moves.
func TestForgedReportsCannotHideABadCanary(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(10*time.Second), cuecast.Relaxed)
	e.baseline()
	canary, early, late := e.fleet()
	canary[0].sick.Store(2)
	e.forge(cuecast.Report{Instance: canary[0].id, Config: cfg, Version: 2, Healthy: true})
	e.deploy(e.publish(2, content(2)))
	e.waitHalted(0, "unhealthy", canary[0].id)
	for _, in := range slices.Concat(early, late) {
		if in.version() != 1 {
			t.Errorf("%s on v%d, want v1 (never moved)", in.id, in.version())
		}
	}
}
