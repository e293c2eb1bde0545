package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// fleet starts one canary (bucket 0), two early (buckets 1-9) and three
// late (buckets 10-99) instances, all on v1.
func (e *env) fleet() (canary, early, late []*instance) {
	e.t.Helper()
	for _, id := range idIn("canary", 0, 1, 1) {
		canary = append(canary, e.instance(id))
	}
	for _, id := range idIn("early", 1, 10, 2) {
		early = append(early, e.instance(id))
	}
	for _, id := range idIn("late", 10, 100, 3) {
		late = append(late, e.instance(id))
	}
	all := slices.Concat(canary, early, late)
	waitOn(e.t, 1, all...)
	e.waitLive(len(all))
	return canary, early, late
}

// deployToFaultyCanary puts v1 on a fleet (baseline, fleet), does fault to
// the canary instance, and deploys v2.
func (e *env) deployToFaultyCanary(fault func(*instance)) (canary, early, late []*instance) {
	e.t.Helper()
	e.baseline()
	canary, early, late = e.fleet()
	fault(canary[0])
	e.deploy(e.publish(2, content(2)))
	return canary, early, late
}

func TestHealthyRolloutThroughThreeStages(t *testing.T) {
	t.Parallel()
	bothModes(t, testHealthyRolloutThroughThreeStages)
}

// testHealthyRolloutThroughThreeStages judges the rollout once it is
// complete, from its log and the times the instances applied v2: polling
// for a 300 ms hold missed it on a loaded machine, which saw the rollout
// complete first.
func testHealthyRolloutThroughThreeStages(t *testing.T) {
	const hold = 300 * time.Millisecond
	e := newEnv(t, threeStages(hold), cuecast.Relaxed)
	e.baseline()
	canary, early, late := e.fleet()
	e.deploy(e.publish(2, content(2)))

	rec := e.waitState(2, rollout.StateComplete, 2)
	waitOn(t, 2, slices.Concat(canary, early, late)...)
	if rec.Stable != 2 {
		t.Errorf("stable: got v%d, want v2", rec.Stable)
	}
	log := rec.Current.Log
	starts, held := map[string]time.Time{}, map[string]time.Time{}
	var order []string
	for _, s := range log {
		switch {
		case s.Detail == "stage starts":
			starts[s.Stage] = s.At
			order = append(order, s.Stage)
		case s.State == rollout.StateHolding && strings.Contains(s.Detail, "; holding "):
			held[s.Stage] = s.At
		}
	}
	stages := []string{"canary", "early", "all"}
	if !slices.Equal(order, stages) {
		t.Fatalf("stages started: got %v, want %v; log %+v", order, stages, log)
	}
	for i, st := range stages[:2] {
		h, ok := held[st]
		if !ok {
			t.Errorf("stage %s never held; log %+v", st, log)
			continue
		}
		if next := starts[stages[i+1]]; next.Sub(h) < hold {
			t.Errorf("stage %s held %s (from %s to %s), want at least %s", st, next.Sub(h), h.Format(stamp), next.Format(stamp), hold)
		}
	}
	// Each instance applies v2 after its stage moved its pointer, and
	// before the next stage starts: that stage waits for it to report v2.
	for i, ins := range [][]*instance{canary, early, late} {
		for _, in := range ins {
			at, ok := in.appliedAt(2)
			if !ok {
				t.Errorf("%s: no applied event for v2", in.id)
				continue
			}
			if from := starts[stages[i]]; !at.After(from) {
				t.Errorf("%s applied v2 at %s, before stage %s started at %s", in.id, at.Format(stamp), stages[i], from.Format(stamp))
			}
			if i+1 < len(stages) {
				if next := starts[stages[i+1]]; !at.Before(next) {
					t.Errorf("%s applied v2 at %s, after stage %s started at %s", in.id, at.Format(stamp), stages[i+1], next.Format(stamp))
				}
			}
		}
	}
}

// stamp shows a time to the microsecond, to tell apart the steps of a
// rollout with sub-second holds.
const stamp = "15:04:05.000000"

func TestCanaryUnhealthyHalts(t *testing.T) { bothModes(t, testCanaryUnhealthyHalts) }

