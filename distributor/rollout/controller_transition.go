package rollout

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// The controller's pure transitions: each is a function of the record, its
// input (reports, the outcome of a pointer write) and now, with the options
// it depends on in rules, and is table-tested with the test's clock
// (transition_test.go, judge_test.go). The effects (pointer writes, the
// compare-and-swap of the record, the audit, logs) are controller_step.go's:
// a pointer write a transition needs (a move) is made before the record
// saying it was made is saved.

// rules are the Options a transition depends on.
type rules struct {
	applyTimeout time.Duration
	heartbeat    time.Duration
	actor        string
}

func (c *Controller) rules() rules {
	return rules{applyTimeout: c.o.ApplyTimeout, heartbeat: c.o.Heartbeat, actor: c.o.Actor}
}

// A move is a pointer write a transition asks for: p to every bucket and
// instance of co.
type move struct {
	co Cohort
	p  cuecast.Pointer
}

// pinMove points every instance at the pinned version: one all-buckets
// pointer, written even where a bucket runs the pinned version already:
// being the newest, it also overrides the pointers of instances a stage
// named (distributor.SetPointers).
func pinMove(rec *Record) move {
	p := rec.Pin
	return move{Cohort{Buckets: allBuckets()}, cuecast.Pointer{Config: rec.Config, Version: p.Version, Rollback: true,
		Rollout: "rollback", Reason: p.Reason}}
}

// pinApplied records that pinMove was made; false when it was already.
func pinApplied(rec *Record) bool {
	p := rec.Pin
	if p.Applied {
		return false
	}
	p.Applied = true
	rec.Floor, rec.FloorChecksum = p.Version, p.Checksum
	return true
}

// forwardMove points r's cohort at its version.
func forwardMove(r *Rollout) move {
	return move{r.Cohort, cuecast.Pointer{Config: r.Config, Version: r.Version, Rollout: r.ID, Reason: "stage " + r.StageName()}}
}

// movedForward records that forwardMove was made for the stage r is moving to:
// the stage waits for its cohort to apply the version. A variant index's
// rollout is complete then: no instance applies an index, so there is
// nobody to wait for or judge.
func movedForward(rec *Record, r *Rollout, now time.Time, ru rules) {
	if len(r.Cohort.Buckets) == cuecast.Buckets {
		rec.Floor, rec.FloorChecksum = r.Version, r.Checksum
	}
	if r.Index {
		r.log(now, fmt.Sprintf("variant index v%d on %s", r.Version, describe(r.Cohort)))
		complete(rec, r, now, "")
		return
	}
	r.State = StateWaiting
	r.WaitUntil = now.Add(ru.applyTimeout)
	r.Updated = now
	r.log(now, fmt.Sprintf("v%d on %s", r.Version, describe(r.Cohort)))
}

// backMove points the instances a halted rollout moved back at the
// version it started from; ok is false when it has none (a first version).
// Its cohort includes Moved: halted while moving to a stage, a rollout's
// cohort is still empty, and the earlier stages' instances are in Moved.
func backMove(r *Rollout) (m move, ok bool) {
	back := r.Cohort.union(r.Config.Namespace(), r.Moved)
	return move{back, cuecast.Pointer{Config: r.Config, Version: r.From, Rollback: true, Rollout: r.ID,
		Reason: "halted: " + r.Reason}}, r.From > 0
}

// reverted records that backMove was made (or that there was nothing to
// move back to); false when it was already.
func reverted(rec *Record, r *Rollout, now time.Time) bool {
	if r.Reverted {
		return false
	}
	r.Reverted = true
	r.Updated = now
	if r.From == 0 {
		r.log(now, "no earlier version to move the cohort back to; it stays on this one")
		return true
	}
	// Everyone this rollout moved is back on From, and nobody else was
	// moved since it began: the whole fleet runs From.
	rec.Floor, rec.FloorChecksum = r.From, r.FromChecksum
	back, _ := backMove(r)
	r.log(now, fmt.Sprintf("%s back on v%d", describe(back.co), r.From))
	return true
}

