package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Distributor is what the controller needs of the distributor: the retained
// versions, the cohort bucket pointers, the instance pointers (for stages
// that name instances or labels) and the live reports.
type Distributor interface {
	Versions(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Version, error)
	SetPointers(ctx context.Context, cfg cuecast.ConfigPath, buckets []int, p cuecast.Pointer) error
	SetInstancePointers(ctx context.Context, cfg cuecast.ConfigPath, instances []string, p cuecast.Pointer) error
	Reports(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Report, error)
}

var _ Distributor = (*distributor.Distributor)(nil)

// Options configures a Controller. The zero value is usable.
type Options struct {
	// Interval is how often active rollouts are evaluated; default 1s.
	Interval time.Duration
	// Heartbeat is the instances' report interval; a report is live for four
	// of them. Default 15s; it must match the distributor's and clients'.
	Heartbeat time.Duration
	// ApplyTimeout bounds how long a stage waits for its instances to apply
	// the version; an instance still not on it then counts as failing to
	// apply. Default 5m.
	ApplyTimeout time.Duration
	// AwaitTimeout bounds how long an operator action on a controller
	// without Policies waits for the running one to carry it out; default 30s.
	AwaitTimeout time.Duration
	// Replicas of the KV bucket and audit stream; default 1.
	Replicas int
	// Actor names the controller in the audit stream; default
	// "cuecast-controller".
	Actor string
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// DefaultOptions returns Options with every default filled in.
func DefaultOptions() Options {
	var o Options
	o.fill()
	return o
}

func (o *Options) fill() {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.ApplyTimeout == 0 {
		o.ApplyTimeout = 5 * time.Minute
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.AwaitTimeout == 0 {
		o.AwaitTimeout = 30 * time.Second
	}
	if o.Actor == "" {
		o.Actor = "cuecast-controller"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.Interval < 0:
		return fmt.Errorf("validate options: interval %s: want a positive duration", o.Interval)
	case o.Heartbeat < 0:
		return fmt.Errorf("validate options: heartbeat %s: want a positive duration", o.Heartbeat)
	case o.ApplyTimeout < 0:
		return fmt.Errorf("validate options: apply timeout %s: want a positive duration", o.ApplyTimeout)
	case o.Replicas < 0 || o.Replicas > 5:
		return fmt.Errorf("validate options: replicas %d: want 1-5", o.Replicas)
	}
	return nil
}

// Controller rolls versions out stage by stage. Deploy starts a rollout; Run
// steps the active ones until its context is cancelled. The operator methods
// (Halt, Resume, Advance, Rollback, Unpin) work on a Controller that is not
// running too: the CLI uses one to change the shared state, and the running
// controller in serve carries on from it. All state is in JetStream, written
// by compare-and-swap, so a restarted controller continues where the last
// one stopped.
type Controller struct {
	nc          *nats.Conn
	js          jetstream.JetStream
	kv          jetstream.KeyValue
	auditStream jetstream.Stream
	d           Distributor
	pol         Policies
	o           Options
	log         *slog.Logger

	mu    sync.Mutex // one transition at a time in this process
	fleet *fleet     // set while Run runs
	fmu   sync.Mutex
	ownMu sync.Mutex
	own   map[string]uint64 // last revision this controller wrote, per key
}

// New opens (creating when needed) the rollout KV bucket and the audit
// stream. pol may be nil for a controller used only for operator actions and
// status: it then never starts a rollout itself (Deploy returns an error).
func New(ctx context.Context, nc *nats.Conn, d Distributor, pol Policies, o Options) (*Controller, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new rollout controller: %w", err)
	}
	o.fill()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("new rollout controller: %w", err)
	}
	kv, st, err := openStore(ctx, js, o.Replicas)
	if err != nil {
		return nil, fmt.Errorf("new rollout controller: %w", err)
	}
	return &Controller{nc: nc, js: js, kv: kv, auditStream: st, d: d, pol: pol, o: o, log: o.Logger, own: map[string]uint64{}}, nil
}

// Open opens the existing rollout KV bucket and audit stream without
// creating or updating them, which needs no right to manage streams: the
// operator's credentials can (docs/SECURITY.md). It returns an error
// wrapping jetstream.ErrBucketNotFound or jetstream.ErrStreamNotFound when
// serve has not created them yet.
func Open(ctx context.Context, nc *nats.Conn, d Distributor, pol Policies, o Options) (*Controller, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("open rollout controller: %w", err)
	}
	o.fill()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("open rollout controller: %w", err)
	}
	kv, err := js.KeyValue(ctx, Bucket)
	if err != nil {
		return nil, fmt.Errorf("open rollout controller: bucket %s: %w", Bucket, err)
	}
	st, err := js.Stream(ctx, AuditStream)
	if err != nil {
		return nil, fmt.Errorf("open rollout controller: stream %s: %w", AuditStream, err)
	}
	return &Controller{nc: nc, js: js, kv: kv, auditStream: st, d: d, pol: pol, o: o, log: o.Logger, own: map[string]uint64{}}, nil
}