func testCanaryUnhealthyHalts(t *testing.T) {
	e := newEnv(t, threeStages(10*time.Second), cuecast.Relaxed)
	canary, early, late := e.deployToFaultyCanary(func(in *instance) { in.sick.Store(2) })

	e.waitHalted(0, "unhealthy", canary[0].id)
	waitOn(t, 1, canary...)
	if p := e.pointer(0); p.Version != 1 || !p.Rollback {
		t.Errorf("canary bucket: got v%d rollback=%t, want v1 rollback", p.Version, p.Rollback)
	}
	for _, in := range slices.Concat(early, late) {
		if in.version() != 1 {
			t.Errorf("%s on v%d, want v1 (never moved)", in.id, in.version())
		}
	}
	for _, b := range []int{1, 50, 99} {
		if p := e.pointer(b); p.Version != 1 || p.Rollback {
			t.Errorf("bucket %d: got v%d rollback=%t, want v1 untouched", b, p.Version, p.Rollback)
		}
	}
	audit, err := e.c.Audit(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	if len(audit) != 1 || audit[0].Action != "halt" || audit[0].Version != 2 {
		t.Errorf("audit: got %+v, want one halt of v2", audit)
	}
	// It stays halted until an operator acts.
	e.ticks(10)
	if got := e.record().Current.State; got != rollout.StateHalted {
		t.Errorf("later: got %s, want halted", got)
	}
}

func TestApplyFailureHalts(t *testing.T) { bothModes(t, testApplyFailureHalts) }

func testApplyFailureHalts(t *testing.T) {
	e := newEnv(t, threeStages(10*time.Second), cuecast.Relaxed)
	canary, _, _ := e.deployToFaultyCanary(func(in *instance) { in.reject.Store(2) })

	e.waitHalted(0, "failed to apply", "validation hook")
	if canary[0].version() != 1 {
		t.Errorf("canary on v%d, want v1", canary[0].version())
	}
}

func TestTooFewInstancesHolds(t *testing.T) {
	t.Parallel()
	pol := threeStages(0)
	pol.Stages[0].MinInstances = 3
	e := newEnv(t, pol, cuecast.Relaxed)
	e.baseline()
	e.fleet()
	e.deploy(e.publish(2, content(2)))
	poll.Until(t, "hold that says why", poll.Patience, func() (bool, string) {
		r := e.record().Current
		return r.State == rollout.StateHolding && strings.Contains(r.Note, "needs 3"), string(r.State) + " " + r.Note
	})
	e.ticks(10)
	if r := e.record().Current; r.Stage != 0 {
		t.Errorf("advanced blind to stage %d", r.Stage)
	}
}

func TestSupersede(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(time.Hour), cuecast.Relaxed)
	e.baseline()
	canary, early, late := e.fleet()
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	if _, err := e.c.Advance(t.Context(), cfg, rollout.Action{Actor: "ann", Reason: "canary looks fine"}); err != nil {
		t.Fatalf("Advance: %v", err)
	}
	e.waitState(2, rollout.StateHolding, 1)
	waitOn(t, 2, early...)

	e.deploy(e.publish(3, content(3)))
	rec := e.waitState(3, rollout.StateHolding, 0)
	if rec.Superseded == nil || rec.Superseded.Version != 2 || rec.Superseded.State != rollout.StateSuperseded {
		t.Errorf("superseded: got %+v, want v2 superseded", rec.Superseded)
	}
	if rec.Current.From != 1 {
		t.Errorf("v3 falls back to v%d, want v1 (the last fully rolled out)", rec.Current.From)
	}
	waitOn(t, 3, canary...)
	waitOn(t, 2, early...)
	waitOn(t, 1, late...)
}

