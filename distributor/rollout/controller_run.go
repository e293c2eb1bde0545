package rollout

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// Run: the running controller's loop over the bucket's watch and its ticker.

// Run evaluates the active rollouts every Options.Interval until ctx is
// cancelled, keeping its own view of the live reports, and returns nil then
// (an error only when its connection is closed).
// A watch of the bucket that cannot start or that stops (NATS unreachable,
// a request timed out while the link was down) is logged and started
// again, with a growing pause, for as long as ctx lasts: a passing network
// fault must not end the leader's work (serve's Run would return with it).
func (c *Controller) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	f := c.startFleet(ctx)
	defer c.stopFleet(f)
	rn := &runner{c: c, ctx: ctx, f: f, busy: map[string]*known{},
		measured: make(chan measured), slots: make(chan struct{}, maxMeasuring)}
	c.mu.Lock()
	c.running = true
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.running = false
		c.measured = nil
		c.mu.Unlock()
	}()
	// Cancelled first: the measurements under way end with it.
	defer rn.measuring.Wait()
	defer cancel()
	tick := time.NewTicker(c.o.Interval)
	defer tick.Stop()
	for {
		w, err := c.watch(ctx)
		if w == nil {
			return err
		}
		err = rn.follow(w, tick.C)
		_ = w.Stop()
		if err == nil {
			return nil
		}
		c.watchFailures.Add(1)
		c.log.Warn("rollout controller: watch ended; watching again", "bucket", Bucket, "err", err)
	}
}

// watch starts a watch of the whole bucket, retrying with a pause that
// doubles from 100 ms to 5 s while it fails; nil and no error once ctx is
// cancelled, nil and an error when the connection is closed for good
// (nothing to wait for). A new watch replays every record first, which
// update takes like any other: what changed while there was none is seen.
func (c *Controller) watch(ctx context.Context) (jetstream.KeyWatcher, error) {
	pause := 100 * time.Millisecond
	for {
		w, err := c.kv.WatchAll(ctx)
		if err == nil {
			return w, nil
		}
		if ctx.Err() != nil {
			return nil, nil
		}
		if c.nc.IsClosed() {
			return nil, fmt.Errorf("run rollout controller: watch %s: %w", Bucket, err)
		}
		c.watchFailures.Add(1)
		c.log.Warn("rollout controller: cannot watch; retrying", "bucket", Bucket, "in", pause, "err", err)
		select {
		case <-ctx.Done():
			return nil, nil
		case <-time.After(pause):
		}
		pause = min(2*pause, 5*time.Second)
	}
}

// follow takes w's updates and the ticks until ctx is cancelled (nil) or
// w stops (an error).
func (rn *runner) follow(w jetstream.KeyWatcher, tick <-chan time.Time) error {
	for {
		select {
		case <-rn.ctx.Done():
			return nil
		case e, ok := <-w.Updates():
			if !ok {
				if rn.ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("watch %s stopped", Bucket)
			}
			if e != nil {
				rn.update(e)
			}
		case <-tick:
			rn.tick()
			rn.c.ticks.Add(1)
		case m := <-rn.measured:
			rn.took(m)
		}
	}
}

// startFleet starts the running controller's view of the live reports
// (reports reads it while it is set).
func (c *Controller) startFleet(ctx context.Context) *fleet {
	f := newFleet(c.liveFor(ctx), c.o.Now)
	f.subscribe = func(cfg cuecast.ConfigPath) ([]*nats.Subscription, error) {
		var subs []*nats.Subscription
		drop := func() {
			for _, sub := range subs {
				_ = sub.Unsubscribe()
			}
		}
		// The instances' own reports (a single server) and the regions'
		// summaries (a tree): one view counts both.
		for _, subj := range []string{cuecast.ReportWildcard(cfg), cuecast.SummaryWildcard(cfg)} {
			sub, err := c.nc.Subscribe(subj, f.handle)
			if err != nil {
				drop()
				return nil, err
			}
			subs = append(subs, sub)
		}
		// Subscribed at the server before the stream is listed: no
		// report falls between the two.
		if err := c.nc.FlushTimeout(5 * time.Second); err != nil {
			drop()
			return nil, err
		}
		return subs, nil
	}
	c.fmu.Lock()
	c.fleet = f
	c.fmu.Unlock()
	return f
}

func (c *Controller) stopFleet(f *fleet) {
	c.fmu.Lock()
	c.fleet = nil
	c.fmu.Unlock()
	f.close()
}

// runner is Run's state between events.
type runner struct {
	c   *Controller
	ctx context.Context
	f   *fleet
	// busy holds the record of every config with work to do, as last
	// seen in the watch or written here, so that a tick that changes
	// nothing reads nothing; rev 0 means "read it".
	busy     map[string]*known
	lastFull time.Time
	// measured brings the measurements made outside the loop (measure);
	// slots bounds the queries under way; measuring counts the
	// goroutines making them, which Run waits for.
	measured  chan measured
	slots     chan struct{}
	measuring sync.WaitGroup
}