// newRollout is v's rollout, from the floor of rec, by pol and cons: at its
// first stage, or staging (strict), or to everyone at once (a strict
// config's first version).
func newRollout(v cuecast.Version, pol cuecast.Policy, cons cuecast.Consistency, rec *Record, now time.Time, ru rules) *Rollout {
	if cons == "" {
		cons = cuecast.Relaxed
	}
	from, fromSum := rec.floor()
	r := &Rollout{
		ID: fmt.Sprintf("%s@%d", v.Config, v.Version), Config: v.Config, Version: v.Version, Checksum: v.Checksum,
		Commit: v.Commit, Author: v.Author, From: from, FromChecksum: fromSum,
		Policy: normalize(pol), Consistency: cons, Started: now,
	}
	if cons == cuecast.Strict && r.From == 0 {
		// A strict config's first version: nobody runs anything to be
		// inconsistent with, and instances do not look for a staged pointer
		// before the first cohort pointer exists. Everyone gets it at once.
		enterStage(r, len(r.Policy.Stages)-1, now)
		r.log(now, "strict: first version, to every instance at once")
		return r
	}
	if cons == cuecast.Strict {
		r.State = StateStaging
		r.StageStarted = now
		r.WaitUntil = now.Add(ru.applyTimeout)
		r.Updated = now
		r.log(now, "strict: staging on every instance")
		return r
	}
	enterStage(r, 0, now)
	return r
}

// indexRollout is the rollout of v, a variant index (docs/VARIANTS.md): one
// stage pointing every bucket at it at once, whatever the policy and
// consistency class, and complete once the pointers moved. An index is no
// instance's content: a watcher of the base path started before the config
// had variants refuses it and watches its variant instead, so a staged
// rollout waited for instances that never apply it and halted, pointing
// the base path back at the plain config it replaced (issue 32, item 4).
// Its pointers still move, since they are how such a watcher learns that
// the config now has variants.
func indexRollout(v cuecast.Version, rec *Record, now time.Time) *Rollout {
	from, fromSum := rec.floor()
	r := &Rollout{
		ID: fmt.Sprintf("%s@%d", v.Config, v.Version), Config: v.Config, Version: v.Version, Checksum: v.Checksum,
		Commit: v.Commit, Author: v.Author, From: from, FromChecksum: fromSum,
		Policy:      cuecast.Policy{Stages: []cuecast.Stage{{Name: "index", Percent: 100}}},
		Consistency: cuecast.Relaxed, Index: true, Started: now,
	}
	enterStage(r, 0, now)
	return r
}

func supersede(rec *Record, r *Rollout, now time.Time) {
	if old := rec.Current; old != nil && (old.State.Active() || old.State == StateHalted) {
		old.State = StateSuperseded
		old.Reason = fmt.Sprintf("superseded by v%d", r.Version)
		old.Note = ""
		old.Updated = now
		old.log(now, old.Reason)
		rec.Superseded = old
	}
	rec.Current = r
}

// normalize gives a policy a final stage covering everyone.
func normalize(p cuecast.Policy) cuecast.Policy {
	if len(p.Stages) == 0 {
		return cuecast.DefaultPolicy()
	}
	if last := p.Stages[len(p.Stages)-1]; last.Percent < 100 {
		p.Stages = append(append([]cuecast.Stage(nil), p.Stages...), cuecast.Stage{Name: "rest", Percent: 100})
	}
	return p
}

// enterStage makes stage i current; its cohort is computed (from the
// reports, for label selectors) when the pointers move.
func (c *Controller) enterStage(r *Rollout, i int, _ []cuecast.Report, now time.Time) {
	enterStage(r, i, now)
}

// enterStage makes stage i of r current.
func enterStage(r *Rollout, i int, now time.Time) {
	r.Stage = i
	r.State = StateMoving
	r.Moved = r.Moved.union(r.Config.Namespace(), r.Cohort)
	r.Cohort = Cohort{}
	r.StageStarted = now
	r.WaitUntil, r.HoldUntil, r.EnoughBy = time.Time{}, time.Time{}, time.Time{}
	r.Unconfirmed = nil
	r.Analysis = nil
	r.Note = ""
	r.Updated = now
	r.log(now, "stage starts")
}