// TestRestartMidHold: a controller restarted while a stage holds keeps
// the hold's deadline, and the stage passes no sooner. The controllers'
// clock is the test's, moved past the hold once the restart is checked:
// with a real 1.5 s hold, a loaded machine could see the hold end before
// the restart, or the poll for it miss it.
func TestRestartMidHold(t *testing.T) {
	t.Parallel()
	const hold = time.Hour
	var ahead atomic.Int64
	dir := t.TempDir()
	srv := natstest.StartIn(t, dir)
	e := &env{t: t, srv: srv, pol: &policies{p: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, Hold: cuecast.Duration(hold)},
		{Name: "all", Percent: 100},
	}}}}
	e.opts = func(o *rollout.Options) {
		o.Now = func() time.Time { return time.Now().Add(time.Duration(ahead.Load())) }
	}
	e.open()
	e.baseline()
	e.deploy(e.publish(2, content(2)))
	before := e.waitState(2, rollout.StateHolding, 0).Current

	e.stop()
	e.nc.Close()
	srv.Stop()
	e.srv = natstest.StartIn(t, dir)
	e.open()

	after := e.record().Current
	if after.State != rollout.StateHolding || after.Stage != 0 || !after.HoldUntil.Equal(before.HoldUntil) {
		t.Fatalf("after restart: %s stage %d hold until %s, want holding stage 0 until %s",
			after.State, after.Stage, after.HoldUntil, before.HoldUntil)
	}
	ahead.Store(int64(hold))
	rec := e.waitState(2, rollout.StateComplete, 1)
	for _, s := range rec.Current.Log {
		if s.Stage == "canary" && strings.HasPrefix(s.Detail, "passed") && s.At.Before(before.HoldUntil) {
			t.Errorf("canary passed at %s, before its hold deadline %s", s.At, before.HoldUntil)
		}
	}
	if p := e.pointer(99); p.Version != 2 {
		t.Errorf("bucket 99 on v%d, want v2", p.Version)
	}
}

func TestRollbackPinsUntilMatchingCommit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, cuecast.DefaultPolicy(), cuecast.Relaxed)
	e.baseline()
	canary, early, late := e.fleet()
	all := slices.Concat(canary, early, late)
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateComplete, 0)
	waitOn(t, 2, all...)

	e.rollback(1, "checkout errors")
	waitOn(t, 1, all...)
	rec := e.record()
	if rec.Pin == nil || rec.Pin.Version != 1 || !rec.Pin.Applied {
		t.Fatalf("pin: got %+v, want applied pin on v1", rec.Pin)
	}

	e.deploy(e.publish(3, content(3)))
	if rec := e.record(); rec.Pending != 3 || rec.Current.Version != 2 {
		t.Errorf("pinned: pending v%d current v%d, want pending v3, no rollout of it", rec.Pending, rec.Current.Version)
	}
	e.ticks(10)
	if p := e.pointer(50); p.Version != 1 {
		t.Errorf("pinned: bucket 50 on v%d, want v1", p.Version)
	}

	// A commit restoring v1's content lifts the pin.
	e.deploy(e.publish(4, content(1)))
	e.waitState(4, rollout.StateComplete, -1)
	waitOn(t, 4, all...)
	if rec := e.record(); rec.Pin != nil || rec.Stable != 4 {
		t.Errorf("after restore: pin %+v stable v%d, want no pin, stable v4", rec.Pin, rec.Stable)
	}
	audit, err := e.c.Audit(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	var actions []string
	for _, a := range audit {
		actions = append(actions, a.Action+":"+a.Actor)
	}
	if want := []string{"rollback:ann", "unpin:cuecast-controller"}; !slices.Equal(actions, want) {
		t.Errorf("audit: got %v, want %v", actions, want)
	}
}

func TestUnpinRollsOutPending(t *testing.T) {
	t.Parallel()
	e := newEnv(t, cuecast.DefaultPolicy(), cuecast.Relaxed)
	e.completeV2()
	e.rollback(1, "bad")
	e.deploy(e.publish(3, content(3)))
	if _, err := e.c.Unpin(t.Context(), cfg, rollout.Action{Actor: "bob", Reason: "fixed forward in v3"}); err != nil {
		t.Fatalf("Unpin: %v", err)
	}
	e.waitState(3, rollout.StateComplete, 0)
	if p := e.pointer(42); p.Version != 3 {
		t.Errorf("bucket 42 on v%d, want v3", p.Version)
	}
}

