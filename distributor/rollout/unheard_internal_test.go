package rollout

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// TestUnheardInstanceStaysWaitedFor plays the controller's view through
// the steps that made TestStrictCutoverBlockedByStalledInstance/single
// flip on a loaded machine, on the test's clock. frozen-1 stopped just
// before the rollout: the view, started at the rollout, lists it from the
// report stream as not heard yet (Expect), and the step's note names it.
// A heartbeat and a quarter later its last report is read from the
// stream (Overdue, Seed), and that report is older than the live window
// by then, so it expires at once and frozen-1 leaves the view. It was
// waited for, so it stays waited for ("stopped reporting") until the wait
// ends, and then halts the cutover (or fails the relaxed stage) naming
// it. Before, an unheard instance was not recorded as waited for
// (followed), and the next step flipped, or started the hold, without it.
func TestUnheardInstanceStaysWaitedFor(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	const hb = 100 * time.Millisecond
	ttl := distributor.LiveFor(hb)
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	ru := rules{applyTimeout: 5 * time.Second, heartbeat: hb, actor: "test"}
	// frozen-1's last report, sent 300ms before the view started: live
	// when the view lists it, expired when it is read.
	frozenAt := t0.Add(-3 * hb)
	for _, tc := range []struct {
		name string
		// rollout is the rollout at t0, waiting until t0+applyTimeout.
		rollout func() *Rollout
		// others is what web-a and web-b report: staged, or applied.
		others func(id string, at time.Time) cuecast.Report
		// judge is one step; it reports whether the rollout flipped (or
		// left its wait).
		judge func(rec *Record, r *Rollout, rs []cuecast.Report, now time.Time) (left bool)
		// waiting and halted are fragments of the note while it waits
		// for frozen-1 and of the reason it halts for.
		waiting []string
		halted  []string
	}{
		{name: "strict",
			rollout: func() *Rollout {
				return &Rollout{ID: "payments/checkout@2", Config: cfg, Version: 2, From: 1, Consistency: cuecast.Strict, Announced: true,
					Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1}, {Name: "all", Percent: 100}}},
					State:  StateStaging, WaitUntil: t0.Add(ru.applyTimeout)}
			},
			others: func(id string, at time.Time) cuecast.Report {
				return cuecast.Report{Config: cfg, Instance: id, Version: 1, Staged: 2, Healthy: true, At: at}
			},
			judge: func(rec *Record, r *Rollout, rs []cuecast.Report, now time.Time) bool {
				_, _, flip := judgeStaging(rec, r, rs, now, ru)
				return flip
			},
			waiting: []string{"staged on 2 of 3 live instances", "frozen-1"},
			halted:  []string{"did not confirm", "frozen-1 (stopped reporting)"}},
		{name: "relaxed",
			rollout: func() *Rollout {
				return &Rollout{ID: "payments/checkout@2", Config: cfg, Version: 2, From: 1,
					Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}},
					State:  StateWaiting, Cohort: Cohort{Buckets: allBuckets()}, WaitUntil: t0.Add(ru.applyTimeout)}
			},
			others: func(id string, at time.Time) cuecast.Report {
				return cuecast.Report{Config: cfg, Instance: id, Version: 2, Healthy: true, At: at}
			},
			judge: func(rec *Record, r *Rollout, rs []cuecast.Report, now time.Time) bool {
				judgeStage(rec, r, rs, now, ru)
				return r.State != StateWaiting && r.State != StateHalted
			},
			waiting: []string{"waiting for 1 of 3 instances to apply v2", "frozen-1"},
			halted:  []string{"failed to apply", "frozen-1 stopped reporting before it applied v2"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rec := &Record{Config: cfg, Stable: 1, Floor: 1}
			r := tc.rollout()
			rec.Current = r
			l := distributor.NewLiveReports(cfg, ttl)
			// step reads the view at now, as Controller.reports does,
			// with web-a and web-b heard just now, and judges.
			step := func(now time.Time) []cuecast.Report {
				l.Seed([]cuecast.Report{tc.others("web-a", now), tc.others("web-b", now)}, now)
				for _, id := range l.Overdue(now, ttl*5/16) {
					l.Seed([]cuecast.Report{{Config: cfg, Instance: id, Version: 1, Healthy: true, At: frozenAt}}, now)
				}
				rs := l.Live(now)
				if tc.judge(rec, r, rs, now) {
					t.Fatalf("at %s: left without frozen-1: %s %q; log %+v", now.Sub(t0), r.State, r.Note, r.Log)
				}
				return rs
			}
			wantWaiting := func(at string) {
				t.Helper()
				if r.State != tc.rollout().State {
					t.Fatalf("%s: state %s (%s), want %s", at, r.State, r.Reason, tc.rollout().State)
				}
				for _, w := range tc.waiting {
					if !strings.Contains(r.Note, w) {
						t.Errorf("%s: note %q, want it to say %q", at, r.Note, w)
					}
				}
				if want := []string{"frozen-1"}; !slices.Equal(r.Unconfirmed, want) {
					t.Errorf("%s: unconfirmed %q, want %q", at, r.Unconfirmed, want)
				}
			}

			// The view starts: frozen-1 is known live from the stream only.
			l.Expect([]string{"frozen-1"}, t0)
			rs := step(t0)
			if !slices.ContainsFunc(rs, distributor.Unheard) {
				t.Fatalf("first step's reports %+v: want frozen-1 not heard yet", rs)
			}
			wantWaiting("first step (frozen-1 not heard yet)")

			// Its report, read from the stream, expired already.
			t1 := t0.Add(ttl * 5 / 16)
			rs = step(t1)
			if slices.ContainsFunc(rs, func(rp cuecast.Report) bool { return rp.Instance == "frozen-1" }) {
				t.Fatalf("second step's reports %+v: want frozen-1 expired on being read", rs)
			}
			wantWaiting("after its report expired")

			// The wait ends: halted, naming it.
			end := r.WaitUntil
			step(end)
			if r.State != StateHalted {
				t.Fatalf("at the wait's end: state %s, note %q; want halted", r.State, r.Note)
			}
			for _, w := range tc.halted {
				if !strings.Contains(r.Reason, w) {
					t.Errorf("halt reason %q, want it to say %q", r.Reason, w)
				}
			}
		})
	}
}
