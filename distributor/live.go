package distributor

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// LiveHeartbeats is the liveness rule shared by everything that counts
// instances (the rollout controller, `cuecast status`, the dashboard and
// the metrics): an instance is live while its last report on a config is
// younger than LiveHeartbeats heartbeats. The report stream keeps reports
// exactly that long (its max age), so every reader of the stream applies it
// by construction, and the in-memory views (LiveReports) expire reports
// after the same time.
const LiveHeartbeats = 4

// LiveFor is how long a report stays live with the given heartbeat.
func LiveFor(heartbeat time.Duration) time.Duration { return LiveHeartbeats * heartbeat }

// Unheard reports whether r stands for an instance known live from the
// report stream whose report this view has not read yet (LiveReports.Expect):
// it says only that the instance is live, nothing about what it runs. Such
// a report's At is the Unix epoch's first nanosecond (unheardAt), which a
// view never keeps for a report it received: Add and Seed stamp a report
// sent without a later time with its arrival, so that neither a client
// that omits "at" nor one that sends that very time passes for unheard
// (the rollout controller waits for an unheard cohort member; one that
// could stay unheard would stall its rollouts).
func Unheard(r cuecast.Report) bool { return r.At.Equal(unheardAt) }

// unheardAt is the At of a report standing for an unheard instance.
var unheardAt = time.Unix(0, 1).UTC()

// stamp gives r the time at when it carries none later than unheardAt.
func stamp(r *cuecast.Report, at time.Time) {
	if !r.At.After(unheardAt) {
		r.At = at
	}
}

// LiveReports is one config's live reports kept in memory from the core
// NATS messages on cuecast.ReportWildcard, for readers that look many times
// a second (the rollout controller, `cuecast status --wait`): reading the
// report stream instead costs a JetStream consumer and the delivery of every
// report, each time. A report is live for a TTL after it arrived, as it is
// in the report stream, whose max age is that TTL. LiveReports does not
// subscribe itself: WatchReports does for one config, the rollout
// controller for each config it rolls out. It is safe for concurrent use.
type LiveReports struct {
	cfg cuecast.ConfigPath
	ttl time.Duration
	// cfgOK is cfg.Validate() == nil, checked once: no report is on an
	// invalid config.
	cfgOK bool

	mu     sync.Mutex
	byInst map[string]liveReport
	// byRegion holds the regions' summaries of the config (summary.go),
	// each live for ttl after it arrived and unknown after
	// LostHeartbeats heartbeats.
	byRegion map[string]liveSummary
	// oldest is at or before every kept report's and summary's arrival
	// (zero when none is kept), so that expire scans only once something
	// may have expired: a region's summarizer expires every second, and
	// scanning 12,500 instances that each heartbeat refreshed was ~9% of
	// its CPU at 50,000 (docs/SCALING.md).
	oldest time.Time
}

// arrived lowers oldest to at; l.mu is held.
func (l *LiveReports) arrived(at time.Time) {
	if l.oldest.IsZero() || at.Before(l.oldest) {
		l.oldest = at
	}
}

type liveSummary struct {
	s   Summary
	at  time.Time
	raw []byte // as received up to its "at" field
}

type liveReport struct {
	r cuecast.Report
	// at is when the report arrived; it expires ttl later.
	at time.Time
	// raw is the report as received up to its "at" field: a heartbeat
	// that repeats it only refreshes at, without a decode. Nil for a
	// report from the stream (Seed).
	raw []byte
	// seeded marks a report from the stream, which may be newer than a
	// message still queued for Add.
	seeded bool
}

// NewLiveReports returns an empty view of cfg's reports, each live for ttl
// after it arrived.
func NewLiveReports(cfg cuecast.ConfigPath, ttl time.Duration) *LiveReports {
	return &LiveReports{cfg: cfg, ttl: ttl, cfgOK: cfg.Validate() == nil, byInst: map[string]liveReport{}, byRegion: map[string]liveSummary{}}
}

var atField = []byte(`"at":`)

// withoutTime is a report's or a summary's encoding up to its time, the
// last field: two that differ only there repeat each other.
func withoutTime(data []byte) []byte {
	if i := bytes.LastIndex(data, atField); i >= 0 {
		return data[:i]
	}
	return data
}