// describe says what a cohort covers, for a rollout's log.
func describe(co Cohort) string {
	if len(co.Instances) == 0 {
		return fmt.Sprintf("%d buckets", len(co.Buckets))
	}
	return fmt.Sprintf("%d buckets and %d named instances", len(co.Buckets), len(co.Instances))
}

// judge is evaluate on the live reports of the config: one step of a
// waiting or holding stage (docs/ROLLOUT.md, "The controller"):
//
//   - a breach halts;
//   - a waiting stage waits until every live cohort instance runs the
//     version or the wait times out, then holds for the stage's hold;
//   - a stage whose cohort has fewer live instances than min_instances
//     holds past its hold until EnoughBy (the hold plus ApplyTimeout, the
//     time an instance still starting gets to report), then passes with
//     the instances it has, every one of them on the version: the fleet
//     has no more, and holding for instances that do not exist would hold
//     for ever. With no live instance on the config at all there is
//     nobody starting to wait for: it passes when its hold has;
//   - otherwise the stage passes when its hold has. A hold is a time, not
//     a count: it runs with no instance too, and one that starts during it
//     gets the stage's version from its pointers and is watched;
//   - but no wait ends and no stage passes while a cohort instance known
//     live has not been heard yet (a controller just started): it is
//     waited for like one not on the version, for at most a heartbeat and
//     a quarter (Controller.reports).
//
// The note always names the real next event, never a past deadline.
func judgeStage(rec *Record, r *Rollout, reports []cuecast.Report, now time.Time, ru rules) ([]AuditEntry, bool) {
	st := r.Policy.Stages[r.Stage]
	timedOut := !now.Before(r.WaitUntil)
	if r.State == StateWaiting {
		// An instance waited for stays waited for when it stops
		// reporting: until the stage's wait times out, then it counts as
		// failing to apply. Dropping it when its report expired let a
		// stage pass without a hung member (issue 15, item 11).
		reports = withGone(rec.Config, reports, r.Unconfirmed)
	}
	m := measure(rec.Config.Namespace(), reports, r.Cohort, r.Version, timedOut)
	if why := breach(m, st); why != "" {
		return halt(rec, r, st, why, now, ru), true
	}
	var note string
	changed := false
	if r.State == StateWaiting {
		changed = r.confirm(m.waitingOne, now)
	}
	short := m.Instances < st.MinInstances && !r.Emergency
	nobody := len(reports) == 0 // a summary has no group without an instance
	if short && r.EnoughBy.IsZero() && r.State == StateHolding {
		// A record written before EnoughBy existed.
		r.EnoughBy = r.HoldUntil.Add(ru.applyTimeout)
	}
	switch {
	case r.State == StateWaiting && m.WaitingCount > 0 && !timedOut:
		note = waitingNote(m, r.Version)
	case m.UnheardCount > 0 && (r.State == StateWaiting || !now.Before(r.HoldUntil)):
		// A controller just started (serve restarted) has not heard these
		// cohort members yet: judged now, they passed a stage as "0/4 on
		// v2, 0 unhealthy", or failed a timed-out wait as "on v0" (issue
		// 32, item 3). It hears each within a heartbeat, or reads its last
		// report from the stream a heartbeat and a quarter after it began
		// keeping the config's reports.
		note = fmt.Sprintf("waiting to hear %d of %d instances in stage %s before judging it (at most %s after the controller started): %s",
			m.UnheardCount, m.Instances, st.Name, ru.heartbeat*5/4, list(m.Unheard, 5))
	case r.State == StateWaiting:
		startHold(r, st, m, now, ru)
		return nil, true
	case now.Before(r.HoldUntil) && nobody:
		note = fmt.Sprintf("holding until %s; no live instance reports on the config", r.HoldUntil.Format(time.RFC3339))
	case now.Before(r.HoldUntil) && short:
		note = fmt.Sprintf("holding until %s; only %d instances report in stage %s, it needs %d to learn anything, so it holds on until %s unless more join",
			r.HoldUntil.Format(time.RFC3339), m.Instances, st.Name, st.MinInstances, r.EnoughBy.Format(time.RFC3339))
	case now.Before(r.HoldUntil):
		note = fmt.Sprintf("holding until %s", r.HoldUntil.Format(time.RFC3339))
	case short && !nobody && now.Before(r.EnoughBy):
		note = fmt.Sprintf("holding: only %d instances report in stage %s, it needs %d to learn anything; it passes with them at %s unless more join",
			m.Instances, st.Name, st.MinInstances, r.EnoughBy.Format(time.RFC3339))
	case !nobody && analysisPending(r) != "":
		note = analysisPending(r)
	default:
		pass(rec, r, st, m, nobody, short, now)
		return nil, true
	}
	if note != r.Note {
		r.Note = note
		r.Updated = now
		return nil, true
	}
	return nil, changed
}