// Deploy starts v's rollout (it is the tailer's Deployer). It is idempotent:
// a version already rolling out, rolled out, or older than the current
// rollout is left alone. A rollout in flight for an older version is
// superseded: the new one starts at stage 1 and cohorts not yet moved stay
// where they are. A pinned config records v as pending instead, unless v's
// content equals the pinned version's, which lifts the pin. Deploy moves the
// first stage's pointers before returning.
func (c *Controller) Deploy(ctx context.Context, v cuecast.Version) error {
	if err := v.Config.Validate(); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	if c.pol == nil {
		return fmt.Errorf("deploy %s@%d: controller has no policies", v.Config, v.Version)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if v.Checksum == "" {
		sv, err := c.version(ctx, v.Config, v.Version)
		if err != nil {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		v = sv
	}
	for attempt := 1; ; attempt++ {
		rec, rev, err := c.load(ctx, v.Config)
		if err != nil {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		audits, changed, err := c.start(ctx, &rec, rev, v)
		if err != nil {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		if changed {
			if _, err := c.save(ctx, rec, rev); err != nil {
				if errors.Is(err, cuecast.ErrConflict) && attempt < 5 {
					continue
				}
				return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
			}
			c.recordAll(ctx, audits)
		}
		return c.settle(ctx, v.Config)
	}
}

// start decides what v does to rec: nothing, a new rollout, a pending
// version behind a pin, or lifting the pin.
func (c *Controller) start(ctx context.Context, rec *Record, rev uint64, v cuecast.Version) ([]AuditEntry, bool, error) {
	now := c.o.Now().UTC()
	if v.Version <= rec.Stable || (rec.Current != nil && v.Version <= rec.Current.Version) {
		return nil, false, nil
	}
	if p := rec.Pin; p != nil {
		if v.Checksum != p.Checksum {
			if rec.Pending >= v.Version {
				return nil, false, nil
			}
			rec.Pending = v.Version
			c.log.Warn("config pinned: new version not rolled out", "config", v.Config, "version", v.Version, "pinned", p.Version)
			return nil, true, nil
		}
		// The commit restored the pinned content: lift the pin and point
		// everyone at the new number for the same bytes.
		r := c.newRollout(v, cuecast.Policy{Stages: []cuecast.Stage{{Name: "restore", Percent: 100}}}, Relaxed, rec, now)
		r.Reason = fmt.Sprintf("v%d restores the pinned content of v%d", v.Version, p.Version)
		c.supersede(rec, r, now)
		rec.Pin, rec.Pending = nil, 0
		return []AuditEntry{{At: now, Actor: c.o.Actor, Action: "unpin", Config: v.Config, Version: v.Version,
			Reason: fmt.Sprintf("commit %s restores the content of pinned v%d", short(v.Commit), p.Version)}}, true, nil
	}
	pol, cons, err := c.pol.Policy(ctx, v)
	if err != nil {
		return nil, false, fmt.Errorf("read policy: %w", err)
	}
	if rev == 0 && rec.Stable == 0 && v.Version > 1 {
		// A config deployed before the controller kept state: its previous
		// version is taken as fully rolled out.
		if pv, err := c.version(ctx, v.Config, v.Version-1); err == nil {
			rec.Stable, rec.StableChecksum = pv.Version, pv.Checksum
		}
	}
	r := c.newRollout(v, pol, cons, rec, now)
	c.supersede(rec, r, now)
	return nil, true, nil
}

func (c *Controller) supersede(rec *Record, r *Rollout, now time.Time) {
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

func (c *Controller) newRollout(v cuecast.Version, pol cuecast.Policy, cons string, rec *Record, now time.Time) *Rollout {
	if cons == "" {
		cons = Relaxed
	}
	r := &Rollout{
		ID: fmt.Sprintf("%s@%d", v.Config, v.Version), Config: v.Config, Version: v.Version, Checksum: v.Checksum,
		Commit: v.Commit, Author: v.Author, From: rec.Stable, FromChecksum: rec.StableChecksum,
		Policy: normalize(pol), Consistency: cons, Started: now,
	}
	if cons == Strict && r.From == 0 {
		// A strict config's first version: nobody runs anything to be
		// inconsistent with, and instances do not look for a staged pointer
		// before the first cohort pointer exists. Everyone gets it at once.
		c.enterStage(r, len(r.Policy.Stages)-1, nil, now)
		r.log(now, "strict: first version, to every instance at once")
		return r
	}
	if cons == Strict {
		r.State = StateStaging
		r.StageStarted = now
		r.WaitUntil = now.Add(c.o.ApplyTimeout)
		r.Updated = now
		r.log(now, "strict: staging on every instance")
		return r
	}
	c.enterStage(r, 0, nil, now)
	return r
}

// enterStage makes stage i current; its cohort is computed from reports
// (for label selectors) when the pointers move.
func (c *Controller) enterStage(r *Rollout, i int, reports []cuecast.Report, now time.Time) {
	r.Stage = i
	r.State = StateMoving
	r.Moved = r.Moved.union(r.Config.Namespace(), r.Cohort)
	r.Cohort = Cohort{}
	r.StageStarted = now
	r.WaitUntil, r.HoldUntil = time.Time{}, time.Time{}
	r.Note = ""
	r.Updated = now
	r.log(now, "stage starts")
}

func (c *Controller) version(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (cuecast.Version, error) {
	vs, err := c.d.Versions(ctx, cfg)
	if err != nil {
		return cuecast.Version{}, err
	}
	for _, v := range vs {
		if v.Version == n {
			return v, nil
		}
	}
	return cuecast.Version{}, fmt.Errorf("version %d of %s is not retained: %w", n, cfg, cuecast.ErrNotFound)
}

// reports returns the live reports on cfg: from the controller's own view
// while Run runs, else from the report stream. warm is false while that view
// may still be missing instances: for one heartbeat (and a quarter) after
// the controller started keeping the config's reports, it decides nothing
// from them. (Reading the report stream instead costs a JetStream consumer
// over every report subject, which at 10,000 instances took seconds of
// server CPU per read on this box and stalled rollbacks.)
func (c *Controller) reports(ctx context.Context, cfg cuecast.ConfigPath) (reports []cuecast.Report, warm bool, err error) {
	c.fmu.Lock()
	f := c.fleet
	c.fmu.Unlock()
	if f != nil {
		if err := f.track(cfg); err != nil {
			return nil, false, err
		}
		rs, warm := f.live(cfg)
		if !warm {
			// Warm early when every instance the report stream knows of has
			// been heard (one stream info request, no consumer).
			if n, err := c.liveCount(ctx, cfg); err == nil && len(rs) >= n {
				warm = true
			}
		}
		return rs, warm, nil
	}
	rs, err := c.d.Reports(ctx, cfg)
	if err != nil {
		return nil, false, fmt.Errorf("read reports: %w", err)
	}
	return rs, true, nil
}

// liveCount is the number of instances with a live report on cfg, from the
// report stream's per-subject state (its reports expire after four
// heartbeats, so every subject holding one is a live instance).
func (c *Controller) liveCount(ctx context.Context, cfg cuecast.ConfigPath) (int, error) {
	st, err := c.js.Stream(ctx, distributor.ReportStream)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", distributor.ReportStream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(cuecast.ReportWildcard(cfg)))
	if err != nil {
		return 0, fmt.Errorf("read %s state: %w", distributor.ReportStream, err)
	}
	return len(info.State.Subjects), nil
}

// needsReports says whether computing stage i's cohort needs the live
// reports (for label selectors).
func needsReports(p cuecast.Policy, i int) bool {
	for j := 0; j <= i && j < len(p.Stages); j++ {
		if len(p.Stages[j].Labels) > 0 {
			return true
		}
	}
	return false
}

// settle runs cfg's record through its transitions until it must wait.
// Pointer moves happen before the state that records them is saved, and are
// idempotent, so a crash or a lost compare-and-swap only repeats them.
func (c *Controller) settle(ctx context.Context, cfg cuecast.ConfigPath) error {
	force := false
	// unrecorded is a stage move whose pointers were written but whose
	// record lost the race to another writer.
	var unrecorded *Rollout
	for range 16 {
		rec, rev, err := c.load(ctx, cfg)
		if err != nil {
			return err
		}
		if rev == 0 {
			return nil
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
			return fmt.Errorf("step rollout of %s: %w", cfg, err)
		}
		if !changed {
			return nil
		}
		if _, err := c.save(ctx, rec, rev); err != nil {
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
			return err
		}
		force = false
		c.recordAll(ctx, audits)
	}
	return nil
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
		// One all-buckets pointer, written even where a bucket runs the
		// pinned version already: being the newest, it also overrides the
		// pointers of instances a stage named (distributor.SetPointers).
		err := c.point(ctx, cfg, Cohort{Buckets: allBuckets()}, cuecast.Pointer{Config: cfg, Version: p.Version, Rollback: true,
			Rollout: "rollback", Reason: p.Reason})
		if err != nil {
			return nil, false, fmt.Errorf("point every instance at pinned v%d: %w", p.Version, err)
		}
		if p.Applied {
			return nil, false, nil
		}
		p.Applied = true
		return nil, true, nil
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
		var reports []cuecast.Report
		if needsReports(r.Policy, r.Stage) {
			rs, warm, err := c.reports(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			if !warm {
				return c.gathering(r, now)
			}
			reports = rs
		}
		r.Cohort = stageCohort(cfg.Namespace(), r.Policy, r.Stage, reports).union(cfg.Namespace(), r.Moved)
		if err := c.moveForward(ctx, r); err != nil {
			return nil, false, err
		}
		r.State = StateWaiting
		r.WaitUntil = now.Add(c.o.ApplyTimeout)
		r.Updated = now
		r.log(now, fmt.Sprintf("v%d on %s", r.Version, describe(r.Cohort)))
		return nil, true, nil
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
		// Moved too: halted while moving to a stage, a rollout's cohort is
		// still empty, and the earlier stages' instances are in Moved.
		back := r.Cohort.union(cfg.Namespace(), r.Moved)
		if r.From > 0 {
			err := c.point(ctx, cfg, back, cuecast.Pointer{Config: cfg, Version: r.From, Rollback: true,
				Rollout: r.ID, Reason: "halted: " + r.Reason})
			if err != nil {
				return nil, false, fmt.Errorf("move halted cohort back to v%d: %w", r.From, err)
			}
		}
		if r.Reverted {
			return nil, false, nil
		}
		r.Reverted = true
		r.Updated = now
		if r.From > 0 {
			r.log(now, fmt.Sprintf("%s back on v%d", describe(back), r.From))
		} else {
			r.log(now, "no earlier version to move the cohort back to; it stays on this one")
		}
		return nil, true, nil
	}
	return nil, false, nil
}

func (c *Controller) moveForward(ctx context.Context, r *Rollout) error {
	err := c.point(ctx, r.Config, r.Cohort, cuecast.Pointer{Config: r.Config, Version: r.Version,
		Rollout: r.ID, Reason: "stage " + r.StageName()})
	if err != nil {
		return fmt.Errorf("move stage %s to v%d: %w", r.StageName(), r.Version, err)
	}
	return nil
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

// describe says what a cohort covers, for a rollout's log.
func describe(co Cohort) string {
	if len(co.Instances) == 0 {
		return fmt.Sprintf("%d buckets", len(co.Buckets))
	}
	return fmt.Sprintf("%d buckets and %d named instances", len(co.Buckets), len(co.Instances))
}

// evaluate judges a waiting or holding stage: halt on a breach, hold when
// too few instances report, advance when the hold has passed.
func (c *Controller) evaluate(ctx context.Context, rec *Record, r *Rollout, now time.Time) ([]AuditEntry, bool, error) {
	reports, warm, err := c.reports(ctx, rec.Config)
	if err != nil {
		return nil, false, err
	}
	if !warm {
		return c.gathering(r, now)
	}
	st := r.Policy.Stages[r.Stage]
	timedOut := !now.Before(r.WaitUntil)
	m := measure(rec.Config.Namespace(), reports, r.Cohort, r.Version, timedOut)
	if why := breach(m, st); why != "" {
		r.State = StateHalted
		r.Reason = why
		r.Reverted = false
		r.Note = ""
		r.Updated = now
		r.log(now, "halted: "+why)
		c.log.Warn("rollout halted", "config", rec.Config, "version", r.Version, "stage", st.Name, "reason", why)
		return []AuditEntry{{At: now, Actor: c.o.Actor, Action: "halt", Config: rec.Config, Version: r.Version,
			Stage: st.Name, Reason: why}}, true, nil
	}
	note := r.Note
	switch {
	case r.State == StateWaiting && len(m.Waiting) > 0 && !timedOut:
		note = fmt.Sprintf("waiting for %d of %d instances to apply v%d: %s", len(m.Waiting), m.Instances, r.Version, list(m.Waiting, 5))
	case r.State == StateWaiting:
		r.State = StateHolding
		hold := time.Duration(st.Hold)
		if r.Emergency {
			hold = 0
		}
		r.HoldUntil = now.Add(hold)
		r.Note = ""
		r.Updated = now
		r.log(now, fmt.Sprintf("%d/%d instances on v%d; holding %s", m.OnTarget, m.Instances, r.Version, hold))
		return nil, true, nil
	case m.Instances < st.MinInstances && !r.Emergency:
		note = fmt.Sprintf("holding: only %d instances report in stage %s, it needs %d to learn anything", m.Instances, st.Name, st.MinInstances)
	case now.Before(r.HoldUntil):
		note = fmt.Sprintf("holding until %s", r.HoldUntil.Format(time.RFC3339))
	default:
		r.Note = ""
		if r.Stage+1 < len(r.Policy.Stages) {
			r.log(now, fmt.Sprintf("passed: %d/%d on v%d, %d unhealthy, %d failing", m.OnTarget, m.Instances, r.Version, m.Unhealthy, m.Failing))
			c.enterStage(r, r.Stage+1, reports, now)
			return nil, true, nil
		}
		r.State = StateComplete
		r.Updated = now
		r.log(now, "complete")
		rec.Stable, rec.StableChecksum = r.Version, r.Checksum
		c.log.Info("rollout complete", "config", rec.Config, "version", r.Version)
		return nil, true, nil
	}
	if note != r.Note {
		r.Note = note
		r.Updated = now
		return nil, true, nil
	}
	return nil, false, nil
}

// gathering notes that the controller is still hearing from the fleet.
func (c *Controller) gathering(r *Rollout, now time.Time) ([]AuditEntry, bool, error) {
	note := fmt.Sprintf("gathering reports: instances report every %s", c.o.Heartbeat)
	if r.Note == note {
		return nil, false, nil
	}
	r.Note, r.Updated = note, now
	return nil, true, nil
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

func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}

// Run evaluates the active rollouts every Options.Interval until ctx is
// cancelled, keeping its own view of the live reports. It returns nil when
// ctx is cancelled, or an error when it cannot subscribe or watch.
func (c *Controller) Run(ctx context.Context) error {
	f := newFleet(4*c.o.Heartbeat, c.o.Now)
	f.subscribe = func(cfg cuecast.ConfigPath) (*nats.Subscription, error) {
		return c.nc.Subscribe(cuecast.ReportWildcard(cfg), f.handle)
	}
	defer f.close()
	c.fmu.Lock()
	c.fleet = f
	c.fmu.Unlock()
	defer func() {
		c.fmu.Lock()
		c.fleet = nil
		c.fmu.Unlock()
	}()

	w, err := c.kv.WatchAll(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil // stopped while starting: a clean stop, not a failure
		}
		return fmt.Errorf("run rollout controller: watch %s: %w", Bucket, err)
	}
	defer func() { _ = w.Stop() }()
	busy := map[string]bool{}
	var lastFull time.Time
	tick := time.NewTicker(c.o.Interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("run rollout controller: watch %s stopped", Bucket)
			}
			if e == nil {
				continue
			}
			var rec Record
			if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &rec) != nil {
				delete(busy, e.Key())
				f.untrack(configOfKey(e.Key()))
				continue
			}
			if needsWork(rec) {
				busy[e.Key()] = true
				if c.ownWrite(e.Key(), e.Revision()) {
					continue
				}
				// Carry out what an operator (or Deploy) wrote now, not at
				// the next tick: a rollback must reach the fleet in seconds.
				c.mu.Lock()
				err := c.settle(ctx, configOfKey(e.Key()))
				c.mu.Unlock()
				if err != nil && ctx.Err() == nil {
					c.log.Error("rollout step failed; retrying", "config", configOfKey(e.Key()), "err", err)
				}
			} else {
				delete(busy, e.Key())
				f.untrack(configOfKey(e.Key()))
			}
		case <-tick.C:
			// A rollout is looked at every tick when one of its instances
			// reported something new, and at least every quarter heartbeat
			// (for deadlines and expired reports) otherwise.
			full := c.o.Now().Sub(lastFull) >= c.o.Heartbeat/4
			if full {
				lastFull = c.o.Now()
			}
			for k := range busy {
				if !full && !f.takeChanged(configOfKey(k)) {
					continue
				}
				c.mu.Lock()
				err := c.settle(ctx, configOfKey(k))
				c.mu.Unlock()
				if err != nil && ctx.Err() == nil {
					c.log.Error("rollout step failed; retrying", "config", configOfKey(k), "err", err)
				}
			}
		}
	}
}

func needsWork(rec Record) bool {
	if rec.Pin != nil {
		return !rec.Pin.Applied
	}
	if rec.Pending > 0 {
		return true
	}
	r := rec.Current
	return r != nil && (r.State.Active() || (r.State == StateHalted && !r.Reverted))
}
