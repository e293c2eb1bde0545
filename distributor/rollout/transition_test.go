package rollout

import (
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// TestTransitions table-tests the controller's pure transitions outside
// judging (judge_test.go): a rollout's start, a stage's pointers moved, a
// halted cohort moved back, a pin applied, a stage gathering reports. Each
// is a function of (record, input, now); the clock is the test's.
func TestTransitions(t *testing.T) {
	t.Parallel()
	const cfg cuecast.ConfigPath = "payments/checkout"
	t0 := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	ru := rules{applyTimeout: time.Minute, heartbeat: 8 * time.Second, actor: "test"}
	three := cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 1}, {Name: "half", Percent: 50}, {Name: "all", Percent: 100}}}
	v2 := cuecast.Version{Config: cfg, Version: 2, Checksum: "c2", Commit: "abc"}
	onV1 := func() *Record {
		return &Record{Config: cfg, Stable: 1, StableChecksum: "c1", Floor: 1, FloorChecksum: "c1"}
	}
	rolling := func(state State, stage int, co Cohort) *Rollout {
		return &Rollout{ID: "payments/checkout@2", Config: cfg, Version: 2, Checksum: "c2", From: 1, FromChecksum: "c1",
			Policy: three, Stage: stage, State: state, Cohort: co}
	}
	staging := func(waitUntil time.Time) *Rollout {
		r := rolling(StateStaging, 0, Cohort{})
		r.Consistency, r.Announced, r.WaitUntil = cuecast.Strict, true, waitUntil
		return r
	}
	staged := func(id string, v uint64) cuecast.Report {
		return cuecast.Report{Config: cfg, Instance: id, Version: 1, Staged: v, Healthy: true, At: t0}
	}
	type want struct {
		changed      bool
		state        State
		stage        int
		floor        uint64
		waitUntil    time.Time
		note, logged string
	}
	for _, tc := range []struct {
		name string
		step func(rec *Record) (changed bool)
		rec  func() *Record
		want want
	}{
		{name: "relaxed start: stage 1 moving, from the floor",
			rec: onV1,
			step: func(rec *Record) bool {
				supersede(rec, newRollout(v2, three, cuecast.Relaxed, rec, t0, ru), t0)
				return true
			},
			want: want{changed: true, state: StateMoving, stage: 0, floor: 1, logged: "stage starts"}},
		{name: "strict start: staging on every instance until the apply timeout",
			rec: onV1,
			step: func(rec *Record) bool {
				supersede(rec, newRollout(v2, three, cuecast.Strict, rec, t0, ru), t0)
				return true
			},
			want: want{changed: true, state: StateStaging, stage: 0, floor: 1, waitUntil: t0.Add(time.Minute), logged: "strict: staging on every instance"}},
		{name: "strict first version: to everyone at once",
			rec: func() *Record { return &Record{Config: cfg} },
			step: func(rec *Record) bool {
				supersede(rec, newRollout(cuecast.Version{Config: cfg, Version: 1, Checksum: "c1"}, three, cuecast.Strict, rec, t0, ru), t0)
				return true
			},
			want: want{changed: true, state: StateMoving, stage: 2, logged: "first version, to every instance at once"}},
		{name: "a policy without a last stage for everyone gets one",
			rec: onV1,
			step: func(rec *Record) bool {
				r := newRollout(v2, cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Percent: 5}}}, "", rec, t0, ru)
				rec.Current = r
				return len(r.Policy.Stages) == 2 && r.Policy.Stages[1].Percent == 100 && r.Consistency == cuecast.Relaxed
			},
			want: want{changed: true, state: StateMoving, stage: 0, floor: 1}},
		{name: "moving: the cohort's pointers moved, the stage waits",
			rec: func() *Record {
				rec := onV1()
				rec.Current = rolling(StateMoving, 0, Cohort{Buckets: []int{0}})
				return rec
			},
			step: func(rec *Record) bool { movedForward(rec, rec.Current, t0, ru); return true },
			want: want{changed: true, state: StateWaiting, stage: 0, floor: 1, waitUntil: t0.Add(time.Minute), logged: "v2 on 1 buckets"}},
		{name: "moving every bucket: the floor follows",
			rec: func() *Record {
				rec := onV1()
				rec.Current = rolling(StateMoving, 2, Cohort{Buckets: allBuckets()})
				return rec
			},
			step: func(rec *Record) bool { movedForward(rec, rec.Current, t0, ru); return true },
			want: want{changed: true, state: StateWaiting, stage: 2, floor: 2, waitUntil: t0.Add(time.Minute), logged: "v2 on 100 buckets"}},
		{name: "halted: the stages' instances go back to From, which becomes the floor",
			rec: func() *Record {
				rec := onV1()
				rec.Floor = 0
				r := rolling(StateHalted, 1, Cohort{Buckets: []int{3, 4}})
				r.Moved = Cohort{Buckets: []int{0}}
				rec.Current = r
				return rec
			},
			step: func(rec *Record) bool {
				if m, ok := backMove(rec.Current); !ok || len(m.co.Buckets) != 3 || m.p.Version != 1 || !m.p.Rollback {
					t.Errorf("backMove: got %+v, %t; want 3 buckets back on v1 with rollback", m, ok)
				}
				return reverted(rec, rec.Current, t0)
			},
			want: want{changed: true, state: StateHalted, stage: 1, floor: 1, logged: "3 buckets back on v1"}},
		{name: "halted first version: nothing to move back to",
			rec: func() *Record {
				rec := &Record{Config: cfg}
				r := rolling(StateHalted, 0, Cohort{Buckets: []int{0}})
				r.From, r.FromChecksum = 0, ""
				rec.Current = r
				return rec
			},
			step: func(rec *Record) bool {
				if _, ok := backMove(rec.Current); ok {
					t.Error("backMove of a first version: got a move, want none")
				}
				return reverted(rec, rec.Current, t0)
			},
			want: want{changed: true, state: StateHalted, stage: 0, logged: "no earlier version"}},
		{name: "halted and reverted already: no change",
			rec: func() *Record {
				rec := onV1()
				rec.Current = rolling(StateHalted, 0, Cohort{Buckets: []int{0}})
				rec.Current.Reverted = true
				return rec
			},
			step: func(rec *Record) bool { return reverted(rec, rec.Current, t0) },
			want: want{state: StateHalted, floor: 1}},
		{name: "holding: an unhealthy cohort instance halts, audited",
			rec: func() *Record {
				rec := onV1()
				r := rolling(StateHolding, 0, Cohort{Buckets: []int{0}})
				r.HoldUntil = t0.Add(time.Hour)
				rec.Current = r
				return rec
			},
			step: func(rec *Record) bool {
				sick := cuecast.Report{Config: cfg, Instance: idsIn("canary", 0, 1, 1)[0], Version: 2}
				audits, changed := judgeStage(rec, rec.Current, []cuecast.Report{sick}, t0, ru)
				if len(audits) != 1 || audits[0].Action != "halt" || audits[0].Actor != "test" || audits[0].Stage != "canary" || !audits[0].At.Equal(t0) {
					t.Errorf("audit: got %+v, want one halt of stage canary by test at t0", audits)
				}
				return changed && strings.Contains(rec.Current.Reason, "unhealthy")
			},
			want: want{changed: true, state: StateHalted, stage: 0, floor: 1, logged: "halted: stage canary: 1/1 instances unhealthy"}},
		{name: "staging: every live instance staged, flip",
			rec: func() *Record { rec := onV1(); rec.Current = staging(t0.Add(time.Minute)); return rec },
			step: func(rec *Record) bool {
				audits, _, flip := judgeStaging(rec, rec.Current, []cuecast.Report{staged("a", 2), staged("b", 2)}, t0, ru)
				return len(audits) == 0 && flip
			},
			want: want{changed: true, state: StateStaging, floor: 1, waitUntil: t0.Add(time.Minute)}},
		{name: "staging: no live instance at all, flip at once (min_instances waits for no one who is not there)",
			rec: func() *Record {
				rec := onV1()
				rec.Current = staging(t0.Add(time.Minute))
				rec.Current.Policy = cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100, MinInstances: 2}}}
				return rec
			},
			step: func(rec *Record) bool {
				audits, _, flip := judgeStaging(rec, rec.Current, nil, t0, ru)
				return len(audits) == 0 && flip
			},
			want: want{changed: true, state: StateStaging, floor: 1, waitUntil: t0.Add(time.Minute)}},
		{name: "staging: one not confirmed yet, the note names it",
			rec: func() *Record { rec := onV1(); rec.Current = staging(t0.Add(time.Minute)); return rec },
			step: func(rec *Record) bool {
				_, changed, flip := judgeStaging(rec, rec.Current, []cuecast.Report{staged("a", 2), staged("b", 0)}, t0, ru)
				return changed && !flip
			},
			want: want{changed: true, state: StateStaging, floor: 1, waitUntil: t0.Add(time.Minute), note: "staged on 1 of 2 live instances; waiting for b"}},
		{name: "staging: one not confirmed by the wait's end, halted with nothing to move back",
			rec: func() *Record { rec := onV1(); rec.Current = staging(t0); return rec },
			step: func(rec *Record) bool {
				audits, changed, flip := judgeStaging(rec, rec.Current, []cuecast.Report{staged("a", 2), staged("b", 0)}, t0, ru)
				if len(audits) != 1 || audits[0].Stage != "staging" || !rec.Current.Reverted {
					t.Errorf("audit %+v, reverted %t: want one halt of staging, reverted", audits, rec.Current.Reverted)
				}
				return changed && !flip
			},
			want: want{changed: true, state: StateHalted, floor: 1, waitUntil: t0, logged: "1 instances did not confirm within 1m0s (b)"}},
		{name: "staging: past the wait's end, one not heard yet (a restart): waited for, not halted",
			rec: func() *Record { rec := onV1(); rec.Current = staging(t0); return rec },
			step: func(rec *Record) bool {
				l := distributor.NewLiveReports(cfg, time.Hour)
				l.Expect([]string{"b"}, t0)
				audits, changed, flip := judgeStaging(rec, rec.Current, append(l.Live(t0), staged("a", 2)), t0, ru)
				return len(audits) == 0 && changed && !flip
			},
			want: want{changed: true, state: StateStaging, floor: 1, waitUntil: t0, note: "waiting to hear 1 of 2 live instances before judging the staging"}},
		{name: "staging: one failed to stage, halted at once",
			rec: func() *Record { rec := onV1(); rec.Current = staging(t0.Add(time.Minute)); return rec },
			step: func(rec *Record) bool {
				bad := staged("b", 0)
				bad.LastError = "version 2: decode: bad"
				_, changed, flip := judgeStaging(rec, rec.Current, []cuecast.Report{staged("a", 2), bad}, t0, ru)
				return changed && !flip
			},
			want: want{changed: true, state: StateHalted, floor: 1, waitUntil: t0.Add(time.Minute), logged: "1 instances failed to stage it (b: version 2: decode: bad)"}},
		{name: "strict flip: the cohort pointers followed, the last stage waits",
			rec: func() *Record {
				rec := onV1()
				r := staging(t0)
				r.Stage, r.Cohort = 2, Cohort{Buckets: allBuckets()}
				rec.Current = r
				return rec
			},
			step: func(rec *Record) bool {
				activated(rec.Current, 2, t0)
				flipped(rec, rec.Current, t0, ru)
				return true
			},
			want: want{changed: true, state: StateWaiting, stage: 2, floor: 2, waitUntil: t0.Add(time.Minute), logged: "activated on 2 live instances at once"}},
		{name: "pin applied: the pinned version is the floor",
			rec: func() *Record {
				rec := onV1()
				rec.Floor = 3
				rec.Pin = &Pin{Version: 1, Checksum: "c1", Reason: "errors"}
				rec.Current = rolling(StateHalted, 0, Cohort{})
				return rec
			},
			step: func(rec *Record) bool {
				if m := pinMove(rec); len(m.co.Buckets) != cuecast.Buckets || m.p.Version != 1 || !m.p.Rollback || m.p.Reason != "errors" {
					t.Errorf("pinMove: got %+v, want every bucket back on v1 with the pin's reason", m)
				}
				ok := pinApplied(rec)
				if !rec.Pin.Applied || pinApplied(rec) {
					t.Error("pin: want applied once")
				}
				return ok
			},
			want: want{changed: true, state: StateHalted, floor: 1}},
		{name: "gathering: the note says how many are unheard, once",
			rec: func() *Record { rec := onV1(); rec.Current = rolling(StateMoving, 1, Cohort{}); return rec },
			step: func(rec *Record) bool {
				first := gathering(rec.Current, 3, t0, ru)
				return first && !gathering(rec.Current, 3, t0.Add(time.Second), ru)
			},
			want: want{changed: true, state: StateMoving, stage: 1, floor: 1, note: "3 live instances not heard yet; label selectors need their labels (at most 10s)"}},
		{name: "drill-down: a region does not answer, the stage waits and records since when",
			rec: func() *Record { rec := onV1(); rec.Current = rolling(StateHolding, 0, Cohort{}); return rec },
			step: func(rec *Record) bool {
				audits, changed := drillShort(rec, rec.Current, unanswered("leaf-2"), t0, ru)
				again, changedAgain := drillShort(rec, rec.Current, unanswered("leaf-2"), t0.Add(59*time.Second), ru)
				if len(audits)+len(again) != 0 || changedAgain || !rec.Current.DrillFailing["leaf-2"].Equal(t0) {
					t.Errorf("audits %+v, %+v, changed again %t, failing %v: want none, unchanged, leaf-2 since t0", audits, again, changedAgain, rec.Current.DrillFailing)
				}
				return changed
			},
			want: want{changed: true, state: StateHolding, floor: 1, note: "waiting for region leaf-2 (no answer) to answer the drill-down into the instances the rollout names or selects; the stage halts at 2026-12-01T17:01:00Z"}},
		{name: "drill-down: a region failing for the apply timeout halts the stage, naming it",
			rec: func() *Record {
				rec := onV1()
				rec.Current = rolling(StateWaiting, 1, Cohort{Buckets: []int{0}})
				rec.Current.DrillFailing = map[string]time.Time{"leaf-2": t0.Add(-time.Minute)}
				return rec
			},
			step: func(rec *Record) bool {
				audits, changed := drillShort(rec, rec.Current, unanswered("leaf-1", "leaf-2"), t0, ru)
				if len(audits) != 1 || audits[0].Action != "halt" || audits[0].Stage != "half" || strings.Contains(audits[0].Reason, "leaf-1") {
					t.Errorf("audit: got %+v, want one halt of stage half naming leaf-2 alone", audits)
				}
				return changed
			},
			want: want{changed: true, state: StateHalted, stage: 1, floor: 1, logged: "failed for the apply timeout (1m0s) or longer: region leaf-2 (no answer since 2026-12-01T16:59:00Z)"}},
		{name: "drill-down: a region that answered in between is not failing since before",
			rec: func() *Record {
				rec := onV1()
				rec.Current = rolling(StateHolding, 0, Cohort{})
				rec.Current.DrillFailing = map[string]time.Time{"leaf-2": t0.Add(-time.Hour)}
				return rec
			},
			step: func(rec *Record) bool {
				answered := rec.Current.drillAnswered()
				_, changed := drillShort(rec, rec.Current, unanswered("leaf-2"), t0, ru)
				return answered && changed && rec.Current.DrillFailing["leaf-2"].Equal(t0) && len(rec.Current.DrillFailing) == 1
			},
			want: want{changed: true, state: StateHolding, floor: 1, note: "the stage halts at 2026-12-01T17:01:00Z"}},
		{name: "drill-down: staging, a region leaving instances out for the apply timeout halts with nothing to move back",
			rec: func() *Record {
				rec := onV1()
				rec.Current = staging(t0.Add(time.Hour))
				rec.Current.DrillFailing = map[string]time.Time{"leaf-3": t0.Add(-2 * time.Minute)}
				return rec
			},
			step: func(rec *Record) bool {
				audits, changed := drillShort(rec, rec.Current, []distributor.RegionDetail{{Region: "leaf-3", More: 5}}, t0, ru)
				if len(audits) != 1 || audits[0].Stage != "staging" || !rec.Current.Reverted {
					t.Errorf("audit %+v, reverted %t: want one halt of staging, reverted", audits, rec.Current.Reverted)
				}
				return changed
			},
			want: want{changed: true, state: StateHalted, floor: 1, waitUntil: t0.Add(time.Hour), logged: "region leaf-3 (5 instances left out of its answer since 2026-12-01T16:58:00Z)"}},
		{name: "superseding: the rollout in flight is kept as superseded",
			rec: func() *Record {
				rec := onV1()
				rec.Current = rolling(StateWaiting, 1, Cohort{Buckets: []int{0}})
				return rec
			},
			step: func(rec *Record) bool {
				supersede(rec, newRollout(cuecast.Version{Config: cfg, Version: 3, Checksum: "c3"}, three, cuecast.Relaxed, rec, t0, ru), t0)
				return rec.Superseded != nil && rec.Superseded.State == StateSuperseded && rec.Superseded.Reason == "superseded by v3"
			},
			want: want{changed: true, state: StateMoving, stage: 0, floor: 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := tc.rec()
			changed := tc.step(rec)
			r := rec.Current
			if changed != tc.want.changed {
				t.Errorf("changed: got %t, want %t", changed, tc.want.changed)
			}
			if r.State != tc.want.state || r.Stage != tc.want.stage {
				t.Errorf("got %s in stage %d, want %s in stage %d", r.State, r.Stage, tc.want.state, tc.want.stage)
			}
			if rec.Floor != tc.want.floor {
				t.Errorf("floor: got v%d, want v%d", rec.Floor, tc.want.floor)
			}
			if !r.WaitUntil.Equal(tc.want.waitUntil) {
				t.Errorf("wait until: got %s, want %s", r.WaitUntil, tc.want.waitUntil)
			}
			if !strings.Contains(r.Note, tc.want.note) {
				t.Errorf("note: got %q, want it to say %q", r.Note, tc.want.note)
			}
			if tc.want.logged != "" {
				if n := len(r.Log); n == 0 || !strings.Contains(r.Log[n-1].Detail, tc.want.logged) {
					t.Errorf("log: got %+v, want a last line saying %q", r.Log, tc.want.logged)
				}
			}
			if tc.want.changed && tc.want.logged != "" && !r.Updated.Equal(t0) {
				t.Errorf("updated: got %s, want %s", r.Updated, t0)
			}
		})
	}
}

// unanswered is the regions of a drill-down that did not answer.
func unanswered(regions ...string) []distributor.RegionDetail {
	out := make([]distributor.RegionDetail, len(regions))
	for i, r := range regions {
		out[i] = distributor.RegionDetail{Region: r, Unanswered: true}
	}
	return out
}
