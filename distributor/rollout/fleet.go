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
// nothing. A config starts being kept when its rollout needs it; its view is
// warm one heartbeat and a quarter later. A report is live for four
// heartbeats after it arrived, as in the stream (distributor.LiveReports).
type fleet struct {
	ttl time.Duration
	now func() time.Time
	// subscribe starts delivering cfg's reports to handle; nil in tests
	// that call handle themselves.
	subscribe func(cfg cuecast.ConfigPath) (*nats.Subscription, error)

	mu    sync.Mutex
	byCfg map[cuecast.ConfigPath]*distributor.LiveReports // tracked configs only
	subs  map[cuecast.ConfigPath]*nats.Subscription
	since map[cuecast.ConfigPath]time.Time // when tracking started
}

func newFleet(ttl time.Duration, now func() time.Time) *fleet {
	return &fleet{ttl: ttl, now: now, byCfg: map[cuecast.ConfigPath]*distributor.LiveReports{}, subs: map[cuecast.ConfigPath]*nats.Subscription{}, since: map[cuecast.ConfigPath]time.Time{}}
}

// track starts keeping cfg's reports (subscribing to them); untrack stops.
// It does nothing for a config already tracked.
func (f *fleet) track(cfg cuecast.ConfigPath) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.byCfg[cfg] == nil {
		if f.subscribe != nil {
			sub, err := f.subscribe(cfg)
			if err != nil {
				return fmt.Errorf("subscribe to reports on %s: %w", cfg, err)
			}
			f.subs[cfg] = sub
		}
		f.byCfg[cfg] = distributor.NewLiveReports(cfg, f.ttl)
		f.since[cfg] = f.now()
	}
	return nil
}

func (f *fleet) untrack(cfg cuecast.ConfigPath) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byCfg, cfg)
	delete(f.since, cfg)
	if sub := f.subs[cfg]; sub != nil {
		_ = sub.Unsubscribe()
		delete(f.subs, cfg)
	}
}

// close unsubscribes from everything.
func (f *fleet) close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for cfg, sub := range f.subs {
		_ = sub.Unsubscribe()
		delete(f.subs, cfg)
	}
}

// handle is the subscription callback. Most reports are heartbeats that
// repeat the previous one but for its time: those cost a comparison.
func (f *fleet) handle(m *nats.Msg) {
	cfg, inst, ok := cuecast.ParseReportSubject(m.Subject)
	if !ok {
		return
	}
	now := f.now()
	f.mu.Lock()
	l := f.byCfg[cfg]
	f.mu.Unlock()
	if l != nil {
		l.Add(inst, m.Data, now)
	}
}

// live returns the unexpired reports on cfg, dropping expired ones, and
// whether the view is warm: tracked for longer than a heartbeat and a
// quarter (ttl is four heartbeats), so every live instance has reported.
func (f *fleet) live(cfg cuecast.ConfigPath) ([]cuecast.Report, bool) {
	now := f.now()
	f.mu.Lock()
	l, since := f.byCfg[cfg], f.since[cfg]
	f.mu.Unlock()
	if l == nil {
		return nil, false
	}
	return l.Live(now), now.Sub(since) >= f.ttl*5/16
}
