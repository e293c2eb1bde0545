package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
)

// Verb names an operator action.
type Verb string

// The operator actions, as the CLI's verbs, the dashboard's
// /api/rollouts/{verb}/… and the audit stream's Action name them.
const (
	VerbAdvance  Verb = "advance"
	VerbHalt     Verb = "halt"
	VerbResume   Verb = "resume"
	VerbRollback Verb = "rollback"
	VerbUnpin    Verb = "unpin"
)

// Verbs lists the operator actions in the order the CLI and the dashboard
// offer them.
func Verbs() []Verb { return []Verb{VerbAdvance, VerbHalt, VerbResume, VerbRollback, VerbUnpin} }

// ParseVerb returns the operator action named s, or an error wrapping
// ErrUnknownVerb that lists them.
func ParseVerb(s string) (Verb, error) {
	names := make([]string, 0, len(Verbs()))
	for _, v := range Verbs() {
		if string(v) == s {
			return v, nil
		}
		names = append(names, string(v))
	}
	return "", fmt.Errorf("%w %q: want one of %s", ErrUnknownVerb, s, strings.Join(names, ", "))
}

// Act carries out a, the one way the CLI and the dashboard steer rollouts,
// with its defaults: a rollback with no Version goes to the version the
// current rollout falls back to (ErrState when there is none), a rollback
// is always an emergency, and Emergency means nothing to halt, resume and
// unpin. It returns what the named method returns, ErrUnknownVerb for a
// Verb it does not know, and the config's record as the action left it.
func (c *Controller) Act(ctx context.Context, a Action) (Record, error) {
	cfg := a.Config
	switch a.Verb {
	case VerbAdvance:
		return c.Advance(ctx, cfg, a)
	case VerbHalt:
		a.Emergency = false
		return c.Halt(ctx, cfg, a)
	case VerbResume:
		a.Emergency = false
		return c.Resume(ctx, cfg, a)
	case VerbUnpin:
		a.Emergency = false
		return c.Unpin(ctx, cfg, a)
	case VerbRollback:
		to, err := c.rollbackTarget(ctx, a)
		if err != nil {
			return Record{}, err
		}
		return c.Rollback(ctx, cfg, to, a)
	}
	_, err := ParseVerb(string(a.Verb))
	return Record{}, fmt.Errorf("%s: %w", cfg, err)
}

// rollbackTarget is the version a's rollback goes to: a.Version, or the
// version the current rollout falls back to.
func (c *Controller) rollbackTarget(ctx context.Context, a Action) (uint64, error) {
	if a.Version > 0 {
		return a.Version, nil
	}
	if err := a.Config.Validate(); err != nil {
		return 0, fmt.Errorf("rollback %s: %w", a.Config, err)
	}
	rec, err := c.Record(ctx, a.Config)
	if err != nil {
		return 0, fmt.Errorf("rollback %s to the previous version: %w", a.Config, err)
	}
	if rec.Current == nil || rec.Current.From == 0 {
		return 0, fmt.Errorf("rollback %s: no previous version known; name the version: %w", a.Config, ErrState)
	}
	return rec.Current.From, nil
}

// act applies an operator action to cfg's record by compare-and-swap,
// records it in the audit stream, then carries out its pointer moves.
//
// A controller without Policies (the CLI's) cannot sign pointers: it records
// the action and waits until the running controller (in serve, which holds
// the signing key) has carried it out, as done says.
func (c *Controller) act(ctx context.Context, cfg cuecast.ConfigPath, verb string, a Action, change func(*Record) (AuditEntry, error), done func(Record) bool) (Record, error) {
	if err := cfg.Validate(); err != nil {
		return Record{}, fmt.Errorf("%s %s: %w", verb, cfg, err)
	}
	if strings.TrimSpace(a.Reason) == "" {
		return Record{}, fmt.Errorf("%s %s: %w", verb, cfg, ErrNoReason)
	}
	if a.Actor == "" {
		a.Actor = "unknown"
	}
	if err := c.record(ctx, cfg, verb, a, change); err != nil {
		return Record{}, err
	}
	if c.pol == nil {
		return c.await(ctx, cfg, verb, done)
	}
	c.mu.Lock()
	err := c.settle(ctx, cfg)
	c.mu.Unlock()
	if err != nil {
		return Record{}, fmt.Errorf("%s %s: recorded; the controller in serve will retry: %w", verb, cfg, err)
	}
	rec, _, err := c.load(ctx, cfg)
	if err != nil {
		return Record{}, fmt.Errorf("%s %s: %w", verb, cfg, err)
	}
	return rec, nil
}

