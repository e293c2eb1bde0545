package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// fleet is the controller's in-memory view of the live reports of the
// configs being rolled out, fed by one core subscription per such config
// (ccs.<ns>.*.<name>): evaluating a thousand rollouts a second must not read
// the report stream a thousand times a second, and configs at rest cost
// nothing. A config starts being kept when its rollout needs it; its view is
// warm one heartbeat and a quarter later. A report is live for four
// heartbeats after it arrived, as in the stream.
type fleet struct {
	ttl time.Duration
	now func() time.Time
	// subscribe starts delivering cfg's reports to handle; nil in tests
	// that call handle themselves.
	subscribe func(cfg cuecast.ConfigPath) (*nats.Subscription, error)

	mu    sync.Mutex
	byCfg map[cuecast.ConfigPath]map[string]seen // tracked configs only
	subs  map[cuecast.ConfigPath]*nats.Subscription
	since map[cuecast.ConfigPath]time.Time // when tracking started
	// changed marks configs with a new (not repeated) report since the
	// controller last looked.
	changed map[cuecast.ConfigPath]bool
}

type seen struct {
	r  cuecast.Report
	at time.Time
	// raw is the report as received up to its "at" field: a heartbeat
	// that repeats it only refreshes at, without a decode.
	raw []byte
}

func newFleet(ttl time.Duration, now func() time.Time) *fleet {
	return &fleet{ttl: ttl, now: now, byCfg: map[cuecast.ConfigPath]map[string]seen{}, subs: map[cuecast.ConfigPath]*nats.Subscription{}, since: map[cuecast.ConfigPath]time.Time{}, changed: map[cuecast.ConfigPath]bool{}}
}

// track starts keeping cfg's reports (subscribing to them); untrack stops.
// It does nothing for a config already tracked.
func (f *fleet) track(cfg cuecast.ConfigPath) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byCfg[cfg]
	if m == nil {
		if f.subscribe != nil {
			sub, err := f.subscribe(cfg)
			if err != nil {
				return fmt.Errorf("subscribe to reports on %s: %w", cfg, err)
			}
			f.subs[cfg] = sub
		}
		f.byCfg[cfg] = map[string]seen{}
		f.since[cfg] = f.now()
	}
	return nil
}

func (f *fleet) untrack(cfg cuecast.ConfigPath) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byCfg, cfg)
	delete(f.since, cfg)
	delete(f.changed, cfg)
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

// parseReportSubject inverts the report subject ccs.<ns>.<instance>.<name>.
func parseReportSubject(subj string) (cuecast.ConfigPath, string, bool) {
	rest, ok := strings.CutPrefix(subj, "ccs.")
	if !ok {
		return "", "", false
	}
	ns, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	inst, name, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	return cuecast.ConfigPath(ns + "/" + strings.ReplaceAll(name, ".", "/")), inst, true
}

var atField = []byte(`"at":`)

// handle is the subscription callback. Most reports are heartbeats that
// repeat the previous one but for its time: those cost a comparison.
func (f *fleet) handle(m *nats.Msg) {
	cfg, inst, ok := parseReportSubject(m.Subject)
	if !ok {
		return
	}
	now := f.now()
	raw := m.Data
	if i := bytes.LastIndex(raw, atField); i >= 0 {
		raw = raw[:i]
	}
	f.mu.Lock()
	byInst := f.byCfg[cfg]
	if byInst == nil {
		f.mu.Unlock()
		return
	}
	if s, ok := byInst[inst]; ok && bytes.Equal(s.raw, raw) {
		s.at = now
		byInst[inst] = s
		f.mu.Unlock()
		return
	}
	f.mu.Unlock()
	var r cuecast.Report
	if err := json.Unmarshal(m.Data, &r); err != nil || r.Config != cfg || r.Instance != inst || cuecast.ValidateInstance(inst) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if byInst := f.byCfg[cfg]; byInst != nil {
		byInst[inst] = seen{r: r, at: now, raw: bytes.Clone(raw)}
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

// live returns the unexpired reports on cfg, dropping expired ones, and
// whether the view is warm: tracked for longer than a heartbeat and a
// quarter (ttl is four heartbeats), so every live instance has reported.
func (f *fleet) live(cfg cuecast.ConfigPath) ([]cuecast.Report, bool) {
	now := f.now()
	cutoff := now.Add(-f.ttl)
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.byCfg[cfg]
	if !ok {
		return nil, false
	}
	warm := now.Sub(f.since[cfg]) >= f.ttl*5/16
	out := make([]cuecast.Report, 0, len(m))
	for id, s := range m {
		if s.at.Before(cutoff) {
			delete(m, id)
			continue
		}
		out = append(out, s.r)
	}
	return out, warm
}
