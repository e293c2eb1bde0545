package rollout_test

import (
	"encoding/json"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
)

// Report kinds a lagging instance sends (lagReport).
const (
	lagHealthy   = iota // healthy on v2, stored
	lagUnstored         // unhealthy on v2, heard by core subscribers only
	lagUnhealthy        // unhealthy on v2, stored
)

// lagReport starts a canary instance that reports on v2 every 50 ms until
// the test ends, as kind says. Its lagUnstored reports carry an expected
// last subject sequence the report stream refuses: the controller hears
// them and the stream never stores them, as a hub whose stream is slow to
// store hears a report a moment before it stores it.
func (e *env) lagReport(kind *atomic.Int32) string {
	e.t.Helper()
	id := idIn("lagging", 0, 1, 1)[0]
	nc := e.instConn()
	subj := cuecast.ReportSubject(cfg, id)
	poll.Every(e.t, 50*time.Millisecond, func() {
		k := kind.Load()
		r := cuecast.Report{Instance: id, Config: cfg, Version: 2, Healthy: k == lagHealthy, At: time.Now().UTC()}
		m := nats.NewMsg(subj)
		m.Data, _ = json.Marshal(r)
		if k == lagUnstored {
			m.Header.Set(nats.ExpectedLastSubjSeqHdr, "999999999")
		}
		_ = nc.PublishMsg(m)
	})
	return id
}

// unhealthyIn says whether reports hold id unhealthy.
func unhealthyIn(reports []cuecast.Report, id string) bool {
	for _, r := range reports {
		if r.Instance == id && !r.Healthy {
			return true
		}
	}
	return false
}

// TestAHaltWaitsForTheReportStream: the controller halts a rollout for an
// unhealthy instance only once the report stream, which `cuecast status`
// and the dashboard read, holds that instance unhealthy, so that whoever
// reads the halt reads its cause beside it. A canary instance turns
// unhealthy in reports the controller hears and the stream refuses: the
// rollout keeps holding, tick after tick; once its reports are stored, it
// halts, and the stream shows why. A stream that never stores them does
// not stop the halt: it comes a second later.
func TestAHaltWaitsForTheReportStream(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		wait  time.Duration
		store bool // the instance's unhealthy reports are stored at last
	}{
		{name: "stored", wait: poll.Patience, store: true},
		{name: "never stored", wait: 300 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnvSet(t, threeStages(time.Hour), cuecast.Relaxed, func(e *env) {
				e.before = func(c *rollout.Controller) { rollout.SetStoreWait(c, tc.wait) }
			})
			e.baseline()
			canary, _, _ := e.fleet()
			var kind atomic.Int32
			id := e.lagReport(&kind)
			e.deploy(e.publish(2, content(2)))
			waitOn(t, 2, canary...)
			e.waitState(2, rollout.StateHolding, 0)

			kind.Store(lagUnstored)
			poll.Until(t, "the controller hearing "+id+" unhealthy", poll.Patience, func() (bool, string) {
				rs, err := rollout.ViewReports(t.Context(), e.c, cfg)
				if err != nil {
					return false, err.Error()
				}
				return unhealthyIn(rs, id), fmt.Sprintf("%d reports", len(rs))
			})
			if tc.store {
				e.ticks(5)
				if cur := e.record().Current; cur.State != rollout.StateHolding {
					t.Fatalf("before the stream holds %s unhealthy: rollout %s (%s), want holding", id, cur.State, cur.Reason)
				}
				kind.Store(lagUnhealthy)
			}
			e.waitHalted(0, "unhealthy", id)
			rs, err := e.d.Reports(t.Context(), cfg)
			if err != nil {
				t.Fatal(err)
			}
			if stored := unhealthyIn(rs, id); stored != tc.store {
				t.Errorf("once halted, the report stream holds %s unhealthy: %t, want %t", id, stored, tc.store)
			}
		})
	}
}

// TestAStagingHaltWaitsForTheReportStream: as TestAHaltWaitsForTheReportStream,
// for a strict cutover: an instance's report that it failed to stage the
// version halts the cutover only once the report stream holds it.
func TestAStagingHaltWaitsForTheReportStream(t *testing.T) {
	t.Parallel()
	e := newEnvSet(t, threeStages(0), cuecast.Strict, func(e *env) {
		e.before = func(c *rollout.Controller) { rollout.SetStoreWait(c, poll.Patience) }
	})
	e.baseline()
	web := e.instance("web-a")
	slow := e.slowInstance("web-b")
	waitOn(t, 1, web)
	e.waitLive(2)
	slow.unstored.Store(true)
	slow.lastErr.Store("version 2: validation hook: limit 2 breaks the service")
	e.deploy(e.publish(2, content(2)))
	poll.Until(t, "the controller hearing web-b fail to stage v2", poll.Patience, func() (bool, string) {
		rs, err := rollout.ViewReports(t.Context(), e.c, cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.Instance == "web-b" && r.LastError != "" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d reports, none of web-b failing", len(rs))
	})
	e.ticks(5)
	if cur := e.record().Current; cur.State != rollout.StateStaging {
		t.Fatalf("before the stream holds web-b's failure: rollout %s (%s), want staging", cur.State, cur.Reason)
	}
	slow.unstored.Store(false)
	e.waitHalted(-1, "web-b", "failed to stage")
	rs, err := e.d.Reports(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(rs, func(r cuecast.Report) bool { return r.Instance == "web-b" && r.LastError != "" }) {
		t.Errorf("once halted, the report stream does not hold web-b's failure: %+v", rs)
	}
}
