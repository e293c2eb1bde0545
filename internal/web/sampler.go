package web

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/tailer"
)

// snapshot is one sample of everything the pages show. It is immutable once
// published.
type snapshot struct {
	seq uint64
	at  time.Time
	ok  time.Time // last sample without error (this one when err is "")
	err string    // why the fleet could not be read
	// took is how long the sample took, up to its publication: the pace
	// of samples, which readyz allows for (Run waits twice as long).
	took time.Duration

	status  []distributor.ConfigStatus
	reports map[cuecast.ConfigPath][]cuecast.Report
	drift   map[cuecast.ConfigPath][]cuecast.Report
	records map[cuecast.ConfigPath]rollout.Record

	tailer    *tailer.State
	lag       int // -1 unknown
	tailerErr string
}

// versionList caches a config's retained versions, newest first, until a
// newer version appears: versions are immutable.
type versionList struct {
	latest   uint64
	versions []cuecast.Version
}

// Run samples the fleet every Options.Interval until ctx is done; it returns
// nil then. The first sample is taken at once. A sample reads every live
// report, so on a large fleet it can take a while: Run then waits at least
// twice as long as the last sample took, keeping the sampler's share of the
// server's time under a third.
func (s *Server) Run(ctx context.Context) error {
	if s.o.ReportFeed != nil {
		go func() {
			if err := s.o.ReportFeed(ctx, s.onReport); err != nil && ctx.Err() == nil {
				s.log.Error("report feed stopped; propagation is timed by sample", "err", err)
			}
		}()
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-s.poke:
		}
		start := time.Now()
		s.Sample(ctx)
		t.Reset(max(s.o.Interval-time.Since(start), 2*time.Since(start)))
	}
}

// Sample takes one sample now: it reads the fleet, the tailer and the
// rollouts, feeds the metrics and wakes the event streams. Errors are kept in
// the snapshot (readyz and the pages show them) and logged.
func (s *Server) Sample(ctx context.Context) {
	s.sampling.Lock() // one sample at a time, published in order
	defer s.sampling.Unlock()
	parent := ctx
	base := s.baseLimit()
	limit := max(s.limit, base)
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	now := time.Now()
	// Deferred after cancel, so run before it: ctx.Err() is the limit's.
	defer func() { s.limit = nextLimit(limit, base, time.Since(now), ctx.Err() != nil && parent.Err() == nil) }()
	prev, _ := s.current()
	snap := &snapshot{at: now, ok: now, lag: -1}
	if prev != nil {
		snap.seq = prev.seq + 1
	}
	// The rollout records are read before the fleet: a halt the controller
	// wrote while the fleet was being read would otherwise be shown with the
	// reports from before it, without the unhealthy instances it names. They
	// feed the metrics after the fleet read, so that /metrics does not count
	// a halt a whole fleet read before the pages can show it.
	var recs []rollout.Record
	var recsErr error
	if s.o.Rollouts != nil {
		recs, recsErr = s.o.Rollouts.Records(ctx)
	}
	// Stragglers and coverage count each instance against the version its
	// rollout means it to run now (rollout.Record.Intent), from records
	// read again once the fleet's reports are (afterReports), or these, or
	// the last ones read when those reads failed.
	intentRecs := recs
	if recsErr != nil && prev != nil {
		intentRecs = slices.Collect(maps.Values(prev.records))
	}
	after := &afterReports{ctx: ctx, rollouts: s.o.Rollouts, recs: intentRecs}
	if err := s.sampleFleet(ctx, snap, after.intents); err != nil {
		snap.err = err.Error()
		if prev != nil {
			// Keep showing the last good sample, marked stale.
			snap.ok, snap.status, snap.reports, snap.drift = prev.ok, prev.status, prev.reports, prev.drift
		} else {
			snap.ok = time.Time{}
		}
		if parent.Err() == nil {
			s.log.Warn("fleet sample failed", "err", err, "limit", limit)
		}
	} else {
		s.metrics.ObserveFleet(now, s.fleetSamples(snap))
		s.live.reset(now, snap.reports)
		s.syncFlags(ctx, snap.status, after.records())
	}
	if s.o.Rollouts != nil {
		if recsErr != nil {
			if parent.Err() == nil {
				s.log.Warn("rollout sample failed", "err", recsErr, "limit", limit)
			}
			if prev != nil {
				snap.records = prev.records
			}
		} else {
			snap.records = make(map[cuecast.ConfigPath]rollout.Record, len(recs))
			byState := map[string]int{}
			for _, rec := range recs {
				snap.records[rec.Config] = rec
				for _, r := range []*rollout.Rollout{rec.Current, rec.Superseded} {
					switch {
					case r == nil || r.State != rollout.StateHalted:
					case !s.haltsPrimed:
						s.metrics.SeenHalt(haltKey(r))
					default:
						s.metrics.CountHalt(haltKey(r), haltCause(r))
					}
				}
				if rec.Current != nil {
					byState[string(rec.Current.State)]++
				}
			}
			s.metrics.ObserveRollouts(byState)
			s.haltsPrimed = true
		}
	}
	if s.o.Tailer != nil {
		st, err := s.o.Tailer.State(ctx)
		if err != nil {
			snap.tailerErr = err.Error()
		} else {
			snap.tailer = &st
			if s.o.Lag != nil {
				if n, err := s.o.Lag(ctx, st.Cursor, st.From); err == nil {
					snap.lag = n
				} else {
					snap.tailerErr = err.Error()
				}
			}
			ts := metrics.TailerSample{Lag: snap.lag, Halted: st.Rewrite != nil}
			for _, rj := range st.Rejected {
				ids := make([]string, 0, len(rj.Errors))
				for _, e := range rj.Errors {
					ids = append(ids, e.ID)
				}
				ts.Rejected = append(ts.Rejected, metrics.Rejection{Commit: rj.Commit, IDs: ids})
			}
			s.metrics.ObserveTailer(ts)
		}
	}
	snap.took = time.Since(now)
	s.mu.Lock()
	s.snap = snap
	close(s.changed)
	s.changed = make(chan struct{})
	s.mu.Unlock()
	s.insts.drop()
	s.staged.drop()
	if snap.err == "" {
		for _, st := range snap.status {
			if t, ok := s.target(st.Config); ok {
				s.observePropagation(now, st.Config, t)
			}
		}
	}
}

