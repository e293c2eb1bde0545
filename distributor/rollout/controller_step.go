package rollout

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cuecast/cuecast"
)

// The effects of a step: the inputs a transition needs (reports, versions)
// are read, the pointer writes it asks for are made, then the record is
// saved by compare-and-swap and the audit written. The transitions
// themselves are controller_transition.go's.

// settle runs cfg's record through its transitions until it must wait.
// Pointer moves happen before the state that records them is saved, and are
// idempotent, so a crash or a lost compare-and-swap only repeats them.
func (c *Controller) settle(ctx context.Context, cfg cuecast.ConfigPath) error {
	_, _, err := c.settleFrom(ctx, cfg, nil, 0, true)
	return err
}

// settleFrom is settle starting from rec at revision rev (nil: read it).
// current says rec is known to be the stored record (just written or read);
// the running controller's copy from its watch is not, since a write may
// not have reached the watch yet, so from such a copy settleFrom only
// judges a waiting or holding stage (which writes no pointer before its
// compare-and-swap) and reads the record before any step that moves
// pointers: moving them from a stale record would undo another writer's
// later move, with nobody left to redo it once that rollout has ended.
// It continues from each record it saves rather than reading it back, and
// reads after losing a compare-and-swap, so an unchanged rollout costs no
// I/O. It returns the last record and revision it knows (revision 0: none
// stored, or unknown after an error).
func (c *Controller) settleFrom(ctx context.Context, cfg cuecast.ConfigPath, start *Record, startRev uint64, current bool) (Record, uint64, error) {
	force := false
	// unrecorded is a stage move whose pointers were written but whose
	// record lost the race to another writer.
	var unrecorded *Rollout
	var rec Record
	var rev uint64
	if start != nil {
		rec, rev = *start, startRev
		if !current && acts(rec) {
			start = nil
		}
	}
	for range 16 {
		if start == nil {
			var err error
			if rec, rev, err = c.load(ctx, cfg); err != nil {
				return rec, 0, err
			}
		}
		start = nil
		if rev == 0 {
			return rec, 0, nil
		}
		if r := rec.Current; r != nil && unrecorded != nil && r.ID == unrecorded.ID {
			// Whatever the other writer decided (an operator's halt, most
			// likely), the instances we moved run this rollout's version:
			// they belong to its cohort, or a halt would leave them on it.
			r.Cohort = r.Cohort.union(cfg.Namespace(), unrecorded.Cohort)
		}
		unrecorded = nil
		moving := rec.Current != nil && rec.Current.State == StateMoving
		audits, changed, err := c.transition(ctx, &rec, force)
		if err != nil {
			return rec, 0, fmt.Errorf("step rollout of %s: %w", cfg, err)
		}
		if !changed {
			return rec, rev, nil
		}
		n, err := c.save(ctx, rec, rev)
		if err != nil {
			if errors.Is(err, cuecast.ErrConflict) {
				// Someone else (an operator, another controller) changed the
				// record after we moved pointers: redo the effects of what
				// they wrote, which may undo ours.
				force = true
				if moving {
					unrecorded = rec.Current
				}
				continue
			}
			return rec, 0, err
		}
		rev = n
		force = false
		c.recordAll(ctx, audits)
	}
	return rec, rev, nil
}

func (c *Controller) recordAll(ctx context.Context, audits []AuditEntry) {
	for _, e := range audits {
		if err := c.audit(ctx, e); err != nil {
			c.log.Error("audit", "config", e.Config, "action", e.Action, "err", err)
		}
	}
}

// transition performs at most one step of rec: its pointer effect and the
// state change recording it.
func (c *Controller) transition(ctx context.Context, rec *Record, force bool) ([]AuditEntry, bool, error) {
	now := c.o.Now().UTC()
	cfg := rec.Config
	if p := rec.Pin; p != nil && (!p.Applied || force) {
		if err := c.make(ctx, pinMove(rec)); err != nil {
			return nil, false, fmt.Errorf("point every instance at pinned v%d: %w", p.Version, err)
		}
		return nil, pinApplied(rec), nil
	}
	if rec.Pin == nil && rec.Pending > 0 && c.pol != nil {
		v, err := c.version(ctx, cfg, rec.Pending)
		rec.Pending = 0
		if err != nil {
			c.log.Warn("pending version gone", "config", cfg, "err", err)
			return nil, true, nil
		}
		_, _, err = c.start(ctx, rec, 1, v)
		return nil, true, err
	}
	r := rec.Current
	if r == nil {
		return nil, false, nil
	}
	switch r.State {
	case StateMoving:
		return c.stepMoving(ctx, rec, r, now)
	case StateWaiting, StateHolding:
		if force {
			if err := c.moveForward(ctx, r); err != nil {
				return nil, false, err
			}
		}
		return c.evaluate(ctx, rec, r, now)
	case StateStaging:
		return c.stepStrict(ctx, rec, r, now)
	case StateHalted:
		if r.Reverted && !force {
			return nil, false, nil
		}
		if m, ok := backMove(r); ok {
			if err := c.make(ctx, m); err != nil {
				return nil, false, fmt.Errorf("move halted cohort back to v%d: %w", r.From, err)
			}
		}
		return nil, reverted(rec, r, now), nil
	}
	return nil, false, nil
}

