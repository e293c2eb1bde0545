package rollout

import (
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// TestJudgeFirstVersionAndSmallFleet pins the first-version and small-fleet
// rule (docs/ROLLOUT.md, "Small fleets and the first version"): nothing
// holds for instances that do not exist, and no note names a deadline that
// has passed. The clock is the test's.
func TestJudgeFirstVersionAndSmallFleet(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	hold := 5 * time.Minute
	applyTimeout := time.Minute
	canary := idsIn("canary", 0, 1, 2)
	late := idsIn("late", 10, 100, 3)
	on := func(v uint64, ids ...string) []cuecast.Report {
		var out []cuecast.Report
		for _, id := range ids {
			out = append(out, cuecast.Report{Config: cfg, Instance: id, Version: v, Healthy: true})
		}
		return out
	}
	policy := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, MinInstances: 2, Hold: cuecast.Duration(hold)},
		{Name: "all", Percent: 100},
	}}
	holding := func(stage int, holdUntil, enoughBy time.Time) *Rollout {
		co := Cohort{Buckets: []int{0}}
		if stage == 1 {
			co = Cohort{Buckets: allBuckets()}
		}
		return &Rollout{Config: cfg, Version: 2, From: 1, Policy: policy, Stage: stage, State: StateHolding,
			Cohort: co, WaitUntil: t0.Add(-time.Minute), HoldUntil: holdUntil, EnoughBy: enoughBy}
	}
	waiting := func(stage int) *Rollout {
		r := holding(stage, time.Time{}, time.Time{})
		r.State = StateWaiting
		r.WaitUntil = t0.Add(applyTimeout)
		return r
	}
	for _, tc := range []struct {
		name    string
		r       *Rollout
		reports []cuecast.Report
		now     time.Time
		// want: the state and stage after the step, a note fragment, a
		// fragment of the newest log line.
		state             State
		stage             int
		note, log         string
		holdUntil, enough time.Time
	}{
		{name: "first version, no instance: the wait ends at once and the hold starts",
			r: waiting(0), now: t0, state: StateHolding, stage: 0, holdUntil: t0.Add(hold)},
		{name: "no instance in the hold: the note says so and names the hold",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), now: t0.Add(time.Minute), state: StateHolding, stage: 0,
			note: "holding until " + t0.Add(hold).Format(time.RFC3339) + "; no live instance reports on the config"},
		{name: "no instance: min_instances does not hold the canary past its hold",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), now: t0.Add(hold), state: StateMoving, stage: 1,
			log: "passed: no live instance reports on the config"},
		{name: "no instance in the last stage: complete when its hold has passed",
			r: holding(1, t0, time.Time{}), now: t0, state: StateComplete, stage: 1, log: "complete"},
		{name: "wait over: holding, with the min_instances deadline after the hold",
			r: waiting(0), reports: on(2, canary[0]), now: t0, state: StateHolding, stage: 0,
			holdUntil: t0.Add(hold), enough: t0.Add(hold + applyTimeout)},
		{name: "too few in the hold: the note names the hold and what follows",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), reports: slices.Concat(on(2, canary[0]), on(1, late...)),
			now: t0.Add(time.Minute), state: StateHolding, stage: 0, note: "holding until " + t0.Add(hold).Format(time.RFC3339)},
		{name: "too few after the hold: the note names when it passes, not the past hold",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), reports: slices.Concat(on(2, canary[0]), on(1, late...)),
			now: t0.Add(hold + time.Second), state: StateHolding, stage: 0,
			note: "only 1 instances report in stage canary, it needs 2 to learn anything; it passes with them at " + t0.Add(hold+applyTimeout).Format(time.RFC3339)},
		{name: "too few at the deadline: passes with every live cohort instance on the version",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), reports: slices.Concat(on(2, canary[0]), on(1, late...)),
			now: t0.Add(hold + applyTimeout), state: StateMoving, stage: 1, log: "only 1 of the 2 instances min_instances asks for"},
		{name: "ROLLOUT.md's example on two instances, none in the canary: passes at the deadline",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), reports: on(1, late[:2]...),
			now: t0.Add(hold + applyTimeout), state: StateMoving, stage: 1, log: "only 0 of the 2"},
		{name: "record without enough_by: the deadline is the hold plus the apply timeout",
			r: holding(0, t0.Add(hold), time.Time{}), reports: on(2, canary[0]),
			now: t0.Add(hold + time.Second), state: StateHolding, stage: 0, note: t0.Add(hold + applyTimeout).Format(time.RFC3339)},
		{name: "enough instances: passes when the hold has",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), reports: on(2, canary...),
			now: t0.Add(hold), state: StateMoving, stage: 1, log: "passed: 2/2 on v2"},
		{name: "enough instances: holds until the hold",
			r: holding(0, t0.Add(hold), t0.Add(hold+applyTimeout)), reports: on(2, canary...),
			now: t0.Add(time.Minute), state: StateHolding, stage: 0, note: "holding until " + t0.Add(hold).Format(time.RFC3339)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{o: Options{ApplyTimeout: applyTimeout}, log: slog.New(slog.NewTextHandler(io.Discard, nil))}
			rec := &Record{Config: cfg, Stable: 1, Floor: 1, Current: tc.r}
			if _, _, err := c.judge(rec, tc.r, tc.reports, tc.now); err != nil {
				t.Fatal(err)
			}
			r := tc.r
			if r.State != tc.state || r.Stage != tc.stage {
				t.Fatalf("got %s in stage %d (note %q), want %s in stage %d", r.State, r.Stage, r.Note, tc.state, tc.stage)
			}
			if !strings.Contains(r.Note, tc.note) {
				t.Errorf("note %q, want it to say %q", r.Note, tc.note)
			}
			if tc.log != "" {
				if n := len(r.Log); n == 0 || !strings.Contains(strings.Join([]string{r.Log[max(n-2, 0)].Detail, r.Log[n-1].Detail}, " / "), tc.log) {
					t.Errorf("log %+v, want a last line saying %q", r.Log, tc.log)
				}
			}
			if !tc.holdUntil.IsZero() && !r.HoldUntil.Equal(tc.holdUntil) {
				t.Errorf("hold until %s, want %s", r.HoldUntil, tc.holdUntil)
			}
			if !tc.enough.IsZero() && !r.EnoughBy.Equal(tc.enough) {
				t.Errorf("enough by %s, want %s", r.EnoughBy, tc.enough)
			}
			if tc.state == StateComplete && rec.Stable != 2 {
				t.Errorf("stable v%d after completing, want v2", rec.Stable)
			}
			for _, ts := range regexp.MustCompile(`\d{4}-\d\d-\d\dT[0-9:]+Z`).FindAllString(r.Note, -1) {
				if at, err := time.Parse(time.RFC3339, ts); err != nil || !at.After(tc.now) {
					t.Errorf("note %q names %s, which is not ahead of now (%s)", r.Note, ts, tc.now)
				}
			}
		})
	}
}