// record writes an operator's change by compare-and-swap and audits it.
func (c *Controller) record(ctx context.Context, cfg cuecast.ConfigPath, verb string, a Action, change func(*Record) (AuditEntry, error)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for attempt := 1; ; attempt++ {
		rec, rev, err := c.load(ctx, cfg)
		if err != nil {
			return fmt.Errorf("%s %s: %w", verb, cfg, err)
		}
		e, err := change(&rec)
		if err != nil {
			return fmt.Errorf("%s %s: %w", verb, cfg, err)
		}
		if _, err := c.save(ctx, rec, rev); err != nil {
			if errors.Is(err, cuecast.ErrConflict) && attempt < 50 {
				// The running controller writes the record as the rollout
				// moves; try again on the fresh one.
				continue
			}
			return fmt.Errorf("%s %s: %w", verb, cfg, err)
		}
		e.At = c.o.Now().UTC()
		e.Actor, e.Action, e.Config, e.Reason, e.Emergency = a.Actor, verb, cfg, a.Reason, a.Emergency || e.Emergency
		if err := c.audit(ctx, e); err != nil {
			return fmt.Errorf("%s %s: done, but %w", verb, cfg, err)
		}
		return nil
	}
}

func current(rec *Record) (*Rollout, error) {
	if rec.Current == nil {
		return nil, fmt.Errorf("%w for %s", ErrNoRollout, rec.Config)
	}
	return rec.Current, nil
}

// Halt stops the current rollout and moves its cohort back to the previous
// version. It returns ErrNoRollout, ErrNoReason, or ErrState when the rollout
// is not active.
func (c *Controller) Halt(ctx context.Context, cfg cuecast.ConfigPath, a Action) (Record, error) {
	return c.act(ctx, cfg, "halt", a, func(rec *Record) (AuditEntry, error) {
		r, err := current(rec)
		if err != nil {
			return AuditEntry{}, err
		}
		if !r.State.Active() {
			return AuditEntry{}, fmt.Errorf("%w: v%d is %s", ErrState, r.Version, r.State)
		}
		now := c.o.Now().UTC()
		r.State, r.Reason, r.Reverted, r.Note, r.Updated = StateHalted, "operator "+a.Actor+": "+a.Reason, false, "", now
		if r.Consistency == cuecast.Strict && r.Stage == 0 {
			r.Reverted = true // staging switched nobody
		}
		r.log(now, r.Reason)
		return AuditEntry{Version: r.Version, Stage: r.StageName()}, nil
	}, func(rec Record) bool {
		return rec.Current == nil || rec.Current.State != StateHalted || rec.Current.Reverted
	})
}

// Resume restarts a halted rollout at the stage it halted in: its pointers
// move to the version again and the stage's wait and hold start over. It
// returns ErrNoRollout, ErrNoReason, or ErrState when it is not halted.
func (c *Controller) Resume(ctx context.Context, cfg cuecast.ConfigPath, a Action) (Record, error) {
	return c.act(ctx, cfg, "resume", a, func(rec *Record) (AuditEntry, error) {
		r, err := current(rec)
		if err != nil {
			return AuditEntry{}, err
		}
		if r.State != StateHalted {
			return AuditEntry{}, fmt.Errorf("%w: v%d is %s, not halted", ErrState, r.Version, r.State)
		}
		r.Reason = ""
		now := c.o.Now().UTC()
		if r.Consistency == cuecast.Strict && r.Stage == 0 {
			r.State, r.Announced, r.WaitUntil, r.Note, r.Updated = StateStaging, false, now.Add(c.o.ApplyTimeout), "", now
			r.log(now, "resumed by "+a.Actor)
		} else {
			c.enterStage(r, r.Stage, nil, now)
		}
		return AuditEntry{Version: r.Version, Stage: r.StageName()}, nil
	}, moved)
}

// moved: the running controller has written the pointers of the stage an
// operator moved the rollout to.
func moved(rec Record) bool {
	r := rec.Current
	return r == nil || (r.State != StateMoving && (r.State != StateStaging || r.Announced))
}