func TestOperatorActions(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(time.Hour), cuecast.Relaxed)
	e.baseline()
	canary, _, late := e.fleet()
	ctx := t.Context()
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)

	if _, err := e.c.Halt(ctx, cfg, rollout.Action{Actor: "ann"}); err == nil {
		t.Errorf("Halt without a reason: got nil error")
	}
	if _, err := e.c.Halt(ctx, cfg, rollout.Action{Actor: "ann", Reason: "suspicious latency"}); err != nil {
		t.Fatalf("Halt: %v", err)
	}
	waitOn(t, 1, canary...)
	if _, err := e.c.Resume(ctx, cfg, rollout.Action{Actor: "ann", Reason: "latency was the load test"}); err != nil {
		t.Fatalf("Resume: %v", err)
	}
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, canary...)
	if _, err := e.c.Advance(ctx, cfg, rollout.Action{Actor: "ann", Reason: "incident fix", Emergency: true}); err != nil {
		t.Fatalf("Advance --emergency: %v", err)
	}
	e.waitState(2, rollout.StateComplete, 2)
	waitOn(t, 2, late...)
	audit, err := e.c.Audit(ctx, cfg)
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	var got []string
	for _, a := range audit {
		got = append(got, a.Action)
		if a.Reason == "" || a.Actor == "" || a.At.IsZero() {
			t.Errorf("audit entry without who/when/why: %+v", a)
		}
	}
	if want := []string{"halt", "resume", "advance"}; !slices.Equal(got, want) {
		t.Errorf("audit: got %v, want %v", got, want)
	}
	if !audit[2].Emergency {
		t.Errorf("advance: not recorded as emergency")
	}
}

// namedCast picks the instances of the tests of named stages: target in the
// first tenth of the buckets, mate in target's bucket, and other beyond the
// first tenth.
func namedCast() (target string, bucket int, mate, other string) {
	target = idIn("target", 0, 10, 1)[0]
	bucket = cuecast.Cohort(cfg.Namespace(), target)
	return target, bucket, idIn("mate", bucket, bucket+1, 1)[0], idIn("other", 10, 100, 1)[0]
}

// TestNamedStagesMoveExactlyThoseInstances: a stage naming an instance, or
// labels it carries, moves that instance by its own pointer and leaves its
// bucket (and the other instance hashing there) alone; a halt moves it back;
// the next percent stage moves its bucket, and from then on the bucket's
// pointer governs it again (a halt of that stage takes it back too).
func TestNamedStagesMoveExactlyThoseInstances(t *testing.T) {
	t.Parallel()
	bothModes(t, testNamedStagesMoveExactlyThoseInstances)
}

