package rollout

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// A judgement that could halt waits until the report stream holds what it
// rests on.
//
// The running controller hears the reports by core subscription, a moment
// before the hub's report stream stores them (the stream takes its
// messages from a queue of its own), and everyone else (`cuecast status`,
// the dashboard, the metrics) reads the stream. A halt written in that
// moment was read by them beside the reports from before it: the
// dashboard showed a canary halted for an unhealthy instance with no
// instance unhealthy (TestSampleShowsWhyItHalted on a tree, at load 15).
// So before judging a stage from a view that holds an instance unhealthy
// or failing, or a region's summary of such, the controller reads the
// stream's last message on the newest few of those subjects, and judges
// only once the stream holds them, looking again for storeRetry, then at
// the next tick. A halt
// must not wait on a display: past storeWait (a stream that does not
// store, or is not reachable) it judges from the view.

// storeWait bounds how long a judgement waits for the report stream.
const storeWait = time.Second

// storeRetry is how long a judgement looks again, at once, for what the
// stream does not hold yet: it stores a report milliseconds after the
// controller hears it, and the next tick is an Interval (a second) away.
const storeRetry = 50 * time.Millisecond

// storeChecks is how many subjects a judgement looks up: the stream
// stores in the order messages reach the hub, so the newest say it holds
// the older.
const storeChecks = 8

// stored reports whether the stage of cfg may be judged from reports, the
// running controller's view: yes when the report stream holds every
// unhealthy or failing report in it (storeChecks of the newest), when
// there is no view (the reports come from the stream), or when the
// judgement has waited storeWait. When not, cfg is marked to be judged
// again at the next tick.
func (c *Controller) stored(ctx context.Context, cfg cuecast.ConfigPath, reports []cuecast.Report, now time.Time) bool {
	c.fmu.Lock()
	f := c.fleet
	c.fmu.Unlock()
	if f == nil {
		return true
	}
	want := haltable(reports)
	f.mu.Lock()
	seen := f.stored[cfg]
	for subj, r := range want {
		if at, ok := seen[subj]; ok && !at.Before(r.At) {
			delete(want, subj)
		}
	}
	f.mu.Unlock()
	held, err := c.streamHolds(ctx, want)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCfg[cfg] == nil { // no longer tracked
		return true
	}
	if f.stored[cfg] == nil {
		f.stored[cfg] = map[string]time.Time{}
	}
	for subj, at := range held {
		if old, ok := f.stored[cfg][subj]; !ok || at.After(old) {
			f.stored[cfg][subj] = at
		}
	}
	if err == nil && len(held) == len(want) {
		delete(f.waiting, cfg)
		return true
	}
	since, ok := f.waiting[cfg]
	if !ok {
		since = now
		f.waiting[cfg] = now
	}
	if now.Sub(since) >= c.storeWait {
		delete(f.waiting, cfg)
		c.log.Warn("the report stream does not hold the reports the rollout is judged on yet; judging from the controller's own view",
			"config", cfg, "waited", now.Sub(since), "subjects", len(want)-len(held), "err", err)
		return true
	}
	f.changed[cfg] = true
	return false
}

// haltable returns, by subject, the newest storeChecks of the reports
// that can halt a rollout and that the report stream holds: an instance's
// own report (on its subject) or a region's summary group (on the
// region's summary subject), unhealthy or failing. A drill-down answer
// comes from its region on demand and no stream holds it; an unheard
// instance says nothing.
func haltable(reports []cuecast.Report) map[string]cuecast.Report {
	by := map[string]cuecast.Report{}
	for _, r := range reports {
		if r.Healthy && r.LastError == "" || distributor.Unheard(r) {
			continue
		}
		var subj string
		switch {
		case r.Count > 0:
			subj = cuecast.SummarySubject(r.Region, r.Config)
		case r.Region == "":
			subj = cuecast.ReportSubject(r.Config, r.Instance)
		default:
			continue
		}
		if old, ok := by[subj]; !ok || r.At.After(old.At) {
			by[subj] = r
		}
	}
	if len(by) <= storeChecks {
		return by
	}
	subjs := slices.SortedFunc(maps.Keys(by), func(a, b string) int {
		return cmp.Or(by[b].At.Compare(by[a].At), cmp.Compare(a, b))
	})
	for _, subj := range subjs[storeChecks:] {
		delete(by, subj)
	}
	return by
}

// streamHolds reads the report stream's last message on each subject of
// want and returns, for each whose message is at least as new as want's
// report, that message's time; it looks again every storeRetry/10 for
// those it does not hold yet, for storeRetry, on the stream it opened
// once. A report the view stamped with its arrival (its instance sent no
// time) counts as held when the stream's says the same of the instance.
func (c *Controller) streamHolds(ctx context.Context, want map[string]cuecast.Report) (map[string]time.Time, error) {
	held := map[string]time.Time{}
	if len(want) == 0 {
		return held, nil
	}
	st, err := c.js.Stream(ctx, cuecast.ReportStream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		// Nothing stores the reports: nothing to wait for.
		for subj, r := range want {
			held[subj] = r.At
		}
		return held, nil
	}
	if err != nil {
		return held, err
	}
	for end := time.Now().Add(storeRetry); ; {
		for subj, r := range want {
			if _, ok := held[subj]; ok {
				continue
			}
			m, err := st.GetLastMsgForSubject(ctx, subj)
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			if err != nil {
				return held, err
			}
			if at, ok := holds(m, r); ok {
				held[subj] = at
			}
		}
		if len(held) == len(want) || !time.Now().Before(end) {
			return held, nil
		}
		select {
		case <-ctx.Done():
			return held, ctx.Err()
		case <-time.After(storeRetry / 10):
		}
	}
}

// holds says whether m, the stream's last message on r's subject, is at
// least as new as r, and the time it is held up to.
func holds(m *jetstream.RawStreamMsg, r cuecast.Report) (time.Time, bool) {
	if r.Count > 0 {
		if s, err := distributor.DecodeSummary(m.Subject, m.Data); err == nil && !s.At.Before(r.At) {
			return s.At, true
		}
		return time.Time{}, false
	}
	if got, err := distributor.DecodeReport(m.Subject, m.Data); err == nil &&
		(!got.At.Before(r.At) || got.Version == r.Version && got.Healthy == r.Healthy && got.LastError == r.LastError) {
		return r.At, true
	}
	return time.Time{}, false
}