// Advance moves the current (active or halted) rollout to its next stage
// without waiting for the hold. With a.Emergency it skips every remaining
// hold and goes to the last stage at once. It returns ErrNoRollout,
// ErrNoReason, or ErrState for a finished rollout.
func (c *Controller) Advance(ctx context.Context, cfg cuecast.ConfigPath, a Action) (Record, error) {
	return c.act(ctx, cfg, "advance", a, func(rec *Record) (AuditEntry, error) {
		r, err := current(rec)
		if err != nil {
			return AuditEntry{}, err
		}
		if !r.State.Active() && r.State != StateHalted {
			return AuditEntry{}, fmt.Errorf("%w: v%d is %s", ErrState, r.Version, r.State)
		}
		now := c.o.Now().UTC()
		from := r.StageName()
		next := r.Stage + 1
		if a.Emergency {
			r.Emergency = true
			next = len(r.Policy.Stages) - 1
		}
		next = min(next, len(r.Policy.Stages)-1)
		r.Reason = ""
		r.log(now, fmt.Sprintf("advanced by %s: %s", a.Actor, a.Reason))
		c.enterStage(r, next, nil, now)
		return AuditEntry{Version: r.Version, Stage: from, Detail: "to stage " + r.StageName()}, nil
	}, moved)
}

// Rollback points every cohort bucket at version to (retained, older than
// the one running) with the rollback flag, so instances go backwards, and
// pins the config there: later versions are recorded as pending, not rolled
// out, until a version with the pinned content arrives or Unpin. Any rollout
// in flight ends as rolled back. It returns cuecast.ErrNotFound or
// cuecast.ErrPurged for a version no longer retained, and ErrNoReason.
func (c *Controller) Rollback(ctx context.Context, cfg cuecast.ConfigPath, to uint64, a Action) (Record, error) {
	v, err := c.version(ctx, cfg, to)
	if err != nil {
		return Record{}, fmt.Errorf("rollback %s to v%d: %w", cfg, to, err)
	}
	if v.Deleted {
		return Record{}, fmt.Errorf("rollback %s to v%d: it is a deletion; pick a version with content: %w", cfg, to, ErrState)
	}
	return c.act(ctx, cfg, "rollback", Action{Actor: a.Actor, Reason: a.Reason, Emergency: true}, func(rec *Record) (AuditEntry, error) {
		now := c.o.Now().UTC()
		detail := ""
		if r := rec.Current; r != nil && (r.State.Active() || r.State == StateHalted) {
			r.State, r.Reason, r.Note, r.Updated = StateRolledBack, fmt.Sprintf("rolled back to v%d by %s: %s", to, a.Actor, a.Reason), "", now
			r.log(now, r.Reason)
			detail = fmt.Sprintf("ended the rollout of v%d", r.Version)
		}
		rec.Pin = &Pin{Version: to, Checksum: v.Checksum, Actor: a.Actor, Reason: a.Reason, At: now}
		rec.Stable, rec.StableChecksum = to, v.Checksum
		return AuditEntry{Version: to, Detail: detail}, nil
	}, func(rec Record) bool { return rec.Pin == nil || rec.Pin.Applied })
}

// Unpin lifts the pin a rollback set; the newest version held back (if any)
// then starts its rollout in the running controller. It returns
// ErrNotPinned and ErrNoReason.
func (c *Controller) Unpin(ctx context.Context, cfg cuecast.ConfigPath, a Action) (Record, error) {
	return c.act(ctx, cfg, "unpin", a, func(rec *Record) (AuditEntry, error) {
		if rec.Pin == nil {
			return AuditEntry{}, fmt.Errorf("%w: %s", ErrNotPinned, cfg)
		}
		pinned := rec.Pin.Version
		rec.Pin = nil
		detail := "no version pending"
		if rec.Pending > 0 {
			detail = fmt.Sprintf("v%d pending starts its rollout", rec.Pending)
		}
		return AuditEntry{Version: pinned, Detail: detail}, nil
	}, func(rec Record) bool { return rec.Pending == 0 && moved(rec) })
}

// await polls cfg's record until done holds, for a controller that cannot
// carry actions out itself. It gives up after Options.AwaitTimeout with an
// error saying the action is recorded but not yet carried out.
func (c *Controller) await(ctx context.Context, cfg cuecast.ConfigPath, verb string, done func(Record) bool) (Record, error) {
	deadline := time.Now().Add(c.o.AwaitTimeout)
	for {
		rec, _, err := c.load(ctx, cfg)
		if err != nil {
			return Record{}, fmt.Errorf("%s %s: %w", verb, cfg, err)
		}
		if done(rec) {
			return rec, nil
		}
		if time.Now().After(deadline) {
			return rec, fmt.Errorf("%s %s: recorded, but not carried out after %s: %w (is `cuecast serve` running?)", verb, cfg, c.o.AwaitTimeout, ErrNotCarriedOut)
		}
		select {
		case <-ctx.Done():
			return rec, fmt.Errorf("%s %s: recorded; %w", verb, cfg, ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}