func testNamedStagesMoveExactlyThoseInstances(t *testing.T) {
	target, bucket, mate, other := namedCast()
	hour := cuecast.Duration(time.Hour)
	for _, tc := range []struct {
		name string
		pick cuecast.Stage
	}{
		{"instances", cuecast.Stage{Name: "pick", Instances: []string{target}, Hold: hour}},
		{"labels", cuecast.Stage{Name: "pick", Labels: map[string]string{"canary": "true"}, Hold: hour}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cuecast.Policy{Stages: []cuecast.Stage{
				tc.pick,
				{Name: "tenth", Percent: 10, Hold: hour},
				{Name: "all", Percent: 100},
			}}, cuecast.Relaxed)
			e.baseline()
			tgt := e.instanceWith(target, map[string]string{"canary": "true"})
			mat := e.instanceWith(mate, map[string]string{"canary": "false"})
			oth := e.instance(other)
			waitOn(t, 1, tgt, mat, oth)
			e.waitLive(3)
			act := rollout.Action{Actor: "ann", Reason: "test"}

			e.deploy(e.publish(2, content(2)))
			rec := e.waitState(2, rollout.StateHolding, 0)
			if got := rec.Current.Cohort; len(got.Buckets) != 0 || !slices.Equal(got.Instances, []string{target}) {
				t.Errorf("pick stage cohort: got %+v, want instance %s and no buckets", got, target)
			}
			if p, ok := e.instancePointer(target); !ok || p.Version != 2 || p.Rollback {
				t.Errorf("pick stage: %s's pointer v%d rollback=%t (exists %t), want v2", target, p.Version, p.Rollback, ok)
			}
			if p := e.pointer(bucket); p.Version != 1 {
				t.Errorf("pick stage: bucket %d on v%d, want v1 (not moved)", bucket, p.Version)
			}
			if _, ok := e.instancePointer(mate); ok {
				t.Errorf("pick stage: %s got an instance pointer", mate)
			}
			waitOn(t, 2, tgt)
			if mat.version() != 1 || oth.version() != 1 {
				t.Errorf("pick stage moved others: %s v%d, %s v%d", mate, mat.version(), other, oth.version())
			}

			if _, err := e.c.Halt(t.Context(), cfg, act); err != nil {
				t.Fatalf("Halt: %v", err)
			}
			if p, _ := e.instancePointer(target); p.Version != 1 || !p.Rollback {
				t.Errorf("after halt: %s's pointer v%d rollback=%t, want v1 rollback", target, p.Version, p.Rollback)
			}
			waitOn(t, 1, tgt)

			if _, err := e.c.Resume(t.Context(), cfg, act); err != nil {
				t.Fatalf("Resume: %v", err)
			}
			e.waitState(2, rollout.StateHolding, 0)
			waitOn(t, 2, tgt)

			if _, err := e.c.Advance(t.Context(), cfg, act); err != nil {
				t.Fatalf("Advance: %v", err)
			}
			rec = e.waitState(2, rollout.StateHolding, 1)
			if got := rec.Current.Cohort; len(got.Buckets) != 10 || len(got.Instances) != 0 {
				t.Errorf("tenth stage cohort: got %+v, want buckets 0-9 and no instance (its bucket covers it)", got)
			}
			if p := e.pointer(bucket); p.Version != 2 {
				t.Errorf("tenth stage: bucket %d on v%d, want v2", bucket, p.Version)
			}
			waitOn(t, 2, tgt, mat)
			if oth.version() != 1 {
				t.Errorf("tenth stage moved %s to v%d", other, oth.version())
			}

			// The bucket's pointer is newer than the instance's now, so the
			// halt of this stage takes the named instance back with it.
			if _, err := e.c.Halt(t.Context(), cfg, act); err != nil {
				t.Fatalf("Halt: %v", err)
			}
			waitOn(t, 1, tgt, mat)
			if _, err := e.c.Advance(t.Context(), cfg, act); err != nil {
				t.Fatalf("Advance: %v", err)
			}
			rec = e.waitState(2, rollout.StateComplete, 2)
			waitOn(t, 2, tgt, mat, oth)
		})
	}
}

// TestRollbackCoversNamedInstances: an emergency rollback reaches an
// instance a rollout moved by its own pointer even when its bucket already
// points at the version rolled back to (from the halt of an earlier
// rollout), so that the bucket's pointer is not written again and would not
// be the newer one; also when newer rollouts have superseded the one that
// named it since.
func TestRollbackCoversNamedInstances(t *testing.T) {
	t.Parallel()
	target, bucket, mate, other := namedCast()
	hour := cuecast.Duration(time.Hour)
	pick := func(id string) cuecast.Policy {
		return cuecast.Policy{Stages: []cuecast.Stage{{Name: "pick", Instances: []string{id}, Hold: hour}, {Name: "all", Percent: 100}}}
	}
	for _, tc := range []struct {
		name  string
		later int // rollouts naming someone else after the one naming target
	}{
		{"named by the current rollout", 0},
		{"named by a rollout superseded twice since", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, cuecast.Policy{Stages: []cuecast.Stage{
				{Name: "tenth", Percent: 10, Hold: hour},
				{Name: "all", Percent: 100},
			}}, cuecast.Relaxed)
			e.baseline()
			tgt, mat := e.instance(target), e.instance(mate)
			waitOn(t, 1, tgt, mat)
			e.waitLive(2)

			e.deploy(e.publish(2, content(2)))
			e.waitState(2, rollout.StateHolding, 0)
			if _, err := e.c.Halt(t.Context(), cfg, rollout.Action{Actor: "ann", Reason: "test"}); err != nil {
				t.Fatalf("Halt: %v", err)
			}
			if p := e.pointer(bucket); p.Version != 1 || !p.Rollback {
				t.Fatalf("after halt: bucket %d v%d rollback=%t, want v1 rollback", bucket, p.Version, p.Rollback)
			}

			e.pol.set(pick(target), cuecast.Relaxed)
			e.deploy(e.publish(3, content(3)))
			e.waitState(3, rollout.StateHolding, 0)
			waitOn(t, 3, tgt)
			e.pol.set(pick(other), cuecast.Relaxed)
			for v := uint64(4); v < uint64(4+tc.later); v++ {
				e.deploy(e.publish(v, content(int(v))))
				e.waitState(v, rollout.StateHolding, 0)
			}

			e.rollback(1, "checkout errors")
			// The rollback is one pointer for every bucket, written after
			// the target's own: the target follows it (the distributor then
			// has no reason to write the target's pointer as well).
			if p := e.pointer(bucket); p.Version != 1 || !p.Rollback {
				t.Errorf("after rollback: bucket %d runs v%d rollback=%t, want v1 rollback", bucket, p.Version, p.Rollback)
			}
			waitOn(t, 1, tgt, mat)
		})
	}
}

