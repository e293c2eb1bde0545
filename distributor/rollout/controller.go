package rollout

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
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
	// Interval is how often the controller looks at active rollouts: a
	// hold ends, and a wait times out, within one Interval of its
	// deadline. Default 1s.
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
	// readHook, set by tests only, replaces what a read of the bucket
	// returns (to play a replica that has not seen the last write yet).
	readHook func(ctx context.Context, k string, val []byte, rev uint64) ([]byte, uint64, error)
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
// operator's credentials can (docs/SECURITY.md). It reads by direct get
// only and writes records by compare-and-swap publishes, never through
// JetStream's management API, so it works from the operator's account,
// which has none; such a controller cannot Run (ErrReadOnly). It returns
// an error wrapping jetstream.ErrBucketNotFound or
// jetstream.ErrStreamNotFound when serve has not created them yet.
func Open(ctx context.Context, nc *nats.Conn, d Distributor, pol Policies, o Options) (*Controller, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("open rollout controller: %w", err)
	}
	o.fill()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("open rollout controller: %w", err)
	}
	kv, st, err := openDirect(ctx, nc, js)
	if err != nil {
		return nil, fmt.Errorf("open rollout controller: %w", err)
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
			n, err := c.save(ctx, rec, rev)
			if err != nil {
				if errors.Is(err, cuecast.ErrConflict) && attempt < 5 {
					continue
				}
				return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
			}
			rev = n
			c.recordAll(ctx, audits)
		}
		// Settle from the record just written (or read), not from a new
		// read: a replica answering a read may not hold that write yet, and
		// the rollout would then wait for the next tick to move its first
		// stage (issue 15, item 2).
		if rev == 0 {
			return nil
		}
		_, _, err = c.settleFrom(ctx, v.Config, &rec, rev, true)
		return err
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
		// A config deployed before the controller kept state runs what its
		// pointer says: that is its stable version. Versions published but
		// never deployed (a tailer's first batch hands over only each
		// config's newest) are not: taken as stable, they made a strict
		// config's first rollout stage a version behind no cohort pointer,
		// which instances never stage (issue 15, item 4).
		if pv, ok, err := c.deployed(ctx, v.Config, v.Version); err != nil {
			return nil, false, err
		} else if ok {
			rec.Stable, rec.StableChecksum = pv.Version, pv.Checksum
			rec.Floor, rec.FloorChecksum = pv.Version, pv.Checksum
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
	from, fromSum := rec.floor()
	r := &Rollout{
		ID: fmt.Sprintf("%s@%d", v.Config, v.Version), Config: v.Config, Version: v.Version, Checksum: v.Checksum,
		Commit: v.Commit, Author: v.Author, From: from, FromChecksum: fromSum,
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
	r.WaitUntil, r.HoldUntil, r.EnoughBy = time.Time{}, time.Time{}, time.Time{}
	r.Unconfirmed = nil
	r.Note = ""
	r.Updated = now
	r.log(now, "stage starts")
}

// pointerReader is the distributor's read of a cohort pointer.
type pointerReader interface {
	Pointer(ctx context.Context, cfg cuecast.ConfigPath, bucket int) (cuecast.Pointer, error)
}

// deployed returns the version cfg's cohort pointers name (read from bucket
// 0, which the all-buckets pointer of a deploy covers), ok false when it
// has none. With a distributor that cannot read pointers it assumes the
// version before newest was deployed, as the controller always did.
func (c *Controller) deployed(ctx context.Context, cfg cuecast.ConfigPath, newest uint64) (cuecast.Pointer, bool, error) {
	pr, ok := c.d.(pointerReader)
	if !ok {
		pv, err := c.version(ctx, cfg, newest-1)
		return cuecast.Pointer{Config: cfg, Version: pv.Version, Checksum: pv.Checksum}, err == nil, nil
	}
	p, err := pr.Pointer(ctx, cfg, 0)
	if errors.Is(err, cuecast.ErrNotFound) {
		return cuecast.Pointer{}, false, nil
	}
	if err != nil {
		return cuecast.Pointer{}, false, fmt.Errorf("read deployed pointer: %w", err)
	}
	return p, true, nil
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
// while Run runs, else from the report stream. Both follow one liveness
// rule (distributor.LiveHeartbeats). When the view starts keeping a
// config, it lists the instances the report stream holds a report of and
// keeps those it has not heard yet as distributor.Unheard; one still
// unheard a heartbeat and a quarter later (stalled, most likely) has its
// last report read from the stream, and expires with it, as in `cuecast
// status`. So a rollout decides at once, and never from a view that leaves
// out a live instance. (The view, rather than reading the report stream
// with a consumer at each evaluation: at 10,000 instances that read took
// seconds of server CPU and stalled rollbacks.)
func (c *Controller) reports(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Report, error) {
	c.fmu.Lock()
	f := c.fleet
	c.fmu.Unlock()
	if f == nil {
		rs, err := c.d.Reports(ctx, cfg)
		if err != nil {
			return nil, fmt.Errorf("read reports: %w", err)
		}
		return rs, nil
	}
	l, fresh, err := f.track(cfg)
	if err != nil {
		return nil, err
	}
	if fresh {
		ids, err := c.liveInstances(ctx, cfg)
		if err != nil {
			f.untrack(cfg) // try again from the start next time
			return nil, err
		}
		l.Expect(ids, f.now())
	}
	for _, id := range l.Overdue(f.now(), f.ttl*5/16) {
		r, ok, err := c.lastReport(ctx, cfg, id)
		if err != nil {
			return nil, err
		}
		if ok {
			l.Seed([]cuecast.Report{r}, f.now())
		} else {
			l.Forget(id)
		}
	}
	return f.live(cfg), nil
}

// liveInstances lists the instances with a live report on cfg, from the
// report stream's per-subject state (one stream info request, no
// consumer): its reports expire after the liveness time, so every subject
// holding one is a live instance.
func (c *Controller) liveInstances(ctx context.Context, cfg cuecast.ConfigPath) ([]string, error) {
	st, err := c.js.Stream(ctx, distributor.ReportStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil // no distributor created it: no instance reports
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", distributor.ReportStream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(cuecast.ReportWildcard(cfg)))
	if err != nil {
		return nil, fmt.Errorf("read %s state: %w", distributor.ReportStream, err)
	}
	var ids []string
	for subj := range info.State.Subjects {
		if _, id, ok := cuecast.ParseReportSubject(subj); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// lastReport reads instance's last report on cfg from the report stream;
// ok is false when the stream holds none (it expired).
func (c *Controller) lastReport(ctx context.Context, cfg cuecast.ConfigPath, instance string) (cuecast.Report, bool, error) {
	st, err := c.js.Stream(ctx, distributor.ReportStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return cuecast.Report{}, false, nil
	}
	if err != nil {
		return cuecast.Report{}, false, fmt.Errorf("open %s: %w", distributor.ReportStream, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, cuecast.ReportSubject(cfg, instance))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return cuecast.Report{}, false, nil
	}
	if err != nil {
		return cuecast.Report{}, false, fmt.Errorf("read report of %s on %s: %w", instance, cfg, err)
	}
	var r cuecast.Report
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Instance != instance || r.Config != cfg {
		return cuecast.Report{}, false, nil
	}
	if r.At.IsZero() {
		r.At = m.Time // never Unheard once read
	}
	return r, true, nil
}

// liveFor is how long a report stays live: the report stream's max age
// (set by the distributor from its heartbeat), so that the controller, the
// stream and everything reading it follow one rule; LiveFor(Heartbeat)
// when the stream cannot be read.
func (c *Controller) liveFor(ctx context.Context) time.Duration {
	if st, err := c.js.Stream(ctx, distributor.ReportStream); err == nil {
		if info := st.CachedInfo(); info != nil && info.Config.MaxAge > 0 {
			return info.Config.MaxAge
		}
	}
	return distributor.LiveFor(c.o.Heartbeat)
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
		rec.Floor, rec.FloorChecksum = p.Version, p.Checksum
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
			rs, err := c.reports(ctx, cfg)
			if err != nil {
				return nil, false, err
			}
			if n := unheard(rs); n > 0 {
				// Label selectors need every live instance's labels.
				return c.gathering(r, n, now)
			}
			reports = rs
		}
		r.Cohort = stageCohort(cfg.Namespace(), r.Policy, r.Stage, reports).union(cfg.Namespace(), r.Moved)
		if err := c.moveForward(ctx, r); err != nil {
			return nil, false, err
		}
		if len(r.Cohort.Buckets) == cuecast.Buckets {
			rec.Floor, rec.FloorChecksum = r.Version, r.Checksum
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
			// Everyone this rollout moved is back on From, and nobody else
			// was moved since it began: the whole fleet runs From.
			rec.Floor, rec.FloorChecksum = r.From, r.FromChecksum
		}
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
	reports, err := c.reports(ctx, rec.Config)
	if err != nil {
		return nil, false, err
	}
	return c.judge(rec, r, reports, now)
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
//     gets the stage's version from its pointers and is watched.
//
// The note always names the real next event, never a past deadline.
func (c *Controller) judge(rec *Record, r *Rollout, reports []cuecast.Report, now time.Time) ([]AuditEntry, bool, error) {
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
	changed := false
	if r.State == StateWaiting {
		changed = r.confirm(m.Waiting, now)
	}
	short := m.Instances < st.MinInstances && !r.Emergency
	nobody := len(reports) == 0
	if short && r.EnoughBy.IsZero() && r.State == StateHolding {
		// A record written before EnoughBy existed.
		r.EnoughBy = r.HoldUntil.Add(c.o.ApplyTimeout)
	}
	switch {
	case r.State == StateWaiting && len(m.Waiting) > 0 && !timedOut:
		note = fmt.Sprintf("waiting for %d of %d instances to apply v%d: %s", len(m.Waiting), m.Instances, r.Version, list(m.Waiting, 5))
	case r.State == StateWaiting:
		r.State = StateHolding
		r.Unconfirmed = nil
		hold := time.Duration(st.Hold)
		if r.Emergency {
			hold = 0
		}
		r.HoldUntil = now.Add(hold)
		r.EnoughBy = time.Time{}
		if st.MinInstances > 0 {
			r.EnoughBy = r.HoldUntil.Add(c.o.ApplyTimeout)
		}
		r.Note = ""
		r.Updated = now
		r.log(now, fmt.Sprintf("%d/%d instances on v%d; holding %s", m.OnTarget, m.Instances, r.Version, hold))
		return nil, true, nil
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
	default:
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
			c.enterStage(r, r.Stage+1, reports, now)
			return nil, true, nil
		}
		if !short && !nobody {
			passed = ""
		}
		return c.complete(rec, r, now, passed), true, nil
	}
	if note != r.Note {
		r.Note = note
		r.Updated = now
		return nil, true, nil
	}
	return nil, changed, nil
}

// complete ends r's last stage: its version becomes the config's stable
// version and floor. why, when set, is logged before "complete".
func (c *Controller) complete(rec *Record, r *Rollout, now time.Time, why string) []AuditEntry {
	if why != "" {
		r.log(now, why)
	}
	r.State = StateComplete
	r.Note = ""
	r.Updated = now
	r.log(now, "complete")
	rec.Stable, rec.StableChecksum = r.Version, r.Checksum
	rec.Floor, rec.FloorChecksum = r.Version, r.Checksum
	c.log.Info("rollout complete", "config", rec.Config, "version", r.Version)
	return nil
}

// gathering notes that a stage with label selectors waits to hear n live
// instances' reports (their labels) before it fixes its cohort: at most a
// heartbeat and a quarter after the controller started keeping the config's
// reports, when it reads the silent ones' reports from the stream.
func (c *Controller) gathering(r *Rollout, n int, now time.Time) ([]AuditEntry, bool, error) {
	note := fmt.Sprintf("gathering reports: %d live instances not heard yet; label selectors need their labels (at most %s)", n, c.o.Heartbeat*5/4)
	if r.Note == note {
		return nil, false, nil
	}
	r.Note, r.Updated = note, now
	return nil, true, nil
}

// unheard counts the reports standing for instances not heard yet.
func unheard(rs []cuecast.Report) int {
	n := 0
	for _, r := range rs {
		if distributor.Unheard(r) {
			n++
		}
	}
	return n
}

// goneError is the last_error of an instance waited for that stopped
// reporting; it names no version, so it is not itself a failure to apply.
const goneError = "stopped reporting (no report for four heartbeats)"

// withGone adds a report for each instance in ids that has none in
// reports: an instance waited for that stopped reporting.
func withGone(cfg cuecast.ConfigPath, reports []cuecast.Report, ids []string) []cuecast.Report {
	if len(ids) == 0 {
		return reports
	}
	have := make(map[string]bool, len(reports))
	for _, r := range reports {
		have[r.Instance] = true
	}
	for _, id := range ids {
		if !have[id] {
			reports = append(reports, cuecast.Report{Instance: id, Config: cfg, Healthy: true, LastError: goneError, At: time.Unix(0, 0).UTC()})
		}
	}
	return reports
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
	f := newFleet(c.liveFor(ctx), c.o.Now)
	f.subscribe = func(cfg cuecast.ConfigPath) (*nats.Subscription, error) {
		sub, err := c.nc.Subscribe(cuecast.ReportWildcard(cfg), f.handle)
		if err != nil {
			return nil, err
		}
		// Subscribed at the server before the stream is listed: no
		// report falls between the two.
		if err := c.nc.FlushTimeout(5 * time.Second); err != nil {
			_ = sub.Unsubscribe()
			return nil, err
		}
		return sub, nil
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
	// busy holds the record of every config with work to do, as last seen
	// in the watch or written here, so that a tick that changes nothing
	// reads nothing; rev 0 means "read it".
	busy := map[string]*known{}
	step := func(k string, kn *known) {
		c.mu.Lock()
		var start *Record
		if kn.rev != 0 {
			start = &kn.rec
		}
		rec, rev, err := c.settleFrom(ctx, configOfKey(k), start, kn.rev, false)
		c.mu.Unlock()
		if rev >= kn.rev || rev == 0 {
			kn.rec, kn.rev = rec, rev
		}
		kn.judged = c.o.Now()
		if err != nil && ctx.Err() == nil {
			c.log.Error("rollout step failed; retrying", "config", configOfKey(k), "err", err)
		}
	}
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
			kn := busy[e.Key()]
			if kn != nil && kn.rev > e.Revision() {
				continue // older than what this controller wrote since
			}
			if !needsWork(rec) {
				delete(busy, e.Key())
				f.untrack(configOfKey(e.Key()))
				continue
			}
			if kn == nil {
				kn = &known{}
				busy[e.Key()] = kn
			}
			own := c.ownWrite(e.Key(), e.Revision())
			kn.rec, kn.rev = rec, e.Revision()
			if own {
				continue
			}
			// Carry out what an operator (or Deploy) wrote now, not at the
			// next tick: a rollback must reach the fleet in seconds.
			step(e.Key(), kn)
		case <-tick.C:
			// Every Interval, each active rollout whose judgement may have
			// changed is judged, from the record in memory and the fleet
			// view: one of its instances reported something new, or its
			// wait or hold ended since it was last judged (so a hold ends
			// within one Interval of its deadline), and every quarter
			// heartbeat anyway (reports expire, silent instances are read).
			// A tick that changes nothing costs no I/O.
			now := c.o.Now()
			full := now.Sub(lastFull) >= c.o.Heartbeat/4
			if full {
				lastFull = now
			}
			for k, kn := range busy {
				if full || kn.due(now, f.takeChanged(configOfKey(k))) {
					step(k, kn)
				}
			}
		}
	}
}

// known is a record and its revision as the running controller last saw
// it, and when it was last judged.
type known struct {
	rec    Record
	rev    uint64
	judged time.Time
}

// due says whether the record must be judged again at now: it is not a
// waiting, holding or staging rollout (those steps are short, or write
// pointers), a new report arrived, or a deadline passed since the last
// judgement.
func (kn *known) due(now time.Time, newReport bool) bool {
	r := kn.rec.Current
	if kn.rev == 0 || kn.rec.Pin != nil || kn.rec.Pending > 0 || r == nil || newReport {
		return true
	}
	if r.State != StateWaiting && r.State != StateHolding && r.State != StateStaging {
		return true
	}
	for _, t := range [3]time.Time{r.WaitUntil, r.HoldUntil, r.EnoughBy} {
		if !t.IsZero() && !now.Before(t) && kn.judged.Before(t) {
			return true
		}
	}
	return false
}

// acts says whether rec's next step may move pointers before it saves.
func acts(rec Record) bool {
	if rec.Pin != nil || rec.Pending > 0 {
		return true
	}
	r := rec.Current
	return r != nil && r.State != StateWaiting && r.State != StateHolding
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