// baseLimit is a sample's usual time limit: five intervals, at least 5 s.
func (s *Server) baseLimit() time.Duration { return max(5*s.o.Interval, 5*time.Second) }

// maxSampleLimit is the longest a sample may take however slow the last
// ones were, so that a server that stopped answering is still found out.
const maxSampleLimit = 2 * time.Minute

// nextLimit is the time limit of the sample after one that had limit and
// took took: twice limit when it ran out of it, else twice what it took,
// between base and maxSampleLimit. With one fixed limit, a fleet slower
// to read than it (a large fleet, a loaded box) was never sampled again:
// every sample ran out the same way, /readyz said "context deadline
// exceeded" and the pages and the fleet gauges stayed on the last sample
// for good (TestSampleOutlastsItsLimit; seen as TestEventsStream/tree and
// TestMetricsDuringRun/tree waiting in vain on a loaded box). Run waits
// twice as long as a sample took before the next, so a slow sample still
// keeps the sampler's share of the server's time under a third.
func nextLimit(limit, base, took time.Duration, ranOut bool) time.Duration {
	next := 2 * took
	if ranOut {
		next = 2 * limit
	}
	return min(max(next, base), max(maxSampleLimit, base))
}

// haltKey identifies one halt of r: its ID and when it halted (the first
// step of the last run of steps of its history in state halted), so that a
// rollout halted, resumed and halted again counts twice, and a halt seen in
// many samples once, even when the controller adds a step while it stays
// halted ("no earlier version to move the cohort back to").
func haltKey(r *rollout.Rollout) string {
	at := r.Updated
	for i := len(r.Log) - 1; i >= 0; i-- {
		if r.Log[i].State != rollout.StateHalted {
			continue
		}
		for i > 0 && r.Log[i-1].State == rollout.StateHalted {
			i--
		}
		at = r.Log[i].At
		break
	}
	return r.ID + "@" + at.UTC().Format(time.RFC3339Nano)
}

// haltCause classifies why a rollout halted into a bounded label:
// "unhealthy" and "apply_failures" (the controller's health checks),
// "strict_stage_failed" and "strict_unconfirmed" (a strict cutover that could
// not stage), or "operator" (anything else: an operator's halt with its own
// words, which stay in the audit stream, not in a label).
func haltCause(r *rollout.Rollout) string {
	why := strings.ToLower(r.Reason)
	switch {
	case strings.Contains(why, "strict cutover") && strings.Contains(why, "failed to stage"):
		return metrics.CauseStrictStageFailed
	case strings.Contains(why, "strict cutover"):
		return metrics.CauseStrictUnconfirmed
	case strings.Contains(why, "instances unhealthy"):
		return metrics.CauseUnhealthy
	case strings.Contains(why, "failed to apply"):
		return metrics.CauseApplyFailures
	}
	return metrics.CauseOperator
}

