package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
)

// TestProgressCountsNamedInstances: a stage's coverage counts the instances
// it names, not the other instances of their buckets; the current stage
// counts the cohort the controller fixed, a pending one the policy's.
func TestProgressCountsNamedInstances(t *testing.T) {
	t.Parallel()
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

// TestProgressNeverShowsPastDeadline: a note written before its deadline
// passed (the controller has not judged the stage since) is not shown as
// the next event; Next is the real one, or zero once every one has passed.
func TestProgressNeverShowsPastDeadline(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	hold, enough := t0.Add(5*time.Minute), t0.Add(10*time.Minute)
	rec := func() Record {
		return Record{Config: "payments/checkout", Stable: 1, Current: &Rollout{
			Config: "payments/checkout", Version: 2, From: 1, State: StateHolding, Stage: 0,
			Policy:    cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1, MinInstances: 2}, {Name: "all", Percent: 100}}},
			Cohort:    Cohort{Buckets: []int{0}},
			HoldUntil: hold, EnoughBy: enough,
			Note: "holding until " + hold.Format(time.RFC3339),
		}}
	}
	for _, tc := range []struct {
		now        time.Time
		note, next string
	}{
		{now: t0, note: "holding until " + hold.Format(time.RFC3339), next: hold.Format(time.RFC3339)},
		{now: hold.Add(time.Second), note: "judged again by " + enough.Format(time.RFC3339), next: enough.Format(time.RFC3339)},
		{now: enough.Add(time.Second), note: "the controller judges the stage on its next step"},
	} {
		r := rec()
		p := progress(r, nil, tc.now)
		if got := p.Record.Current.Note; !strings.Contains(got, tc.note) {
			t.Errorf("at %s: note %q, want it to say %q", tc.now, got, tc.note)
		}
		if strings.Contains(p.Record.Current.Note, hold.Format(time.RFC3339)) && !tc.now.Before(hold) {
			t.Errorf("at %s: note %q names the past hold", tc.now, p.Record.Current.Note)
		}
		if got := p.Next; (tc.next == "" && !got.IsZero()) || (tc.next != "" && got.Format(time.RFC3339) != tc.next) {
			t.Errorf("at %s: next %s, want %q", tc.now, got, tc.next)
		}
		if r.Current.Note != "holding until "+hold.Format(time.RFC3339) {
			t.Errorf("progress changed the record it was given: %q", r.Current.Note)
		}
	}
}

// TestStageScope: the one wording of what a stage covers, for `cuecast
// rollout status` and the dashboard. The CLI printed a named stage as
// "canary 0%".
func TestStageScope(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		stage cuecast.Stage
		want  string
	}{
		{cuecast.Stage{Name: "all", Percent: 100}, "100%"},
		{cuecast.Stage{Name: "canary", Instances: []string{"a", "b"}}, "instances a, b"},
		{cuecast.Stage{Name: "eu", Labels: map[string]string{"zone": "eu-1", "tier": "web"}}, "labels tier=web, zone=eu-1"},
		{cuecast.Stage{Name: "mix", Percent: 5, Instances: []string{"a"}, Labels: map[string]string{"zone": "eu-1"}}, "5% + instances a + labels zone=eu-1"},
		{cuecast.Stage{Name: "none"}, "0%"},
	} {
		if got := StageScope(c.stage); got != c.want {
			t.Errorf("StageScope(%s) = %q, want %q", c.stage.Name, got, c.want)
		}
	}
}

// TestFormatTimes: the one time format of the CLI and the dashboard, also
// for the RFC 3339 times the controller writes in notes. The CLI showed
// notes' times as written; the dashboard rewrote them.
func TestFormatTimes(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 12, 1, 18, 20, 9, 500, time.FixedZone("CET", 3600))
	if got, want := FormatTime(at), "2026-12-01 17:20:09 UTC"; got != want {
		t.Errorf("FormatTime = %q, want %q", got, want)
	}
	for _, c := range []struct{ in, want string }{
		{"holding until 2026-12-01T17:20:09Z", "holding until 2026-12-01 17:20:09 UTC"},
		{"holding until 2026-12-01T18:20:09+01:00; 1 of 2 by 2026-12-01T17:25:00.5Z", "holding until 2026-12-01 17:20:09 UTC; 1 of 2 by 2026-12-01 17:25:00 UTC"},
		{"no time here", "no time here"},
	} {
		if got := FormatTimes(c.in); got != c.want {
			t.Errorf("FormatTimes(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestProgressWaitingNoteFromTheSameReports: the controller's note of a
// waiting stage is a step old; shown beside counts measured now it said
// "waiting for 3 of 3 instances to apply v2: checkout-1, …" while the
// same page showed 3/3 on v2. The note shown is measured from the same
// reports as the counts.
func TestProgressWaitingNoteFromTheSameReports(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	ids := []string{"checkout-1", "checkout-2", "checkout-3"}
	rec := Record{Config: "payments/checkout", Stable: 1, Current: &Rollout{
		Config: "payments/checkout", Version: 2, From: 1, State: StateWaiting, Stage: 0,
		Policy:      cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}},
		Cohort:      Cohort{Buckets: allBuckets()},
		WaitUntil:   now.Add(5 * time.Minute),
		Unconfirmed: ids,
		Note:        "waiting for 3 of 3 instances to apply v2: checkout-1, checkout-2, checkout-3",
	}}
	for _, tc := range []struct {
		on   int
		want string
	}{
		{3, "all 3 instances of the stage run v2"},
		{2, "waiting for 1 of 3 instances to apply v2: checkout-3"},
	} {
		var reports []cuecast.Report
		for i, id := range ids {
			v := uint64(1)
			if i < tc.on {
				v = 2
			}
			reports = append(reports, cuecast.Report{Instance: id, Config: "payments/checkout", Version: v, Healthy: true})
		}
		p := progress(rec, reports, now)
		if got := p.Record.Current.Note; !strings.HasPrefix(got, tc.want) || p.Cohort.OnTarget != tc.on {
			t.Errorf("%d of 3 on v2: note %q with %d/%d counted on v2; want the note to begin %q", tc.on, got, p.Cohort.OnTarget, p.Cohort.Instances, tc.want)
		}
		if got := rec.Current.NoteFor(reports, now); got != p.Record.Current.Note {
			t.Errorf("NoteFor %q, progress's note %q: want one", got, p.Record.Current.Note)
		}
	}
}
