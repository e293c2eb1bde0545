package rollout

import (
	"context"
	"fmt"
	"slices"
	"strings"
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
	reports, err := c.reports(ctx, rec.Config)
	if err != nil {
		return nil, false, err
	}
	audits, changed, flip := judgeStaging(rec, r, reports, now, c.rules())
	if !flip {
		return audits, changed, nil
	}
	p := cuecast.Pointer{Config: rec.Config, Version: r.Version, Rollout: r.ID, Reason: "activate"}
	if err := cut.Activate(ctx, rec.Config, p); err != nil {
		return nil, false, err
	}
	activated(r, len(reports), now)
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
	missing, failed := unstaged(reports, r.Version)
	changed = r.confirm(instancesOf(missing), now)
	st := r.Policy.Stages[0]
	if n := unheard(reports); len(failed) == 0 && n > 0 && !now.Before(r.WaitUntil) {
		// Just started (serve restarted after the wait's end): nothing is
		// known yet of what these hold, so they do not halt the cutover
		// until heard, or read from the stream a heartbeat and a quarter
		// after the controller began keeping the reports (issue 32, item 3).
		note := fmt.Sprintf("waiting to hear %d of %d live instances before judging the staging (at most %s after the controller started)",
			n, len(reports), ru.heartbeat*5/4)
		if note != r.Note {
			r.Note, r.Updated = note, now
			return nil, true, false
		}
		return nil, changed, false
	}
	if len(failed) > 0 || (len(missing) > 0 && !now.Before(r.WaitUntil)) {
		why := fmt.Sprintf("strict cutover of v%d blocked: ", r.Version)
		if len(failed) > 0 {
			why += fmt.Sprintf("%d instances failed to stage it (%s)", len(failed), list(failed, 5))
		} else {
			why += fmt.Sprintf("%d instances did not confirm within %s (%s)", len(missing), ru.applyTimeout, list(missing, 10))
		}
		r.State = StateHalted
		r.Reason = why
		r.Reverted = true // nothing switched: no pointer to move back
		r.Note = ""
		r.Updated = now
		r.log(now, "halted: "+why)
		return []AuditEntry{{At: now, Actor: ru.actor, Action: "halt", Config: rec.Config, Version: r.Version, Stage: "staging", Reason: why}}, true, false
	}
	// Too few live instances for min_instances, every one of them staged:
	// wait for more until the wait ends, then flip with those there are
	// (docs/ROLLOUT.md, "Small fleets and the first version"). With no live
	// instance at all there is nobody to wait for: flip at once, as a
	// relaxed stage's wait ends at once (issue 33, item 10).
	short := len(reports) > 0 && len(reports) < st.MinInstances
	if len(missing) > 0 || (short && now.Before(r.WaitUntil)) {
		note := fmt.Sprintf("staged on %d of %d live instances; waiting for %s", len(reports)-len(missing), len(reports), list(missing, 10))
		if len(missing) == 0 {
			note = fmt.Sprintf("staged on all %d live instances, but the policy needs %d; it flips with them at %s unless more join",
				len(reports), st.MinInstances, r.WaitUntil.Format(time.RFC3339))
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

// unstaged lists the instances in reports that have not staged (nor
// applied) version v, sorted, with why when it is not plain (stopped
// reporting, not heard yet), and those that failed to stage it.
func unstaged(reports []cuecast.Report, v uint64) (missing, failed []string) {
	for _, rp := range reports {
		switch {
		case rp.Staged == v || rp.Version == v:
		case applyFailure(rp.LastError, v):
			failed = append(failed, rp.Instance+": "+rp.LastError)
		case rp.LastError == goneError:
			missing = append(missing, rp.Instance+" (stopped reporting)")
		case distributor.Unheard(rp):
			missing = append(missing, rp.Instance+" (not heard yet)")
		default:
			missing = append(missing, rp.Instance)
		}
	}
	slices.Sort(missing)
	return missing, failed
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

// instancesOf strips the " (why)" suffixes of a note's instance list.
func instancesOf(missing []string) []string {
	out := make([]string, len(missing))
	for i, m := range missing {
		out[i], _, _ = strings.Cut(m, " ")
	}
	return out
}
