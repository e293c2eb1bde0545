package rollout

import (
	"testing"
	"time"

	"github.com/cuecast/cuecast"
)

// TestProgressCountsNamedInstances: a stage's coverage counts the instances
// it names, not the other instances of their buckets; the current stage
// counts the cohort the controller fixed, a pending one the policy's.
func TestProgressCountsNamedInstances(t *testing.T) {
	named := idsIn("named", 40, 41, 1)[0]
	mate := idsIn("mate", 40, 41, 1)[0] // shares named's bucket
	low := idsIn("low", 0, 10, 2)
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	reports := []cuecast.Report{
		{Instance: named, Version: 2, Healthy: true},
		{Instance: mate, Version: 1, Healthy: true},
		{Instance: low[0], Version: 1, Healthy: true},
		{Instance: low[1], Version: 1, Healthy: true},
	}
	rec := Record{Config: "payments/checkout", Stable: 1, Current: &Rollout{
		Config: "payments/checkout", Version: 2, From: 1, State: StateHolding, Stage: 0,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "host", Instances: []string{named}},
			{Name: "tenth", Percent: 10},
			{Name: "all", Percent: 100},
		}},
		Cohort: Cohort{Instances: []string{named}},
	}}
	p := progress(rec, reports, now)
	for i, want := range []struct{ instances, onTarget int }{{1, 1}, {3, 1}, {4, 1}} {
		if got := p.Stages[i]; got.Instances != want.instances || got.OnTarget != want.onTarget {
			t.Errorf("stage %s: got %d/%d on v2, want %d/%d", got.Name, got.OnTarget, got.Instances, want.onTarget, want.instances)
		}
	}
	if m := p.Cohort; m.Instances != 1 || m.OnTarget != 1 || m.Outside != 3 {
		t.Errorf("cohort: got %d instances (%d on v2), %d outside; want 1 (1), 3 outside", m.Instances, m.OnTarget, m.Outside)
	}
}
