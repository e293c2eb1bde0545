package rollout

import (
	"encoding/json"
	"sync"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// fleet is the controller's in-memory view of the live reports, fed by one
// core subscription to every report subject: evaluating a thousand rollouts
// a second must not read the report stream a thousand times a second. A
// report is live for four heartbeats after it arrived, as in the stream.
type fleet struct {
	ttl time.Duration
	now func() time.Time

	mu    sync.Mutex
	byCfg map[cuecast.ConfigPath]map[string]seen
}

type seen struct {
	r  cuecast.Report
	at time.Time
}

func newFleet(ttl time.Duration, now func() time.Time) *fleet {
	return &fleet{ttl: ttl, now: now, byCfg: map[cuecast.ConfigPath]map[string]seen{}}
}

// add records r as received at at.
func (f *fleet) add(r cuecast.Report, at time.Time) {
	if r.Config.Validate() != nil || cuecast.ValidateInstance(r.Instance) != nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byCfg[r.Config]
	if m == nil {
		m = map[string]seen{}
		f.byCfg[r.Config] = m
	}
	m[r.Instance] = seen{r: r, at: at}
}

// handle is the subscription callback.
func (f *fleet) handle(m *nats.Msg) {
	var r cuecast.Report
	if err := json.Unmarshal(m.Data, &r); err != nil {
		return
	}
	f.add(r, f.now())
}

// live returns the unexpired reports on cfg, dropping expired ones.
func (f *fleet) live(cfg cuecast.ConfigPath) []cuecast.Report {
	cutoff := f.now().Add(-f.ttl)
	f.mu.Lock()
	defer f.mu.Unlock()
	m := f.byCfg[cfg]
	out := make([]cuecast.Report, 0, len(m))
	for id, s := range m {
		if s.at.Before(cutoff) {
			delete(m, id)
			continue
		}
		out = append(out, s.r)
	}
	return out
}