// stepMoving moves the pointers of the stage r is moving to: its cohort
// (from the live reports, for label selectors, once every live instance
// was heard), then the stage waits.
func (c *Controller) stepMoving(ctx context.Context, rec *Record, r *Rollout, now time.Time) ([]AuditEntry, bool, error) {
	ns := rec.Config.Namespace()
	var reports []cuecast.Report
	if needsReports(r.Policy, r.Stage) {
		rs, err := c.rolloutReports(ctx, rec.Config, r)
		if err != nil {
			return c.readFailed(rec, r, err, now)
		}
		answered := r.drillAnswered()
		if n := unheard(rs); n > 0 {
			// Label selectors need every live instance's labels.
			return nil, gathering(r, n, now, c.rules()) || answered, nil
		}
		reports = rs
	}
	r.Cohort = stageCohort(ns, r.Policy, r.Stage, reports).union(ns, r.Moved)
	if err := c.moveForward(ctx, r); err != nil {
		return nil, false, err
	}
	movedForward(rec, r, now, c.rules())
	return nil, true, nil
}

func (c *Controller) moveForward(ctx context.Context, r *Rollout) error {
	if err := c.make(ctx, forwardMove(r)); err != nil {
		return fmt.Errorf("move stage %s to v%d: %w", r.StageName(), r.Version, err)
	}
	return nil
}

// make writes a move's pointers (point).
func (c *Controller) make(ctx context.Context, m move) error {
	return c.point(ctx, m.p.Config, m.co, m.p)
}

// point writes p to the cohort's bucket pointers, then to its instance
// pointers. Both writes are idempotent (a pointer already saying p is not
// written again), so a retry after a failure of either repeats nothing
// that succeeded.
func (c *Controller) point(ctx context.Context, cfg cuecast.ConfigPath, co Cohort, p cuecast.Pointer) error {
	if len(co.Buckets) > 0 {
		if err := c.d.SetPointers(ctx, cfg, co.Buckets, p); err != nil {
			return fmt.Errorf("set %d bucket pointers: %w", len(co.Buckets), err)
		}
	}
	if len(co.Instances) > 0 {
		if err := c.d.SetInstancePointers(ctx, cfg, co.Instances, p); err != nil {
			return fmt.Errorf("set %d instance pointers: %w", len(co.Instances), err)
		}
	}
	return nil
}

// evaluate judges a waiting or holding stage: halt on a breach, hold when
// too few instances report, advance when the hold has passed.
func (c *Controller) evaluate(ctx context.Context, rec *Record, r *Rollout, now time.Time) ([]AuditEntry, bool, error) {
	reports, answered, early := c.judgeable(ctx, rec, r, now)
	if early != nil {
		return early.audits, early.changed, early.err
	}
	// Every live instance in the cohort leaves a comparison no baseline.
	alone := 0
	if m := measure(rec.Config.Namespace(), reports, r.Cohort, r.Version, false); m.Outside == 0 {
		alone = m.Instances
	}
	audits, analyzed := c.analyze(ctx, rec, r, alone, now)
	if r.State == StateHalted {
		c.log.Warn("rollout halted", "config", rec.Config, "version", r.Version, "stage", r.StageName(), "reason", r.Reason)
		return audits, true, nil
	}
	more, judged, err := c.judge(rec, r, reports, now)
	return append(audits, more...), analyzed || judged || answered, err
}

// judgeable reads the reports r's step is judged on (rolloutReports), and
// whether a drill-down answered (drillAnswered). A step that is not to be
// judged now gets early, what it returns: the read failed (readFailed), or
// the report stream does not hold yet what the step would rest on
// (stored).
func (c *Controller) judgeable(ctx context.Context, rec *Record, r *Rollout, now time.Time) (reports []cuecast.Report, answered bool, early *stepResult) {
	reports, err := c.rolloutReports(ctx, rec.Config, r)
	if err != nil {
		audits, changed, err := c.readFailed(rec, r, err, now)
		return nil, false, &stepResult{audits, changed, err}
	}
	answered = r.drillAnswered()
	if !c.stored(ctx, rec.Config, reports, now) {
		return nil, answered, &stepResult{changed: answered}
	}
	return reports, answered, nil
}

// stepResult is what a step returns.
type stepResult struct {
	audits  []AuditEntry
	changed bool
	err     error
}

// readFailed is a step whose read of the reports failed with err: a
// drill-down short of some regions is judged by drillShort (the stage
// waits for them, or halts), so that neither the step nor Deploy fails
// for one region's silence; any other error is returned, and the step
// tried again at the next tick.
func (c *Controller) readFailed(rec *Record, r *Rollout, err error, now time.Time) ([]AuditEntry, bool, error) {
	var sd *shortDrill
	if !errors.As(err, &sd) {
		return nil, false, err
	}
	stage := r.StageName()
	audits, changed := drillShort(rec, r, sd.regions, now, c.rules())
	if r.State == StateHalted {
		c.log.Warn("rollout halted", "config", rec.Config, "version", r.Version, "stage", stage, "reason", r.Reason)
	} else {
		c.log.Warn("drill-down short of regions; the stage waits for them", "config", rec.Config, "version", r.Version, "stage", stage, "err", sd.err)
	}
	return audits, changed, nil
}

// judge is judgeStage, logging a halt or the rollout's completion.
func (c *Controller) judge(rec *Record, r *Rollout, reports []cuecast.Report, now time.Time) ([]AuditEntry, bool, error) {
	before, stage := r.State, r.StageName()
	audits, changed := judgeStage(rec, r, reports, now, c.rules())
	switch {
	case r.State == before:
	case r.State == StateHalted:
		c.log.Warn("rollout halted", "config", rec.Config, "version", r.Version, "stage", stage, "reason", r.Reason)
	case r.State == StateComplete:
		c.log.Info("rollout complete", "config", rec.Config, "version", r.Version)
	}
	return audits, changed, nil
}
