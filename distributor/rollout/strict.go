package rollout

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Cutover is the distributor's two-phase cutover of strict configs: a staged
// pointer every instance prepares, then one activation pointer all switch on.
type Cutover interface {
	Stage(ctx context.Context, cfg cuecast.ConfigPath, p cuecast.Pointer) error
	Activate(ctx context.Context, cfg cuecast.ConfigPath, p cuecast.Pointer) error
}

var _ Cutover = (*distributor.Distributor)(nil)

// stepStrict drives a strict rollout: announce the staged version, wait until
// every live instance reports it staged (or already applied), then flip the
// activation pointer and the cohort pointers of every bucket. Instances that
// do not confirm block the flip and are listed in the note; when
// Options.ApplyTimeout passes first, the rollout halts naming them, and
// nothing has switched. The decisions are judgeStaging's; this makes the
// pointer writes they ask for.
func (c *Controller) stepStrict(ctx context.Context, rec *Record, r *Rollout, now time.Time) ([]AuditEntry, bool, error) {
	cut, ok := c.d.(Cutover)
	if !ok {
		return nil, false, fmt.Errorf("strict rollout of %s: the distributor has no two-phase cutover", rec.Config)
	}
	if !r.Announced {
		if err := cut.Stage(ctx, rec.Config, cuecast.Pointer{Config: rec.Config, Version: r.Version, Rollout: r.ID, Reason: "staged"}); err != nil {
			return nil, false, err
		}
		announced(r, now)
		return nil, true, nil
	}
	reports, answered, early := c.judgeable(ctx, rec, r, now)
	if early != nil {
		return early.audits, early.changed, early.err
	}
	audits, changed, flip := judgeStaging(rec, r, reports, now, c.rules())
	if !flip {
		return audits, changed || answered, nil
	}
	p := cuecast.Pointer{Config: rec.Config, Version: r.Version, Rollout: r.ID, Reason: "activate"}
	if err := cut.Activate(ctx, rec.Config, p); err != nil {
		return nil, false, err
	}
	activated(r, distributor.Weigh(reports), now)
	// The cohort pointers follow, so that an instance that missed the
	// activation (or starts later) reads the same version.
	r.Stage = len(r.Policy.Stages) - 1
	r.Cohort = Cohort{Buckets: allBuckets()}
	if err := c.moveForward(ctx, r); err != nil {
		return nil, false, err
	}
	flipped(rec, r, now, c.rules())
	return nil, true, nil
}

// announced records that the staged pointer was published.
func announced(r *Rollout, now time.Time) {
	r.Announced = true
	r.Updated = now
	r.log(now, fmt.Sprintf("v%d announced as staged", r.Version))
}

// judgeStaging judges a strict rollout's staging on the live reports: it
// halts when an instance failed to stage the version or some did not
// confirm by the wait's end, waits (saying for whom) while instances have
// not confirmed or fewer than min_instances report, and otherwise says flip.
func judgeStaging(rec *Record, r *Rollout, reports []cuecast.Report, now time.Time, ru rules) (audits []AuditEntry, changed, flip bool) {
	// Every live instance must confirm, those not heard yet included; one
	// that stops reporting while it is waited for blocks the flip until
	// the timeout, as one that is live does (issue 15, item 11).
	reports = withGone(rec.Config, reports, r.Unconfirmed)
	u := unstaged(reports, r.Version)
	missing, failed, live := u.missing, u.failed, distributor.Weigh(reports)
	changed = r.confirm(u.missingOne, now)
	st := r.Policy.Stages[0]
	if n := unheard(reports); u.nFailed == 0 && n > 0 && !now.Before(r.WaitUntil) {
		// Just started (serve restarted after the wait's end): nothing is
		// known yet of what these hold, so they do not halt the cutover
		// until heard, or read from the stream a heartbeat and a quarter
		// after the controller began keeping the reports (issue 32, item 3).
		// A region that stopped summarising is waited for the same way
		// until its summary expires (distributor.LostHeartbeats).
		note := fmt.Sprintf("waiting to hear %d of %d live instances before judging the staging (at most %s after the controller started)",
			n, live, ru.heartbeat*5/4)
		if note != r.Note {
			r.Note, r.Updated = note, now
			return nil, true, false
		}
		return nil, changed, false
	}
	if u.nFailed > 0 || (u.nMissing > 0 && !now.Before(r.WaitUntil)) {
		why := fmt.Sprintf("strict cutover of v%d blocked: ", r.Version)
		if u.nFailed > 0 {
			why += fmt.Sprintf("%d instances failed to stage it (%s)", u.nFailed, list(failed, 5))
		} else {
			why += fmt.Sprintf("%d instances did not confirm within %s (%s)", u.nMissing, ru.applyTimeout, list(missing, 10))
		}
		return haltStaging(rec, r, why, now, ru), true, false
	}
	// Too few live instances for min_instances, every one of them staged:
	// wait for more until the wait ends, then flip with those there are
	// (docs/ROLLOUT.md, "Small fleets and the first version"). With no live
	// instance at all there is nobody to wait for: flip at once, as a
	// relaxed stage's wait ends at once (issue 33, item 10).
	short := live > 0 && live < st.MinInstances
	if u.nMissing > 0 || (short && now.Before(r.WaitUntil)) {
		note := fmt.Sprintf("staged on %d of %d live instances; waiting for %s", live-u.nMissing, live, list(missing, 10))
		if u.nMissing == 0 {
			note = fmt.Sprintf("staged on all %d live instances, but the policy needs %d; it flips with them at %s unless more join",
				live, st.MinInstances, r.WaitUntil.Format(time.RFC3339))
		}
		if note != r.Note {
			r.Note = note
			r.Updated = now
			return nil, true, false
		}
		return nil, changed, false
	}
	return nil, changed, true
}