// Add keeps the report data that arrived at now on instance's report
// subject. It returns whether the report is new: false for a heartbeat that
// repeats the instance's last report but for its time, and for data that is
// not a report on this config by this instance (which it ignores).
func (l *LiveReports) Add(instance string, data []byte, now time.Time) bool {
	_, ok, _ := l.add(instance, data, now)
	return ok
}

// add is Add, which also returns the new report, and DecodeReport's error
// for data it ignores as no report of this instance on this config.
func (l *LiveReports) add(instance string, data []byte, now time.Time) (cuecast.Report, bool, error) {
	raw := withoutTime(data)
	l.mu.Lock()
	if s, ok := l.byInst[instance]; ok && s.raw != nil && bytes.Equal(s.raw, raw) {
		s.at = now
		l.byInst[instance] = s
		l.arrived(now)
		l.mu.Unlock()
		return cuecast.Report{}, false, nil
	}
	l.mu.Unlock()
	if !l.cfgOK {
		return cuecast.Report{}, false, notReportSubject(cuecast.ReportSubject(l.cfg, instance))
	}
	r, err := decodeReport(l.cfg, instance, data)
	if err != nil {
		return cuecast.Report{}, false, err
	}
	stamp(&r, now)
	l.mu.Lock()
	defer l.mu.Unlock()
	// Messages on one subject arrive in order, so only a report from the
	// stream can be newer than a message; then the newer stays.
	if s, ok := l.byInst[instance]; ok && s.seeded && s.r.At.After(r.At) {
		return cuecast.Report{}, false, nil
	}
	l.byInst[instance] = liveReport{r: r, at: now, raw: bytes.Clone(raw)}
	l.arrived(now)
	return r, true, nil
}

// Seed keeps reports read from the report stream at now (Reports). Each
// counts as arrived at its own At, so that it expires when the stream drops
// it; at now when At is unset or later (the instance's clock runs ahead). A
// report already kept that is at least as new by At stays: the read races
// the messages, and a report may come both ways.
func (l *LiveReports) Seed(rs []cuecast.Report, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range rs {
		if r.Config != l.cfg || cuecast.ValidateInstance(r.Instance) != nil || r.Count != 0 {
			continue // a summary's report: SeedSummary keeps summaries
		}
		stamp(&r, now)
		if s, ok := l.byInst[r.Instance]; ok && !r.At.After(s.r.At) {
			continue
		}
		at := r.At
		if at.After(now) {
			at = now
		}
		l.byInst[r.Instance] = liveReport{r: r, at: at, seeded: true}
		l.arrived(at)
	}
}

// Expect adds instances known live from the report stream (the subjects it
// holds a report on) that the view has not heard, as Unheard reports that
// arrived at now: a view started a moment ago must not leave out a live
// instance that happens not to have reported since (a stalled one least of
// all). The caller reads the overdue ones' reports from the stream later
// (Overdue, Seed, Forget), so that each expires when the stream drops it.
func (l *LiveReports) Expect(instances []string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range instances {
		if _, ok := l.byInst[id]; ok || cuecast.ValidateInstance(id) != nil {
			continue
		}
		l.byInst[id] = liveReport{r: cuecast.Report{Instance: id, Config: l.cfg, Healthy: true, At: unheardAt}, at: now}
		l.arrived(now)
	}
}