// TestJudgeWaitsToHearCohort: a stage is not judged on a cohort instance
// the controller knows live but has not heard yet (just started, serve
// restarted): its wait does not time out on it and its hold does not pass
// (issue 32, item 3). One outside the cohort holds nothing up.
func TestJudgeWaitsToHearCohort(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	hold, applyTimeout := 5*time.Minute, time.Minute
	canary, late := idsIn("canary", 0, 1, 2), idsIn("late", 10, 100, 1)
	policy := cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1, Hold: cuecast.Duration(hold)}, {Name: "all", Percent: 100}}}
	heardOn2 := func(ids ...string) []cuecast.Report {
		var out []cuecast.Report
		for _, id := range ids {
			out = append(out, cuecast.Report{Config: cfg, Instance: id, Version: 2, Healthy: true, At: t0})
		}
		return out
	}
	unheard := func(ids ...string) []cuecast.Report {
		l := distributor.NewLiveReports(cfg, time.Hour)
		l.Expect(ids, t0)
		return l.Live(t0)
	}
	rollout := func(s State) *Rollout {
		return &Rollout{Config: cfg, Version: 2, From: 1, Policy: policy, Stage: 0, State: s, Cohort: Cohort{Buckets: []int{0}},
			WaitUntil: t0.Add(applyTimeout), HoldUntil: t0.Add(hold)}
	}
	for _, tc := range []struct {
		name    string
		state   State
		reports []cuecast.Report
		now     time.Time
		want    State
		stage   int
		note    string
	}{
		{"hold over, a cohort instance unheard: it holds on", StateHolding, slices.Concat(heardOn2(canary[0]), unheard(canary[1])),
			t0.Add(hold), StateHolding, 0, "waiting to hear 1 of 2 instances in stage canary"},
		{"wait timed out, a cohort instance unheard: it waits, nobody fails", StateWaiting, slices.Concat(heardOn2(canary[0]), unheard(canary[1])),
			t0.Add(applyTimeout), StateWaiting, 0, "waiting to hear 1 of 2 instances in stage canary"},
		{"wait not over, a cohort instance unheard: it waits for it", StateWaiting, slices.Concat(heardOn2(canary[0]), unheard(canary[1])),
			t0, StateWaiting, 0, "waiting for 1 of 2 instances to apply v2: " + canary[1]},
		{"hold not over, a cohort instance unheard: the hold says so", StateHolding, slices.Concat(heardOn2(canary[0]), unheard(canary[1])),
			t0.Add(time.Minute), StateHolding, 0, "holding until " + t0.Add(hold).Format(time.RFC3339)},
		{"hold over, unheard only outside the cohort: it passes", StateHolding, slices.Concat(heardOn2(canary...), unheard(late...)),
			t0.Add(hold), StateMoving, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := rollout(tc.state)
			rec := &Record{Config: cfg, Stable: 1, Floor: 1, Current: r}
			judgeStage(rec, r, tc.reports, tc.now, rules{applyTimeout: applyTimeout, heartbeat: 15 * time.Second})
			if r.State != tc.want || r.Stage != tc.stage {
				t.Fatalf("got %s in stage %d (note %q, reason %q), want %s in stage %d", r.State, r.Stage, r.Note, r.Reason, tc.want, tc.stage)
			}
			if !strings.Contains(r.Note, tc.note) {
				t.Errorf("note %q, want it to say %q", r.Note, tc.note)
			}
		})
	}
}