// haltStaging halts a strict rollout's staging (why) before its flip.
func haltStaging(rec *Record, r *Rollout, why string, now time.Time, ru rules) []AuditEntry {
	r.State = StateHalted
	r.Reason = why
	r.Reverted = true // nothing switched: no pointer to move back
	r.Note = ""
	r.Updated = now
	r.log(now, "halted: "+why)
	return []AuditEntry{{At: now, Actor: ru.actor, Action: "halt", Config: rec.Config, Version: r.Version, Stage: "staging", Reason: why}}
}

// staging is what unstaged finds: the instances in reports that have not
// staged (nor applied) the version, with why when it is not plain
// (stopped reporting, not heard yet), and those that failed to stage it,
// each listed once per report (named: a report made from a summary
// stands for several) and counted by instance; missingOne are the missing
// instances reported one by one, which the controller follows by name.
type staging struct {
	missing, failed   []string
	nMissing, nFailed int
	missingOne        []string
}

// unstaged measures reports against version v, sorted.
func unstaged(reports []cuecast.Report, v uint64) staging {
	var s staging
	miss := func(rp cuecast.Report, why string) {
		s.missing = append(s.missing, named(rp)+why)
		s.nMissing += rp.Weight()
		if followed(rp) {
			s.missingOne = append(s.missingOne, rp.Instance)
		}
	}
	for _, rp := range reports {
		switch {
		case distributor.Unheard(rp):
			miss(rp, " (not heard yet)")
		case rp.Staged == v || rp.Version == v:
		case applyFailure(rp.LastError, v):
			s.failed = append(s.failed, named(rp)+": "+rp.LastError)
			s.nFailed += rp.Weight()
		case rp.LastError == goneError:
			miss(rp, " (stopped reporting)")
		default:
			miss(rp, "")
		}
	}
	slices.Sort(s.missing)
	slices.Sort(s.missingOne)
	return s
}

// activated logs that a strict rollout's activation pointer was written,
// with live instances reporting.
func activated(r *Rollout, live int, now time.Time) {
	if live == 0 {
		r.log(now, "activated at once: no live instance reports on the config")
		return
	}
	if st := r.Policy.Stages[0]; live < st.MinInstances {
		r.log(now, fmt.Sprintf("only %d of the %d live instances min_instances asks for, and no more joined", live, st.MinInstances))
	}
	r.log(now, fmt.Sprintf("activated on %d live instances at once", live))
}

// flipped records that the cohort pointers of every bucket followed the
// activation: from here the rollout is a relaxed one at its last stage,
// held and health-checked.
func flipped(rec *Record, r *Rollout, now time.Time, ru rules) {
	rec.Floor, rec.FloorChecksum = r.Version, r.Checksum
	r.State = StateWaiting
	r.Unconfirmed = nil
	r.StageStarted = now
	r.WaitUntil = now.Add(ru.applyTimeout)
	r.Note = ""
	r.Updated = now
}
