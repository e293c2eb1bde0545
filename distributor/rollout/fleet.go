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
// nothing. A config starts being kept when its rollout needs it, seeded from
// the report stream. A report is live for four heartbeats after it arrived,
// as in the stream.
type fleet struct {
	ttl time.Duration
	now func() time.Time
	// subscribe starts delivering cfg's reports to handle; nil in tests
	// that call handle themselves.
	subscribe func(cfg cuecast.ConfigPath) (*nats.Subscription, error)

	mu    sync.Mutex
	byCfg map[cuecast.ConfigPath]map[string]seen // tracked configs only
	subs  map[cuecast.ConfigPath]*nats.Subscription
}

type seen struct {
	r  cuecast.Report
	at time.Time
	// raw is the report as received up to its "at" field: a heartbeat
	// that repeats it only refreshes at, without a decode.
	raw []byte
}

func newFleet(ttl time.Duration, now func() time.Time) *fleet {
	return &fleet{ttl: ttl, now: now, byCfg: map[cuecast.ConfigPath]map[string]seen{}, subs: map[cuecast.ConfigPath]*nats.Subscription{}}
}

// track starts keeping cfg's reports (subscribing to them), seeded with
// reports (received at their At); untrack stops.
func (f *fleet) track(cfg cuecast.ConfigPath, reports []cuecast.Report) error {
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
		m = map[string]seen{}
		f.byCfg[cfg] = m
	}
	for _, r := range reports {
		if s, ok := m[r.Instance]; !ok || s.at.Before(r.At) {
			m[r.Instance] = seen{r: r, at: r.At}
		}
	}
	return nil
}

func (f *fleet) untrack(cfg cuecast.ConfigPath) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.byCfg, cfg)
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
	}
}

// live returns the unexpired reports on cfg, dropping expired ones, and
// whether cfg is tracked at all.
func (f *fleet) live(cfg cuecast.ConfigPath) ([]cuecast.Report, bool) {
	cutoff := f.now().Add(-f.ttl)
	f.mu.Lock()
	defer f.mu.Unlock()
	m, ok := f.byCfg[cfg]
	if !ok {
		return nil, false
	}
	out := make([]cuecast.Report, 0, len(m))
	for id, s := range m {
		if s.at.Before(cutoff) {
			delete(m, id)
			continue
		}
		out = append(out, s.r)
	}
	return out, true
}