// halt stops r on a breach of its stage st's limits (why); its cohort is
// moved back at the next step (backMove).
func halt(rec *Record, r *Rollout, st cuecast.Stage, why string, now time.Time, ru rules) []AuditEntry {
	r.State = StateHalted
	r.Reason = why
	r.Reverted = false
	r.Note = ""
	r.Updated = now
	r.log(now, "halted: "+why)
	return []AuditEntry{{At: now, Actor: ru.actor, Action: "halt", Config: rec.Config, Version: r.Version,
		Stage: st.Name, Reason: why}}
}

// drillShort judges r's stage when the drill-down it needs lacks short,
// the regions that did not answer, or left instances out (rolloutReports):
// the stage is not judged without them. It records since when each has
// failed (DrillFailing; a region that answers in full since is dropped),
// and halts the stage once one has failed for ApplyTimeout, naming it and
// why: a region's host can fail every drill-down while keeping its
// summary fresh, and the stage then waited for ever, where the region's
// own instances could hold it only until ApplyTimeout (docs/SCALING.md,
// "Bound to the region"; TestUnansweringRegionHaltsTheStage). Until then
// the stage waits, its note naming the regions and when it halts, so one
// slow answer halts nothing (TestDrillDownFailingOnceDoesNotHalt).
func drillShort(rec *Record, r *Rollout, short []distributor.RegionDetail, now time.Time, ru rules) ([]AuditEntry, bool) {
	failing := make(map[string]time.Time, len(short))
	var names, overdue []string
	var haltAt time.Time
	for _, rd := range short {
		since, ok := r.DrillFailing[rd.Region]
		if !ok {
			since = now
		}
		failing[rd.Region] = since
		why := "no answer"
		if !rd.Unanswered {
			why = fmt.Sprintf("%d instances left out of its answer", rd.More)
		}
		names = append(names, fmt.Sprintf("%s (%s)", rd.Region, why))
		at := since.Add(ru.applyTimeout)
		if !now.Before(at) {
			overdue = append(overdue, fmt.Sprintf("%s (%s since %s)", rd.Region, why, since.Format(time.RFC3339)))
		}
		if haltAt.IsZero() || at.Before(haltAt) {
			haltAt = at
		}
	}
	changed := !maps.Equal(failing, r.DrillFailing)
	r.DrillFailing = failing
	if len(overdue) > 0 {
		why := fmt.Sprintf("the drill-down into the instances the rollout names or selects failed for the apply timeout (%s) or longer: region %s",
			ru.applyTimeout, strings.Join(overdue, ", region "))
		if r.State == StateStaging {
			return haltStaging(rec, r, why, now, ru), true
		}
		return halt(rec, r, r.Policy.Stages[r.Stage], why, now, ru), true
	}
	// No time past in the note (NoteAt would take it for a passed deadline).
	note := fmt.Sprintf("waiting for region %s to answer the drill-down into the instances the rollout names or selects; the stage halts at %s unless it does",
		strings.Join(names, ", region "), haltAt.Format(time.RFC3339))
	if note != r.Note {
		r.Note = note
		changed = true
	}
	if changed {
		r.Updated = now
	}
	return nil, changed
}

