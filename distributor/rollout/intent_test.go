package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// TestStatusCountsAgainstIntent: stragglers and coverage count each
// instance against the version meant for it now (Record.Intent), not the
// newest. Counted against the newest, after a halt every instance back on
// the intended version was a straggler, a normal canary made everyone else
// one, and after `rollback --to 1` status showed "v2 0/4 instances".
func TestStatusCountsAgainstIntent(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	now := t0.Add(time.Hour) // long past any straggler threshold
	after := 20 * time.Second
	canary := idsIn("canary", 0, 1, 1)[0]
	rest := idsIn("rest", 10, 100, 3)
	latest := cuecast.Version{Config: cfg, Version: 2, Checksum: "c2"}
	sums := map[uint64]string{1: "c1", 2: "c2"}
	fleet := func(canaryOn uint64, restOn uint64) []cuecast.Report {
		rs := []cuecast.Report{{Config: cfg, Instance: canary, Version: canaryOn, Checksum: sums[canaryOn], Healthy: true}}
		for _, id := range rest {
			rs = append(rs, cuecast.Report{Config: cfg, Instance: id, Version: restOn, Checksum: sums[restOn], Healthy: true})
		}
		return rs
	}
	policy := cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1}, {Name: "all", Percent: 100}}}
	rollout := func(state State) *Rollout {
		return &Rollout{Config: cfg, Version: 2, Checksum: "c2", From: 1, Policy: policy, Stage: 0, State: state,
			Cohort: Cohort{Buckets: []int{0}}, Started: t0, StageStarted: t0, Updated: t0,
			Log: []Step{{At: t0.Add(time.Minute), Stage: "canary", State: StateHalted, Detail: "halted: unhealthy"}}}
	}
	for _, tc := range []struct {
		name       string
		rec        *Record // nil: no rollout controller record
		reports    []cuecast.Report
		target     uint64
		onIntended int
		stragglers []string
		coverage   float64
	}{
		{name: "canary holding: the rest on v1 are where they should be",
			rec:     &Record{Config: cfg, Stable: 1, Floor: 1, Current: rollout(StateHolding)},
			reports: fleet(2, 1), target: 2, onIntended: 4, coverage: 1},
		{name: "canary holding: the canary still on v1 is the straggler",
			rec:     &Record{Config: cfg, Stable: 1, Floor: 1, Current: rollout(StateHolding)},
			reports: fleet(1, 1), target: 2, onIntended: 3, stragglers: []string{canary}, coverage: 0.75},
		{name: "halted and moved back: nobody is a straggler",
			rec:     &Record{Config: cfg, Stable: 1, Floor: 1, Current: rollout(StateHalted)},
			reports: fleet(1, 1), target: 1, onIntended: 4, coverage: 1},
		{name: "halted: the canary still on v2 is one",
			rec:     &Record{Config: cfg, Stable: 1, Floor: 1, Current: rollout(StateHalted)},
			reports: fleet(2, 1), target: 1, onIntended: 3, stragglers: []string{canary}, coverage: 0.75},
		{name: "rollback --to 1: pinned, every instance on v1 is on target",
			rec: &Record{Config: cfg, Stable: 1, Floor: 1, Current: rollout(StateRolledBack),
				Pin: &Pin{Version: 1, Checksum: "c1", At: t0.Add(2 * time.Minute), Applied: true}},
			reports: fleet(1, 1), target: 1, onIntended: 4, coverage: 1},
		{name: "complete: everyone on v2",
			rec:     &Record{Config: cfg, Stable: 2, Floor: 2, Current: rollout(StateComplete)},
			reports: fleet(2, 1), target: 2, onIntended: 1, stragglers: rest, coverage: 0.25},
		{name: "no record: the latest for everyone",
			reports: fleet(2, 1), target: 2, onIntended: 1, stragglers: rest, coverage: 0.25},
		{name: "no instance: coverage 0, not 1",
			rec:    &Record{Config: cfg, Stable: 1, Floor: 1, Current: rollout(StateHolding)},
			target: 2, coverage: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var intents distributor.Intents
			if tc.rec != nil {
				intents = IntentsOf([]Record{*tc.rec})
			}
			var intent distributor.Intent
			var target uint64
			if intents != nil {
				intent, target = intents(cfg, latest, t0)
			}
			st := distributor.Summarize(latest, t0, tc.reports, intent, target, after, now)
			var got []string
			for _, r := range st.Stragglers {
				got = append(got, r.Instance)
			}
			if st.Target != tc.target || st.OnIntended != tc.onIntended || st.Coverage != tc.coverage || fmt.Sprint(got) != fmt.Sprint(tc.stragglers) {
				t.Errorf("target v%d, %d on intended, coverage %v, stragglers %v; want v%d, %d, %v, %v",
					st.Target, st.OnIntended, st.Coverage, got, tc.target, tc.onIntended, tc.coverage, tc.stragglers)
			}
		})
	}
}