// TestAuditIsAppendOnly: the audit stream refuses purges and deletes.
func TestAuditIsAppendOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t, cuecast.DefaultPolicy(), cuecast.Relaxed)
	e.completeV2()
	e.rollback(1, "test")
	js := natstest.JetStream(t, e.nc)
	st, err := js.Stream(t.Context(), rollout.AuditStream)
	if err != nil {
		t.Fatal(err)
	}
	if c := st.CachedInfo().Config; !c.DenyDelete || !c.DenyPurge {
		t.Errorf("audit stream: deny delete %t, deny purge %t; want both", c.DenyDelete, c.DenyPurge)
	}
	if err := st.Purge(t.Context()); err == nil {
		t.Errorf("purge of the audit stream: got nil error")
	}
	if err := st.DeleteMsg(t.Context(), 1); err == nil {
		t.Errorf("delete from the audit stream: got nil error")
	}
	audit, err := e.c.Audit(t.Context(), "")
	if err != nil || len(audit) != 1 || audit[0].Actor != "ann" {
		t.Errorf("audit after the attempts: %+v, %v; want ann's rollback", audit, err)
	}
}

// TestLaterStageKeepsWhomEarlierStagesMoved: stages are cumulative even when
// a label stops matching. An instance a label stage moved stays in the next
// stage's cohort after it restarts without the label, so a halt there moves
// it back with the rest.
func TestLaterStageKeepsWhomEarlierStagesMoved(t *testing.T) {
	t.Parallel()
	bothModes(t, testLaterStageKeepsWhomEarlierStagesMoved)
}

