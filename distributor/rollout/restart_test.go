package rollout_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestRestartJudgesNoStageBeforeHearingItsCohort: issue 32, item 3. A
// controller restarted after a hold's deadline passed (serve killed while
// the rollout held) passed the stage at its first look, before it had heard
// any instance: "passed: 0/4 on v2, 0 unhealthy". An instance not heard yet
// is waited for like any not on the version (docs/ROLLOUT.md, "Liveness"):
// here one of them turned unhealthy while no controller ran, and the stage
// must halt on it, not pass.
//
// The first controller's clock runs two hours behind, so that its hour's
// hold is long over for the second, which runs on the real clock: no race
// with the hold's end while the first one stops.
func TestRestartJudgesNoStageBeforeHearingItsCohort(t *testing.T) {
	t.Parallel()
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "half", Percent: 50, Hold: cuecast.Duration(time.Hour)},
		{Name: "all", Percent: 100},
	}}
	behind := func() time.Time { return time.Now().Add(-2 * time.Hour) }
	e := newEnvSet(t, pol, cuecast.Relaxed, func(e *env) {
		e.opts = func(o *rollout.Options) { o.Now, o.ApplyTimeout = behind, 3*time.Hour }
	})
	e.baseline()
	var half, rest []*instance
	for _, id := range idIn("half", 0, 50, 4) {
		half = append(half, e.instance(id))
	}
	for _, id := range idIn("rest", 50, 100, 2) {
		rest = append(rest, e.instance(id))
	}
	waitOn(t, 1, slices.Concat(half, rest)...)
	e.waitLive(len(half) + len(rest))
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, half...)

	e.stop()
	sick := half[0]
	sick.sick.Store(2)
	poll.Until(t, sick.id+"'s unhealthy report stored", poll.Patience, func() (bool, string) {
		rs, err := e.d.Reports(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.Instance == sick.id {
				return !r.Healthy, fmt.Sprintf("healthy=%t on v%d", r.Healthy, r.Version)
			}
		}
		return false, "no report"
	})
	e.opts = func(o *rollout.Options) { o.ApplyTimeout = 3 * time.Hour }
	e.open()

	var rec rollout.Record
	poll.Until(t, "the stage judged", poll.Patience, func() (bool, string) {
		rec = e.record()
		r := rec.Current
		return r.State == rollout.StateHalted || r.Stage > 0, fmt.Sprintf("%s stage %d: %s", r.State, r.Stage, r.Note)
	})
	r := rec.Current
	for _, s := range r.Log {
		if s.Stage == "half" && strings.HasPrefix(s.Detail, "passed") {
			t.Errorf("stage half %s, before hearing its instances", s.Detail)
		}
	}
	if r.State != rollout.StateHalted || r.Stage != 0 || !strings.Contains(r.Reason, sick.id+" unhealthy") {
		t.Fatalf("after the restart: %s at stage %d (%s), want halted in stage half naming %s unhealthy", r.State, r.Stage, r.Reason, sick.id)
	}
	if p := e.pointer(99); p.Version != 1 {
		t.Errorf("bucket 99 on v%d, want v1: the second stage never moved", p.Version)
	}
	waitOn(t, 1, slices.Concat(half, rest)...)
}