// Overdue returns the Unheard instances expected for longer than after.
func (l *LiveReports) Overdue(now time.Time, after time.Duration) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for id, s := range l.byInst {
		if Unheard(s.r) && now.Sub(s.at) >= after {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Forget drops an instance from the view (an expected one whose report the
// stream no longer holds).
func (l *LiveReports) Forget(instance string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s, ok := l.byInst[instance]; ok && Unheard(s.r) {
		delete(l.byInst, instance)
	}
}

// AddSummary keeps the summary data that arrived at now on region's
// summary subject of the config. It returns whether the summary is new:
// false for one that repeats the region's last but for its time, and for
// data that is not a summary of this config by this region (DecodeSummary;
// it is ignored).
func (l *LiveReports) AddSummary(region string, data []byte, now time.Time) bool {
	raw := withoutTime(data)
	l.mu.Lock()
	if s, ok := l.byRegion[region]; ok && bytes.Equal(s.raw, raw) {
		s.at = now
		l.byRegion[region] = s
		l.arrived(now)
		l.mu.Unlock()
		return false
	}
	l.mu.Unlock()
	sum, err := DecodeSummary(cuecast.SummarySubject(region, l.cfg), data)
	if err != nil {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.byRegion[region] = liveSummary{s: sum, at: now, raw: bytes.Clone(raw)}
	l.arrived(now)
	return true
}

// SeedSummary keeps a summary read from the report stream, stored at at
// (its age there counts, as a report's does in Seed). A summary already
// kept that arrived later stays.
func (l *LiveReports) SeedSummary(s Summary, at, now time.Time) {
	if s.Config != l.cfg {
		return
	}
	if at.After(now) {
		at = now
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if cur, ok := l.byRegion[s.Region]; ok && !at.After(cur.at) {
		return
	}
	l.byRegion[s.Region] = liveSummary{s: s, at: at}
	l.arrived(at)
}

// Live returns the reports not yet expired at now, in no particular order,
// and forgets the expired ones: each instance's own, and for each region
// whose summary is live, one report per summary group (Summary.Reports),
// Unheard when the summary is overdue (LostHeartbeats).
func (l *LiveReports) Live(now time.Time) []cuecast.Report {
	cutoff := now.Add(-l.ttl)
	lost := now.Add(-l.ttl * LostHeartbeats / LiveHeartbeats)
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]cuecast.Report, 0, len(l.byInst))
	for id, s := range l.byInst {
		if s.at.Before(cutoff) {
			delete(l.byInst, id)
			continue
		}
		out = append(out, s.r)
	}
	for region, s := range l.byRegion {
		if s.at.Before(cutoff) {
			delete(l.byRegion, region)
			continue
		}
		out = append(out, s.s.Reports(s.at.Before(lost))...)
	}
	return out
}

// expire forgets the reports expired at now, as Live does, and returns
// how many instances' own reports are live: what a summarizer needs at
// each tick to see that nothing expired, without copying the reports.
func (l *LiveReports) expire(now time.Time) int {
	cutoff := now.Add(-l.ttl)
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.oldest.IsZero() && !l.oldest.Before(cutoff) {
		return len(l.byInst)
	}
	l.oldest = time.Time{} // lowered again to the oldest kept
	for id, s := range l.byInst {
		if s.at.Before(cutoff) {
			delete(l.byInst, id)
		} else {
			l.arrived(s.at)
		}
	}
	for region, s := range l.byRegion {
		if s.at.Before(cutoff) {
			delete(l.byRegion, region)
		} else {
			l.arrived(s.at)
		}
	}
	return len(l.byInst)
}

// ReportWatcher follows the live reports on one config; see WatchReports.
type ReportWatcher struct {
	d      *Distributor
	cfg    cuecast.ConfigPath
	live   *LiveReports
	sub    *nats.Subscription
	sumSub *nats.Subscription
	status chan nats.Status
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}
}

// WatchReports reads the live reports on cfg once, as Reports does, and then
// follows them on core NATS, so that a caller looking several times a second
// while a rollout is under way costs the server one consumer in all rather
// than one (and the delivery of every report) per look. It subscribes
// before it reads, so that no report falls between the two, and reads again
// whenever the connection comes back, since reports sent meanwhile are lost.
// Reports expire as in the report stream: after its max age, four
// heartbeats.
//
// The watch lasts until ctx is cancelled or Stop is called. WatchReports
// returns an error wrapping cuecast.ErrInvalidPath for an invalid cfg,
// nats.ErrPermissionViolation when the user may not subscribe to the
// reports (a NATS configuration generated before operators could), or the
// read's error.
func (d *Distributor) WatchReports(ctx context.Context, cfg cuecast.ConfigPath) (*ReportWatcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("watch reports: %w", err)
	}
	w := &ReportWatcher{d: d, cfg: cfg, live: NewLiveReports(cfg, d.reportTTL()), done: make(chan struct{})}
	// Summaries first: the server refuses a subscription asynchronously,
	// and the connection keeps the last refusal (below); a configuration
	// that lets the user follow reports but not summaries (generated
	// before regions summarised) has no region to summarise anyway.
	var err error
	w.sumSub, err = d.nc.Subscribe(cuecast.SummaryWildcard(cfg), func(m *nats.Msg) {
		if _, region, ok := cuecast.ParseSummarySubject(m.Subject); ok {
			w.live.AddSummary(region, m.Data, time.Now())
		}
	})
	if err != nil {
		return nil, fmt.Errorf("watch summaries on %s: subscribe: %w", cfg, err)
	}
	subj := cuecast.ReportWildcard(cfg)
	w.sub, err = d.nc.Subscribe(subj, func(m *nats.Msg) {
		if _, inst, ok := cuecast.ParseReportSubject(m.Subject); ok {
			w.live.Add(inst, m.Data, time.Now())
		}
	})
	if err != nil {
		_ = w.sumSub.Unsubscribe()
		return nil, fmt.Errorf("watch reports on %s: subscribe: %w", cfg, err)
	}
	// Registered before the read: a reconnect during it reads again.
	w.status = d.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	err = w.read(ctx)
	if err == nil {
		// The server refuses a subscription asynchronously, before it
		// answers the read's requests sent after it; nats.go keeps the
		// refusal as the connection's last error.
		if lerr := d.nc.LastError(); errors.Is(lerr, nats.ErrPermissionViolation) && strings.Contains(lerr.Error(), `"`+subj+`"`) {
			err = fmt.Errorf("subscribe to %s: %w", subj, lerr)
		}
	}
	if err != nil {
		d.nc.RemoveStatusListener(w.status)
		_ = w.sub.Unsubscribe()
		_ = w.sumSub.Unsubscribe()
		return nil, fmt.Errorf("watch reports: %w", err)
	}
	w.ctx, w.cancel = context.WithCancel(ctx)
	go w.run()
	return w, nil
}

// reportTTL is how long a report stays live: the report stream's max age,
// set from the heartbeat of whoever created the stream (serve), else four
// of this Distributor's heartbeats.
func (d *Distributor) reportTTL() time.Duration {
	if info := d.reports.CachedInfo(); info != nil && info.Config.MaxAge > 0 {
		return info.Config.MaxAge
	}
	return LiveFor(d.o.Heartbeat)
}

// Live returns the live reports on the config, sorted by instance (as
// Reports sorts them). It does no I/O.
func (w *ReportWatcher) Live() []cuecast.Report {
	rs := w.live.Live(time.Now())
	slices.SortFunc(rs, func(a, b cuecast.Report) int { return cmp.Compare(a.Instance, b.Instance) })
	return rs
}

// Stop ends the watch and waits for it. It is safe to call more than once.
func (w *ReportWatcher) Stop() {
	w.cancel()
	<-w.done
}

// read seeds the view from the report stream.
func (w *ReportWatcher) read(ctx context.Context) error {
	rs, err := w.d.readReports(ctx, reportFilter(w.cfg))
	if err != nil {
		return fmt.Errorf("read reports of %s: %w", w.cfg, err)
	}
	sums, err := w.d.Summaries(ctx, w.cfg)
	if err != nil {
		return err
	}
	now := time.Now()
	w.live.Seed(rs, now)
	for _, s := range sums {
		w.live.SeedSummary(s.Summary, s.Stored, now)
	}
	return nil
}

func (w *ReportWatcher) run() {
	defer close(w.done)
	defer w.d.nc.RemoveStatusListener(w.status)
	defer func() { _ = w.sub.Unsubscribe(); _ = w.sumSub.Unsubscribe() }()
	var retry <-chan time.Time
	for {
		select {
		case <-w.ctx.Done():
			return
		case st, ok := <-w.status:
			if !ok || st == nats.CLOSED {
				// No further reports can arrive; the view expires them.
				return
			}
			retry = w.reread()
		case <-retry:
			retry = w.reread()
		}
	}
}

// reread reads the stream again after a reconnect. A failed read is retried
// a second later (the returned channel fires then): the connection may still
// be settling.
func (w *ReportWatcher) reread() <-chan time.Time {
	err := w.read(w.ctx)
	if err == nil || w.ctx.Err() != nil {
		return nil
	}
	w.d.log.Warn("re-reading reports after a reconnect failed; retrying", "config", w.cfg, "err", err)
	return time.After(time.Second)
}