// afterReports gives a sample's intents from the rollout records as read
// the first time an intent is asked for: StatusAndReports asks once it has
// read the reports, so each instance is counted against a record no older
// than its report. Counted against the records read before the fleet, a stage
// that advanced in between, its new instances already on the new version,
// showed them as not on their intended one: coverage dipped for a sample.
// recs, the records read before, serve when there is no controller or that
// read fails.
type afterReports struct {
	ctx      context.Context
	rollouts Rollouts
	once     sync.Once
	recs     []rollout.Record
	by       distributor.Intents
}

func (a *afterReports) intents(cfg cuecast.ConfigPath, latest cuecast.Version, published time.Time) (distributor.Intent, uint64) {
	a.read()
	return a.by(cfg, latest, published)
}

// records is the records the intents came from, reading them now when no
// intent was asked for.
func (a *afterReports) records() []rollout.Record {
	a.read()
	return a.recs
}

func (a *afterReports) read() {
	a.once.Do(func() {
		if a.rollouts != nil {
			if recs, err := a.rollouts.Records(a.ctx); err == nil {
				a.recs = recs
			}
		}
		a.by = rollout.IntentsOf(a.recs)
	})
}

func (s *Server) sampleFleet(ctx context.Context, snap *snapshot, intents distributor.Intents) error {
	status, reports, err := s.o.Fleet.StatusAndReports(ctx, intents)
	if err != nil {
		return fmt.Errorf("read status: %w", err)
	}
	snap.status = status
	snap.reports = map[cuecast.ConfigPath][]cuecast.Report{}
	for _, r := range reports {
		snap.reports[r.Config] = append(snap.reports[r.Config], r)
	}
	snap.drift = map[cuecast.ConfigPath][]cuecast.Report{}
	for _, st := range status {
		vl, err := s.versions(ctx, st.Config, st.Latest.Version)
		if err != nil {
			return err
		}
		for _, r := range distributor.DriftOf(snap.reports[st.Config], vl.versions, st.Latest.Version) {
			snap.drift[st.Config] = append(snap.drift[st.Config], r.Report)
		}
	}
	return nil
}

// versions returns cfg's retained versions, reading them again only when
// latest is newer than the cached list.
func (s *Server) versions(ctx context.Context, cfg cuecast.ConfigPath, latest uint64) (versionList, error) {
	s.mu.Lock()
	vl, ok := s.vcache[cfg]
	s.mu.Unlock()
	if ok && vl.latest >= latest {
		return vl, nil
	}
	vs, err := s.o.Fleet.Versions(ctx, cfg)
	if err != nil && !errors.Is(err, cuecast.ErrNotFound) {
		return versionList{}, fmt.Errorf("read versions of %s: %w", cfg, err)
	}
	vl = versionList{latest: latest, versions: vs}
	s.mu.Lock()
	s.vcache[cfg] = vl
	s.mu.Unlock()
	return vl, nil
}

func (s *Server) fleetSamples(snap *snapshot) []metrics.ConfigSample {
	out := make([]metrics.ConfigSample, 0, len(snap.status))
	for _, st := range snap.status {
		out = append(out, metrics.ConfigSample{
			Config: st.Config, Target: st.Latest, Instances: st.Instances, OnTarget: st.OnLatest, OnIntended: st.OnIntended,
			Stragglers: len(st.Stragglers), LastKnownGood: len(st.LastKnownGood),
			Drifted: distributor.Weigh(snap.drift[st.Config]), Unhealthy: st.Unhealthy, Failing: st.Failing, Refused: distributor.Weigh(st.Refused),
		})
	}
	return out
}

// current returns the latest snapshot (nil before the first) and a channel
// closed when a newer one is published.
func (s *Server) current() (*snapshot, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.snap, s.changed
}

func (snap *snapshot) statusOf(cfg cuecast.ConfigPath) (distributor.ConfigStatus, bool) {
	i := slices.IndexFunc(snap.status, func(st distributor.ConfigStatus) bool { return st.Config == cfg })
	if i < 0 {
		return distributor.ConfigStatus{}, false
	}
	return snap.status[i], true
}