// measured is what one measure of a config's stage got.
type measured struct {
	k   string
	job *inflight
	ms  []measurement
}

// inflight is a measure under way of rollout id's stage.
type inflight struct {
	id     string
	stage  int
	cancel context.CancelFunc
}

// step settles the config of key k from what the runner knows of it.
func (rn *runner) step(k string, kn *known) {
	c := rn.c
	c.mu.Lock()
	var start *Record
	if kn.rev != 0 {
		start = &kn.rec
	}
	rec, rev, err := c.settleFrom(rn.ctx, configOfKey(k), start, kn.rev, false)
	c.mu.Unlock()
	if rev >= kn.rev || rev == 0 {
		kn.rec, kn.rev = rec, rev
	}
	kn.judged = c.o.Now()
	if err != nil && rn.ctx.Err() == nil {
		c.log.Error("rollout step failed; retrying", "config", configOfKey(k), "err", err)
	}
	rn.measure(k, kn)
}

// measure starts measuring the metrics of k's holding stage that are due,
// outside the loop, unless that is under way; it cancels a measure under
// way of a stage k no longer holds (a command halted, advanced or resumed
// it), whose evaluation nobody would take.
func (rn *runner) measure(k string, kn *known) {
	r := kn.rec.Current
	if job := kn.measuring; job != nil {
		if r != nil && r.ID == job.id && r.Stage == job.stage && r.State == StateHolding {
			return
		}
		job.cancel()
		kn.measuring = nil
	}
	if r == nil {
		return
	}
	// A comparison without a baseline was judged in the step, which
	// moved its Next on: it is not due here.
	idx := rn.c.toMeasure(r, rn.c.o.Now(), 0)
	if len(idx) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(rn.ctx)
	job := &inflight{id: r.ID, stage: r.Stage, cancel: cancel}
	kn.measuring = job
	// The goroutine reads its own copy: the loop goes on changing kn.rec.
	cp := *r
	cp.Analysis = append([]MetricState(nil), r.Analysis...)
	now := rn.c.o.Now()
	rn.measuring.Add(1)
	go func() {
		defer rn.measuring.Done()
		defer cancel()
		ms := rn.c.measure(ctx, rn.slots, cp, idx, now)
		select {
		case rn.measured <- measured{k: k, job: job, ms: ms}:
		case <-ctx.Done():
		}
	}()
}

// took hands a measure's measurements to the step of its config, which
// judges them.
func (rn *runner) took(m measured) {
	kn := rn.busy[m.k]
	if kn == nil || kn.measuring != m.job {
		return // forgotten or cancelled since
	}
	kn.measuring = nil
	if len(m.ms) == 0 {
		return
	}
	rn.c.mu.Lock()
	rn.c.putMeasured(configOfKey(m.k), m.ms)
	rn.c.mu.Unlock()
	rn.step(m.k, kn)
}

// update takes a record from the bucket's watch: one with no work to do is
// forgotten, one written by another (an operator, Deploy) is carried out
// now, not at the next tick: a rollback must reach the fleet in seconds.
func (rn *runner) update(e jetstream.KeyValueEntry) {
	k := e.Key()
	var rec Record
	if e.Operation() != jetstream.KeyValuePut || json.Unmarshal(e.Value(), &rec) != nil {
		rn.forget(k)
		return
	}
	kn := rn.busy[k]
	if kn != nil && kn.rev > e.Revision() {
		return // older than what this controller wrote since
	}
	if !needsWork(rec) {
		rn.forget(k)
		return
	}
	if kn == nil {
		kn = &known{}
		rn.busy[k] = kn
	}
	own := rn.c.ownWrite(k, e.Revision())
	kn.rec, kn.rev = rec, e.Revision()
	if !own {
		rn.step(k, kn)
	}
}

func (rn *runner) forget(k string) {
	if kn := rn.busy[k]; kn != nil && kn.measuring != nil {
		kn.measuring.cancel()
	}
	delete(rn.busy, k)
	rn.f.untrack(configOfKey(k))
}

// tick judges, every Interval, each active rollout whose judgement may
// have changed, from the record in memory and the fleet view: one of its
// instances reported something new, or its wait or hold ended since it was
// last judged (so a hold ends within one Interval of its deadline), and
// every quarter heartbeat anyway (reports expire, silent instances are
// read). A tick that changes nothing costs no I/O.
func (rn *runner) tick() {
	now := rn.c.o.Now()
	full := now.Sub(rn.lastFull) >= rn.c.o.Heartbeat/4
	if full {
		rn.lastFull = now
	}
	for k, kn := range rn.busy {
		if full || kn.due(now, rn.f.takeChanged(configOfKey(k))) {
			rn.step(k, kn)
		}
	}
}

// known is a record and its revision as the running controller last saw
// it, and when it was last judged.
type known struct {
	rec    Record
	rev    uint64
	judged time.Time
	// measuring is the measure of its stage's analysis under way.
	measuring *inflight
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
	for _, t := range append([]time.Time{r.WaitUntil, r.HoldUntil, r.EnoughBy}, r.analysisDue()...) {
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