// TestSettled: the version meant now for an instance no stage has reached
// (serve's OFREP reads flags as one), case by case of Intent's rule, and
// what Intent gives such an instance.
func TestSettled(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	const latest = 5
	outsider := idsIn("rest", 10, 100, 1)[0]
	policy := cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1}, {Name: "more", Percent: 5}, {Name: "all", Percent: 100}}}
	ro := func(version, from uint64, state State, buckets ...int) *Rollout {
		return &Rollout{Config: cfg, Version: version, From: from, Policy: policy, State: state,
			Cohort: Cohort{Buckets: buckets}, Started: t0, StageStarted: t0, Updated: t0}
	}
	for _, tc := range []struct {
		name string
		rec  Record
		want uint64
	}{
		{"pinned: the pin", Record{Stable: 2, Floor: 2, Current: ro(4, 3, StateRolledBack, 0),
			Pin: &Pin{Version: 2, At: t0, Applied: true}}, 2},
		{"no rollout: latest", Record{}, latest},
		{"complete: its version", Record{Stable: 4, Floor: 4, Current: ro(4, 3, StateComplete, 0)}, 4},
		{"halted with From: From", Record{Stable: 3, Floor: 3, Current: ro(4, 3, StateHalted, 0)}, 3},
		{"halted, a first version: nothing", Record{Current: ro(1, 0, StateHalted, 0)}, 0},
		{"canary holding: the floor", Record{Stable: 3, Floor: 3, Current: ro(4, 3, StateHolding, 0)}, 3},
		{"staging a strict cutover: the floor", Record{Stable: 3, Floor: 3, Current: ro(4, 3, StateStaging)}, 3},
		{"moving to a later stage: the floor", Record{Stable: 3, Floor: 3, Current: ro(4, 3, StateMoving, 0)}, 3},
		{"last stage moved: its version, the new floor", Record{Stable: 3, Floor: 4, Current: ro(4, 3, StateWaiting, allBuckets()...)}, 4},
		{"floor behind stable (an old record): stable", Record{Stable: 3, Current: ro(4, 3, StateHolding, 0)}, 3},
		{"a first version in its canary: nothing", Record{Current: ro(1, 0, StateHolding, 0)}, 0},
		{"superseding a rollout in its canary: the floor, not the superseded one", Record{Stable: 3, Floor: 3,
			Current: ro(5, 3, StateHolding, 0), Superseded: ro(4, 3, StateSuperseded, 5, 6)}, 3},
		{"rolled back, the pin since lifted: the floor", Record{Stable: 2, Floor: 2, Current: ro(4, 3, StateRolledBack, 0)}, 2},
		{"rolled back with no floor: latest", Record{Current: ro(1, 0, StateRolledBack, 0)}, latest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.rec.Config = cfg
			if got := tc.rec.Settled(latest); got != tc.want {
				t.Errorf("Settled = v%d, want v%d", got, tc.want)
			}
			intent, _ := tc.rec.Intent(latest, t0)
			if got, _ := intent(outsider); got != tc.want {
				t.Errorf("Intent for an instance in no cohort = v%d, want v%d as Settled", got, tc.want)
			}
		})
	}
}
