package web

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/metrics"
)

// NATSReports is a report feed for Options.ReportFeed: it core-subscribes to
// every report subject (ccs.>, docs/PROTOCOL.md) and every region's summary
// (ccsum.>, §4.5) on nc, which receives each as it is published, and calls
// f with its subject and body until ctx is done. It returns a
// subscription's error, or nil when ctx ends.
func NATSReports(nc *nats.Conn) func(ctx context.Context, f func(subject string, data []byte)) error {
	return func(ctx context.Context, f func(subject string, data []byte)) error {
		var subs []*nats.Subscription
		defer func() {
			for _, sub := range subs {
				_ = sub.Unsubscribe()
			}
		}()
		for _, subj := range []string{cuecast.ReportPrefix + ".>", cuecast.SummaryPrefix + ".>"} {
			sub, err := nc.Subscribe(subj, func(m *nats.Msg) { f(m.Subject, m.Data) })
			if err != nil {
				return fmt.Errorf("subscribe to %s: %w", subj, err)
			}
			subs = append(subs, sub)
		}
		<-ctx.Done()
		for _, sub := range subs {
			if err := sub.Unsubscribe(); err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
				return fmt.Errorf("unsubscribe from %s: %w", sub.Subject, err)
			}
		}
		subs = nil
		return nil
	}
}

// liveFleet is the latest report of every live instance, per config: rebuilt
// from each sample's reports (the stream's view, expiry included) and updated
// between samples by the report feed, so that a version's propagation is
// timed when its reports arrive rather than when the next sample runs.
type liveFleet struct {
	mu      sync.Mutex
	reports map[cuecast.ConfigPath]map[string]liveReport
}

type liveReport struct {
	r    cuecast.Report
	seen time.Time // when it arrived (feed) or was sampled
}

func newLiveFleet() *liveFleet {
	return &liveFleet{reports: map[cuecast.ConfigPath]map[string]liveReport{}}
}

// reset replaces the fleet with a sample's reports, read from start on. A
// report the feed delivered after start survives when the sample lacks it or
// holds an older one.
func (l *liveFleet) reset(start time.Time, sample map[cuecast.ConfigPath][]cuecast.Report) {
	l.mu.Lock()
	defer l.mu.Unlock()
	next := make(map[cuecast.ConfigPath]map[string]liveReport, len(sample))
	for cfg, rs := range sample {
		m := make(map[string]liveReport, len(rs))
		for _, r := range rs {
			m[r.Instance] = liveReport{r: r, seen: start}
		}
		next[cfg] = m
	}
	for cfg, m := range l.reports {
		for id, lr := range m {
			if lr.seen.Before(start) {
				continue
			}
			if cur, ok := next[cfg][id]; ok && !lr.r.At.After(cur.r.At) {
				continue
			}
			if next[cfg] == nil {
				next[cfg] = map[string]liveReport{}
			}
			next[cfg][id] = lr
		}
	}
	l.reports = next
}

// add records a report from the feed.
func (l *liveFleet) add(r cuecast.Report, at time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	m := l.reports[r.Config]
	if m == nil {
		m = map[string]liveReport{}
		l.reports[r.Config] = m
	}
	if cur, ok := m[r.Instance]; ok && cur.r.At.After(r.At) {
		return
	}
	m[r.Instance] = liveReport{r: r, seen: at}
}

// sample counts cfg's live instances and those on target; a region's
// summary group counts the instances it stands for (Report.Weight).
func (l *liveFleet) sample(cfg cuecast.ConfigPath, target cuecast.Version) metrics.ConfigSample {
	l.mu.Lock()
	defer l.mu.Unlock()
	c := metrics.ConfigSample{Config: cfg, Target: target}
	for _, lr := range l.reports[cfg] {
		c.Instances += lr.r.Weight()
		if lr.r.Version == target.Version && (target.Checksum == "" || lr.r.Checksum == target.Checksum) {
			c.OnTarget += lr.r.Weight()
		}
	}
	return c
}

// appliedBy is when the last of cfg's instances now on target applied it, as
// their reports say; zero when none says.
func (l *liveFleet) appliedBy(cfg cuecast.ConfigPath, target cuecast.Version) time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last time.Time
	for _, lr := range l.reports[cfg] {
		if lr.r.Version == target.Version && (target.Checksum == "" || lr.r.Checksum == target.Checksum) && lr.r.AppliedAt.After(last) {
			last = lr.r.AppliedAt
		}
	}
	return last
}

// target is the version cfg's fleet converges on: the newest of what the last
// sample's status says and what this process published since.
func (s *Server) target(cfg cuecast.ConfigPath) (cuecast.Version, bool) {
	var t cuecast.Version
	snap, _ := s.current()
	if snap != nil {
		if st, ok := snap.statusOf(cfg); ok {
			t = st.Latest
		}
	}
	if p, ok := s.metrics.PublishedVersion(cfg); ok && p.Version > t.Version {
		t = p
	}
	return t, t.Version > 0
}

// onReport is the report feed's callback. It believes the subject, not the
// body: a report naming another instance or config than its subject is
// dropped and counted, never shown. A region's summary counts the reports
// its summarizer dropped so (onSummary).
func (s *Server) onReport(subject string, data []byte) {
	if strings.HasPrefix(subject, cuecast.SummaryPrefix+".") {
		s.onSummary(subject, data)
		return
	}
	r, err := distributor.DecodeReport(subject, data)
	if err != nil {
		reason := distributor.DropMalformed
		if re := (*distributor.ReportError)(nil); errors.As(err, &re) {
			reason = re.Reason
		}
		s.metrics.DroppedReport(reason)
		s.log.Debug("dropping report", "subject", subject, "err", err)
		return
	}
	now := time.Now()
	s.live.add(r, now)
	if t, ok := s.target(r.Config); ok {
		s.observePropagation(now, r.Config, t)
	}
}

// onSummary counts the reports a region's summarizer dropped since its last
// summary (distributor.Summary.Dropped) as dropped here: a forger in a
// region shows at the hub as one reporting to it does. A summary dropped
// here counts once, by its reason: a region whose summarizer speaks
// another encoding (docs/OPERATIONS.md, upgrading) shows so, not only as
// instances gone unknown. The summary's instances are counted by the
// samples, which read the report stream.
func (s *Server) onSummary(subject string, data []byte) {
	sum, err := distributor.DecodeSummary(subject, data)
	if err != nil {
		reason := distributor.DropMalformed
		if re := (*distributor.ReportError)(nil); errors.As(err, &re) {
			reason = re.Reason
		}
		s.metrics.DroppedReports(reason, 1)
		s.log.Debug("ignoring summary", "subject", subject, "err", err)
		return
	}
	for reason, n := range sum.Dropped {
		s.metrics.DroppedReports(reason, n)
	}
}

// observePropagation records cfg's share on target t. A sample is timed by
// the latest apply it counts (the reports' applied_at), not by when the
// deliberately spread reports arrived or the sampler ticked; with nothing on
// target yet, by now.
func (s *Server) observePropagation(now time.Time, cfg cuecast.ConfigPath, t cuecast.Version) {
	at := now
	if a := s.live.appliedBy(cfg, t); !a.IsZero() && a.Before(now) {
		at = a
	}
	s.metrics.ObservePropagation(at, s.live.sample(cfg, t))
}