// drillAnswered forgets r's failed drill-downs once a judged read needed
// none, or had every region's full answer. It reports whether r changed.
func (r *Rollout) drillAnswered() bool {
	if len(r.DrillFailing) == 0 {
		return false
	}
	r.DrillFailing = nil
	return true
}

// startHold ends a stage's wait: it holds for the stage's hold (none in
// an emergency), and with min_instances until EnoughBy at the latest.
func startHold(r *Rollout, st cuecast.Stage, m Measure, now time.Time, ru rules) {
	r.State = StateHolding
	r.Unconfirmed = nil
	hold := time.Duration(st.Hold)
	if r.Emergency {
		hold = 0
	}
	r.HoldUntil = now.Add(hold)
	r.EnoughBy = time.Time{}
	if st.MinInstances > 0 {
		r.EnoughBy = r.HoldUntil.Add(ru.applyTimeout)
	}
	r.Analysis = nil
	if !r.Emergency { // an emergency skips the analysis with the holds
		r.Analysis = startAnalysis(st, now)
	}
	r.Note = ""
	r.Updated = now
	r.log(now, fmt.Sprintf("%d/%d instances on v%d; holding %s", m.OnTarget, m.Instances, r.Version, hold))
}

// pass ends a stage whose hold has passed: the next stage starts, or the
// rollout completes. nobody says no live instance reports on the config,
// short that fewer than min_instances report in the stage; the log says so.
func pass(rec *Record, r *Rollout, st cuecast.Stage, m Measure, nobody, short bool, now time.Time) {
	r.Note = ""
	passed := fmt.Sprintf("passed: %d/%d on v%d, %d unhealthy, %d failing", m.OnTarget, m.Instances, r.Version, m.Unhealthy, m.Failing)
	switch {
	case nobody:
		passed = "passed: no live instance reports on the config"
	case short:
		passed += fmt.Sprintf("; only %d of the %d instances min_instances asks for report in stage %s, and no more joined", m.Instances, st.MinInstances, st.Name)
	}
	if r.Stage+1 < len(r.Policy.Stages) {
		r.log(now, passed)
		enterStage(r, r.Stage+1, now)
		return
	}
	if !short && !nobody {
		passed = ""
	}
	complete(rec, r, now, passed)
}

// complete ends r's last stage: its version becomes the config's stable
// version and floor. why, when set, is logged before "complete".
func complete(rec *Record, r *Rollout, now time.Time, why string) {
	if why != "" {
		r.log(now, why)
	}
	r.State = StateComplete
	r.Note = ""
	r.Updated = now
	r.log(now, "complete")
	rec.Stable, rec.StableChecksum = r.Version, r.Checksum
	rec.Floor, rec.FloorChecksum = r.Version, r.Checksum
}

// gathering notes that a stage with label selectors waits to hear n live
// instances' reports (their labels) before it fixes its cohort: at most a
// heartbeat and a quarter after the controller started keeping the config's
// reports, when it reads the silent ones' reports from the stream.
func gathering(r *Rollout, n int, now time.Time, ru rules) bool {
	note := fmt.Sprintf("gathering reports: %d live instances not heard yet; label selectors need their labels (at most %s)", n, ru.heartbeat*5/4)
	if r.Note == note {
		return false
	}
	r.Note, r.Updated = note, now
	return true
}

// confirm records waiting as the instances the rollout waits for (those
// that stop reporting stay waited for, withGone). It reports whether r
// changed.
func (r *Rollout) confirm(waiting []string, now time.Time) bool {
	w := slices.Sorted(slices.Values(waiting))
	if slices.Equal(w, r.Unconfirmed) {
		return false
	}
	r.Unconfirmed = w
	r.Updated = now
	return true
}

func list(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return strings.Join(ids[:n], ", ") + fmt.Sprintf(" and %d more", len(ids)-n)
}

func allBuckets() []int {
	b := make([]int, cuecast.Buckets)
	for i := range b {
		b[i] = i
	}
	return b
}