func testLaterStageKeepsWhomEarlierStagesMoved(t *testing.T) {
	hour := cuecast.Duration(time.Hour)
	e := newEnv(t, cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Labels: map[string]string{"canary": "true"}, Hold: hour},
		{Name: "tenth", Percent: 10, Hold: hour},
		{Name: "all", Percent: 100},
	}}, cuecast.Relaxed)
	e.baseline()
	id := idIn("relabelled", 10, 100, 1)[0] // outside the tenth's buckets
	first := e.instanceWith(id, map[string]string{"canary": "true"})
	waitOn(t, 1, first)
	e.waitLive(1)
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, first)

	first.w.Stop()
	again := e.instanceWith(id, nil)
	waitOn(t, 2, again) // its own pointer still says v2
	poll.Until(t, "the label-less report", poll.Patience, func() (bool, string) {
		rs, err := e.d.Reports(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.Instance == id && len(r.Labels) == 0 {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%+v", rs)
	})

	act := rollout.Action{Actor: "ann", Reason: "test"}
	if _, err := e.c.Advance(t.Context(), cfg, act); err != nil {
		t.Fatalf("Advance: %v", err)
	}
	rec := e.waitState(2, rollout.StateHolding, 1)
	if !rec.Current.Contains(cfg.Namespace(), id) {
		t.Fatalf("tenth stage cohort %+v: want it to keep %s, moved by the canary stage", rec.Current.Cohort, id)
	}
	if _, err := e.c.Halt(t.Context(), cfg, act); err != nil {
		t.Fatalf("Halt: %v", err)
	}
	waitOn(t, 1, again)
}

// afterSetPointers is a Distributor that calls hook after each successful
// bucket pointer write, to step in between the controller's pointer writes
// and the save that records them.
type afterSetPointers struct {
	rollout.Distributor
	hook func(buckets []int, p cuecast.Pointer)
}

func (a *afterSetPointers) SetPointers(ctx context.Context, cfg cuecast.ConfigPath, buckets []int, p cuecast.Pointer) error {
	err := a.Distributor.SetPointers(ctx, cfg, buckets, p)
	if err == nil {
		a.hook(buckets, p)
	}
	return err
}

// TestHaltDuringStageMoveRevertsTheMove: an operator's halt that lands
// after the controller moved the next stage's pointers but before it
// recorded the move (its save then loses the compare-and-swap) moves back
// everyone the controller moved, not only the cohort the halted record
// names.
func TestHaltDuringStageMoveRevertsTheMove(t *testing.T) {
	t.Parallel()
	var e *env
	var fired atomic.Bool
	halted := make(chan error, 1)
	act := rollout.Action{Actor: "ann", Reason: "error rate"}
	e = newEnvWrapped(t, threeStages(time.Hour), cuecast.Relaxed, func(d rollout.Distributor) rollout.Distributor {
		return &afterSetPointers{Distributor: d, hook: func(buckets []int, p cuecast.Pointer) {
			// The early stage's move of v2 (ten buckets), once.
			if p.Version != 2 || len(buckets) < 10 || !fired.CompareAndSwap(false, true) {
				return
			}
			// The operator's CLI: a controller without policies, which
			// records the halt and waits for serve's to carry it out.
			op, err := rollout.New(context.Background(), e.nc, e.d, nil, rollout.Options{Heartbeat: heartbeat, Logger: logger(t)})
			if err != nil {
				halted <- err
				return
			}
			go func() {
				_, err := op.Halt(context.Background(), cfg, act)
				halted <- err
			}()
			// This runs on a controller goroutine: no t.Fatal here.
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				rec, err := op.Record(context.Background(), cfg)
				if err == nil && rec.Current != nil && rec.Current.State == rollout.StateHalted {
					return
				}
			}
			t.Errorf("the operator's halt was not recorded within 10s")
		}}
	})
	e.baseline()
	canary := e.instance(idIn("canary", 0, 1, 1)[0])
	early := e.instance(idIn("early", 1, 10, 1)[0])
	waitOn(t, 1, canary, early)
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, canary)

	if _, err := e.c.Advance(t.Context(), cfg, rollout.Action{Actor: "bob", Reason: "canary looks fine"}); err != nil {
		t.Fatalf("Advance: %v", err)
	}
	select {
	case err := <-halted:
		if err != nil {
			t.Fatalf("Halt: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("the operator's halt did not return")
	}
	if !fired.Load() {
		t.Fatal("the early stage's pointers never moved: the race was not staged")
	}
	waitOn(t, 1, canary, early)
	rec := e.record()
	if r := rec.Current; r == nil || r.State != rollout.StateHalted || !r.Reverted || !r.Contains(cfg.Namespace(), early.id) {
		t.Fatalf("record after the halt: %+v; want halted, reverted, with %s in its cohort", rec.Current, early.id)
	}
}

// TestHaltBeforeStageMoveRevertsEarlierStages: a halt recorded after an
// advance but before the controller moved the new stage (the rollout's
// cohort is then empty) moves back everyone the earlier stages moved.
func TestHaltBeforeStageMoveRevertsEarlierStages(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(time.Hour), cuecast.Relaxed)
	e.baseline()
	canary := e.instance(idIn("canary", 0, 1, 1)[0])
	waitOn(t, 1, canary)
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, canary)

	// serve is down: the operator's CLI records both actions; neither is
	// carried out.
	e.stop()
	op, err := rollout.New(t.Context(), e.nc, e.d, nil, rollout.Options{Heartbeat: heartbeat, AwaitTimeout: 100 * time.Millisecond, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := op.Advance(t.Context(), cfg, rollout.Action{Actor: "bob", Reason: "canary looks fine"}); !errors.Is(err, rollout.ErrNotCarriedOut) {
		t.Fatalf("Advance with serve down: %v, want ErrNotCarriedOut", err)
	}
	if _, err := op.Halt(t.Context(), cfg, rollout.Action{Actor: "ann", Reason: "error rate"}); !errors.Is(err, rollout.ErrNotCarriedOut) {
		t.Fatalf("Halt with serve down: %v, want ErrNotCarriedOut", err)
	}
	if r := e.record().Current; r.State != rollout.StateHalted || len(r.Cohort.Buckets)+len(r.Cohort.Instances) != 0 {
		t.Fatalf("recorded: %s with cohort %+v; want halted while moving, with an empty cohort", r.State, r.Cohort)
	}

	e.open() // serve is back
	waitOn(t, 1, canary)
	poll.Until(t, "the halt recorded as carried out", poll.Patience, func() (bool, string) {
		r := e.record().Current
		return r.Reverted, fmt.Sprintf("%s, reverted %t", r.State, r.Reverted)
	})
}

// A rollout controller whose watch of its bucket could not start (a
// request timed out while serve was cut off from NATS) returned an error,
// which ended serve's leader work and so serve's Run for good: no more
// versions from that serve until someone restarted it
// (TestSoakFaults/external, "watch cuecast-rollouts: context deadline
// exceeded"). Run now watches again once NATS is back, and carries a
// deploy through a hold, which only the running controller ends.
func TestRunWatchesAgainAfterNATSWasUnreachable(t *testing.T) {
	t.Parallel()
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, Hold: cuecast.Duration(100 * time.Millisecond)},
		{Name: "all", Percent: 100},
	}}
	e := newEnvSet(t, pol, cuecast.Relaxed, func(e *env) {
		e.viaLink = true
		e.before = func(*rollout.Controller) { e.link.Cut() }
	})
	poll.Until(t, "a watch that failed", poll.Patience, func() (bool, string) {
		n := rollout.WatchFailures(e.c)
		return n > 0, fmt.Sprintf("%d failures", n)
	})
	e.link.Heal()
	e.baseline()
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateComplete, -1)
}

