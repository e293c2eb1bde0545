package rollout

import (
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// fleet is the controller's in-memory view of the live reports of the
// configs being rolled out, fed by one core subscription per such config
// (cuecast.ReportWildcard): evaluating a thousand rollouts a second must not
// read the report stream a thousand times a second, and configs at rest cost
// nothing. A report is live for ttl after it arrived, the liveness rule of
// the report stream (distributor.LiveHeartbeats); instances the stream holds
// a report of but the view has not heard yet are in it as Unheard
// (Controller.reports), so a view started a moment ago leaves nobody out.
type fleet struct {
	ttl time.Duration
	now func() time.Time
	// subscribe starts delivering cfg's reports to handle; nil in tests
	// that call handle themselves.
	subscribe func(cfg cuecast.ConfigPath) ([]*nats.Subscription, error)

	mu    sync.Mutex
	byCfg map[cuecast.ConfigPath]*distributor.LiveReports // tracked configs only
	subs  map[cuecast.ConfigPath][]*nats.Subscription
	// changed marks configs with a new (not repeated) report since the
	// controller last looked.
	changed map[cuecast.ConfigPath]bool
	// stored is, per config and report or summary subject, the newest
	// report time the report stream was seen to hold (Controller.stored);
	// waiting is since when a config's judgement has waited for it.
	stored  map[cuecast.ConfigPath]map[string]time.Time
	waiting map[cuecast.ConfigPath]time.Time
}

func newFleet(ttl time.Duration, now func() time.Time) *fleet {
	return &fleet{ttl: ttl, now: now, byCfg: map[cuecast.ConfigPath]*distributor.LiveReports{},
		subs: map[cuecast.ConfigPath][]*nats.Subscription{}, changed: map[cuecast.ConfigPath]bool{},
		stored: map[cuecast.ConfigPath]map[string]time.Time{}, waiting: map[cuecast.ConfigPath]time.Time{}}
}

// track starts keeping cfg's reports (subscribing to them) and returns its
// view, and whether tracking started just now. untrack stops.
func (f *fleet) track(cfg cuecast.ConfigPath) (*distributor.LiveReports, bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if l := f.byCfg[cfg]; l != nil {
		return l, false, nil
	}
	if f.subscribe != nil {
		sub, err := f.subscribe(cfg)
		if err != nil {
			return nil, false, fmt.Errorf("subscribe to reports on %s: %w", cfg, err)
		}
		f.subs[cfg] = sub
	}
	l := distributor.NewLiveReports(cfg, f.ttl)
	f.byCfg[cfg] = l
	return l, true, nil
}

func (f *fleet) untrack(cfg cuecast.ConfigPath) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byCfg, cfg)
	delete(f.changed, cfg)
	delete(f.stored, cfg)
	delete(f.waiting, cfg)
	for _, sub := range f.subs[cfg] {
		_ = sub.Unsubscribe()
	}
	delete(f.subs, cfg)
}

// close unsubscribes from everything.
func (f *fleet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for cfg, subs := range f.subs {
		for _, sub := range subs {
			_ = sub.Unsubscribe()
		}
		delete(f.subs, cfg)
	}
}

// handle is the subscription callback, for reports and summaries alike.
// Most are heartbeats that repeat the previous one but for its time:
// those cost a comparison.
func (f *fleet) handle(m *nats.Msg) {
	add := (*distributor.LiveReports).Add
	cfg, inst, ok := cuecast.ParseReportSubject(m.Subject)
	if !ok {
		if cfg, inst, ok = cuecast.ParseSummarySubject(m.Subject); !ok {
			return
		}
		add = (*distributor.LiveReports).AddSummary
	}
	now := f.now()
	f.mu.Lock()
	l := f.byCfg[cfg]
	f.mu.Unlock()
	if l == nil || !add(l, inst, m.Data, now) {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCfg[cfg] == l { // still tracked
		f.changed[cfg] = true
	}
}

// takeChanged reports whether cfg got a new report since the last call.
func (f *fleet) takeChanged(cfg cuecast.ConfigPath) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := f.changed[cfg]
	delete(f.changed, cfg)
	return ch
}

// live returns the unexpired reports on cfg (nil when it is not tracked),
// dropping expired ones.
func (f *fleet) live(cfg cuecast.ConfigPath) []cuecast.Report {
	f.mu.Lock()
	l := f.byCfg[cfg]
	f.mu.Unlock()
	if l == nil {
		return nil
	}
	return l.Live(f.now())
}
