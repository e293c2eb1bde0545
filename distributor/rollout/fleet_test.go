package rollout

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

func TestFleetKeepsTrackedConfigsAndExpires(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	f := newFleet(time.Minute, func() time.Time { return now })
	msg := func(cfg cuecast.ConfigPath, inst string, v uint64, healthy bool) *nats.Msg {
		b, _ := json.Marshal(cuecast.Report{Instance: inst, Config: cfg, Version: v, Healthy: healthy, At: now})
		return &nats.Msg{Subject: "ccs." + cfg.Namespace() + "." + inst + "." + cfg.Name(), Data: b}
	}
	f.handle(msg("payments/checkout", "web-1", 1, true))
	if rs := f.live("payments/checkout"); rs != nil {
		t.Fatalf("untracked config kept: %+v", rs)
	}
	l, fresh, err := f.track("payments/checkout")
	if err != nil || !fresh {
		t.Fatalf("track: fresh %t, err %v", fresh, err)
	}
	if _, fresh, _ := f.track("payments/checkout"); fresh {
		t.Errorf("a second track says fresh")
	}
	// web-3 is known live from the stream, not heard yet.
	l.Expect([]string{"web-3"}, now)
	f.handle(msg("payments/checkout", "web-1", 1, true))
	f.handle(msg("payments/other", "web-1", 1, true))
	now = now.Add(30 * time.Second)
	f.handle(msg("payments/checkout", "web-2", 2, false))
	if rs := f.live("payments/checkout"); len(rs) != 3 {
		t.Errorf("live: got %+v, want web-1, web-2 and web-3 unheard", rs)
	}
	if got := l.Overdue(now, 20*time.Second); len(got) != 1 || got[0] != "web-3" {
		t.Errorf("overdue: got %v, want web-3", got)
	}
	// Its last report, read from the stream, is 50s old: it expires 10s on.
	l.Seed([]cuecast.Report{{Instance: "web-3", Config: "payments/checkout", Version: 1, Healthy: true, At: now.Add(-50 * time.Second)}}, now)
	now = now.Add(20 * time.Second)
	f.handle(msg("payments/checkout", "web-1", 1, true)) // heartbeat: refreshed, not decoded
	for _, r := range f.live("payments/checkout") {
		if r.Instance == "web-3" || distributor.Unheard(r) {
			t.Errorf("web-3 still live 70s after its last report (ttl 60s): %+v", r)
		}
	}
	now = now.Add(50 * time.Second)
	rs := f.live("payments/checkout")
	if len(rs) != 1 || rs[0].Instance != "web-1" {
		t.Errorf("live after web-2 expired: got %+v, want web-1 only", rs)
	}
	f.handle(msg("payments/checkout", "web-1", 2, false)) // a changed report is decoded
	rs = f.live("payments/checkout")
	if len(rs) != 1 || rs[0].Version != 2 || rs[0].Healthy {
		t.Errorf("after a change: got %+v, want web-1 on v2 unhealthy", rs)
	}
}
