package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// What the controller reads of the fleet: the live reports of a config, from
// its own view while Run runs, else from the report stream.

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
		if err := c.seedSummaries(ctx, cfg, l, f.now()); err != nil {
			f.untrack(cfg)
			return nil, err
		}
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

// rolloutReports is reports for judging r: when regions summarise the
// config (reports made from summary groups), the instances r's stages
// name or select by label are fetched from the regions and split out of
// the groups (DrillDown), since a cohort holds them by name, not by
// bucket. A region that does not answer within drillTimeout, or leaves
// some of them out, fails the read with a *shortDrill naming the
// regions: the step then waits for them, or halts once they have failed
// for ApplyTimeout (drillShort). Any other failure is a plain error, and
// the step is tried again at the next tick.
func (c *Controller) rolloutReports(ctx context.Context, cfg cuecast.ConfigPath, r *Rollout) ([]cuecast.Report, error) {
	rs, err := c.reports(ctx, cfg)
	if err != nil {
		return rs, err
	}
	if _, ok := NeedsDrillDown(r, rs); !ok {
		return rs, nil
	}
	dt, ok := c.d.(Detailer)
	if !ok {
		return nil, fmt.Errorf("%s: the distributor cannot drill down into the regions' reports", cfg)
	}
	dctx, cancel := context.WithTimeout(ctx, drillTimeout)
	defer cancel()
	dr, err := DrillDown(dctx, dt, cfg, r, rs)
	if err != nil {
		err = fmt.Errorf("instances the rollout names: %w", err)
		// Past the caller's own deadline (a progress view's, a
		// shutdown), the regions are not to blame.
		if len(dr.Short) > 0 && ctx.Err() == nil {
			return nil, &shortDrill{regions: dr.Short, err: err}
		}
		return nil, err
	}
	return dr.Reports, nil
}

// drillTimeout bounds how long a step waits for the regions to answer its
// drill-down, as distributor.DetailByRegion does when not told.
const drillTimeout = 5 * time.Second

// shortDrill is rolloutReports's error when the drill-down reached the
// regions and some did not answer in full: regions are those.
type shortDrill struct {
	regions []distributor.RegionDetail
	err     error
}

func (e *shortDrill) Error() string { return e.err.Error() }
func (e *shortDrill) Unwrap() error { return e.err }

// DetailRequest is the drill-down that judging r on a summarised fleet
// needs: the instances its stages name, or have moved or fixed by name,
// and its stages' label selectors, whose cohort membership goes by name,
// not bucket; and the instances it waits for by name (Unconfirmed). A
// summary names a sample of each group's instances, a different one as
// instances move between groups, so an instance waited for could drop
// out of the summary's names when it applied the version, and was taken
// for one that stopped reporting; asked of its region, it is seen live,
// and one that did stop reporting is seen gone. ok is false when r names,
// selects and waits for nobody: its stages go by bucket alone, and the
// summary groups suffice.
func (r *Rollout) DetailRequest() (req distributor.DetailRequest, ok bool) {
	req.Instances = slices.Clone(r.Cohort.Instances)
	for _, st := range r.Policy.Stages {
		req.Instances = append(req.Instances, st.Instances...)
		if len(st.Labels) > 0 {
			req.Selectors = append(req.Selectors, st.Labels)
		}
	}
	req.Instances = append(req.Instances, r.Moved.Instances...)
	req.Instances = append(req.Instances, r.Unconfirmed...)
	if len(req.Instances) == 0 && len(req.Selectors) == 0 {
		return distributor.DetailRequest{}, false
	}
	slices.Sort(req.Instances)
	req.Instances = slices.Compact(req.Instances)
	return req, true
}

// progressReports is rolloutReports for showing progress, not judging it:
// when the drill-down fails (a region does not answer in time, or the
// caller, an operator, may not ask), the stages are measured on the
// groups alone, a named instance counted with its bucket's group, and
// without is the drill-down's error, which the progress shows so that
// nobody takes those counts for exact ones.
func (c *Controller) progressReports(ctx context.Context, cfg cuecast.ConfigPath, r *Rollout) (rs []cuecast.Report, without error, err error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	rs, err = c.rolloutReports(dctx, cfg, r)
	if err == nil || ctx.Err() != nil {
		return rs, nil, err
	}
	c.log.Debug("progress without the regions' detail", "config", cfg, "err", err)
	rs, rerr := c.reports(ctx, cfg)
	return rs, err, rerr
}

// liveInstances lists the instances with a live report on cfg, from the
// report stream's per-subject state (one stream info request, no
// consumer): its reports expire after the liveness time, so every subject
// holding one is a live instance.
func (c *Controller) liveInstances(ctx context.Context, cfg cuecast.ConfigPath) ([]string, error) {
	st, err := c.js.Stream(ctx, cuecast.ReportStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil, nil // no distributor created it: no instance reports
	}
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", cuecast.ReportStream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(cuecast.ReportWildcard(cfg)))
	if err != nil {
		return nil, fmt.Errorf("read %s state: %w", cuecast.ReportStream, err)
	}
	var ids []string
	for subj := range info.State.Subjects {
		if _, id, ok := cuecast.ParseReportSubject(subj); ok {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// seedSummaries gives l the regions' last summaries of cfg from the
// report stream (a tree; none on a single server): each region sends one
// at least every heartbeat, and the view must not count a region's
// instances as gone meanwhile.
func (c *Controller) seedSummaries(ctx context.Context, cfg cuecast.ConfigPath, l *distributor.LiveReports, now time.Time) error {
	st, err := c.js.Stream(ctx, cuecast.ReportStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open %s: %w", cuecast.ReportStream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(cuecast.SummaryWildcard(cfg)))
	if err != nil {
		return fmt.Errorf("read %s state: %w", cuecast.ReportStream, err)
	}
	for subj := range info.State.Subjects {
		m, err := st.GetLastMsgForSubject(ctx, subj)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("read summary %s: %w", subj, err)
		}
		if sum, err := distributor.DecodeSummary(m.Subject, m.Data); err == nil {
			l.SeedSummary(sum, m.Time, now)
		}
	}
	return nil
}

// lastReport reads instance's last report on cfg from the report stream;
// ok is false when the stream holds none (it expired).
func (c *Controller) lastReport(ctx context.Context, cfg cuecast.ConfigPath, instance string) (cuecast.Report, bool, error) {
	st, err := c.js.Stream(ctx, cuecast.ReportStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		return cuecast.Report{}, false, nil
	}
	if err != nil {
		return cuecast.Report{}, false, fmt.Errorf("open %s: %w", cuecast.ReportStream, err)
	}
	m, err := st.GetLastMsgForSubject(ctx, cuecast.ReportSubject(cfg, instance))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return cuecast.Report{}, false, nil
	}
	if err != nil {
		return cuecast.Report{}, false, fmt.Errorf("read report of %s on %s: %w", instance, cfg, err)
	}
	r, err := distributor.DecodeReport(m.Subject, m.Data)
	if err != nil {
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
	if st, err := c.js.Stream(ctx, cuecast.ReportStream); err == nil {
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

// unheard counts the instances not heard yet (or of a region that stopped
// summarising).
func unheard(rs []cuecast.Report) int {
	n := 0
	for _, r := range rs {
		if distributor.Unheard(r) {
			n += r.Weight()
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