// A read of the rollout bucket from its stream leader is a plain NATS
// request, and it waited for its answer with the caller's context, which
// the running controller's has no deadline: an answer lost with the
// connection (a link cut after the server got the request) left the
// controller's step waiting for good while holding the controller's lock,
// and the tailer's next Deploy waited on that lock, so serve published
// nothing more (TestSoakFaults/replicated in `make test`: "a tailer at
// the head: still <commit>", the goroutine dump in Controller.Deploy and
// Controller.get). A read now gives up after a bounded wait when the
// context has none.
func TestRecordReturnsWhenItsAnswerIsLost(t *testing.T) {
	t.Parallel()
	e := newEnvSet(t, cuecast.DefaultPolicy(), cuecast.Relaxed, func(e *env) { e.viaLink = true })
	e.baseline()
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateComplete, -1)
	e.stop() // no read of the running controller's may take the held answer's place

	err := e.link.LoseAnswer(t, e.srv, "$JS.API.STREAM.MSG.GET.KV_"+rollout.Bucket, func() error {
		_, err := e.c.Record(context.Background(), cfg)
		return err
	})
	if err == nil {
		t.Fatal("Record returned no error though its answer was lost")
	}
	t.Logf("Record after its answer was lost: %v", err)
	if rec := e.record(); rec.Current == nil || rec.Current.Version != 2 {
		t.Fatalf("after the link healed: record %+v, want the rollout of v2", rec.Current)
	}
}

// Run retries a watch that fails while NATS is unreachable, but not on a
// connection closed for good: there it returns an error at once.
func TestRunReturnsOnAClosedConnection(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	d, err := distributor.New(t.Context(), nc, distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rollout.New(t.Context(), nc, d, rollout.Static{}, rollout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	nc.Close()
	done := make(chan error, 1)
	go func() { done <- c.Run(t.Context()) }()
	if err := poll.Receive(t, "Run's return on a closed connection (still retrying)", poll.Patience, done); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Run on a closed connection: %v, want nats.ErrConnectionClosed", err)
	}
}
