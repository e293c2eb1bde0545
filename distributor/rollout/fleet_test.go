package rollout

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

func TestFleetKeepsTrackedConfigsAndExpires(t *testing.T) {
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	f := newFleet(time.Minute, func() time.Time { return now })
	msg := func(cfg cuecast.ConfigPath, inst string, v uint64, healthy bool) *nats.Msg {
		b, _ := json.Marshal(cuecast.Report{Instance: inst, Config: cfg, Version: v, Healthy: healthy, At: now})
		return &nats.Msg{Subject: "ccs." + cfg.Namespace() + "." + inst + "." + cfg.Name(), Data: b}
	}
	f.handle(msg("payments/checkout", "web-1", 1, true))
	if _, ok := f.live("payments/checkout"); ok {
		t.Fatalf("untracked config kept")
	}
	if err := f.track("payments/checkout"); err != nil {
		t.Fatal(err)
	}
	if _, warm := f.live("payments/checkout"); warm {
		t.Errorf("a view tracked just now is warm")
	}
	f.handle(msg("payments/checkout", "web-1", 1, true))
	f.handle(msg("payments/other", "web-1", 1, true))
	now = now.Add(30 * time.Second)
	f.handle(msg("payments/checkout", "web-2", 2, false))
	now = now.Add(20 * time.Second)
	f.handle(msg("payments/checkout", "web-1", 1, true)) // heartbeat: refreshed, not decoded
	now = now.Add(50 * time.Second)
	rs, warm := f.live("payments/checkout")
	if !warm {
		t.Errorf("a view tracked for 100s (ttl 60s) is not warm")
	}
	if len(rs) != 1 || rs[0].Instance != "web-1" {
		t.Errorf("live after web-2 expired: got %+v, want web-1 only", rs)
	}
	f.handle(msg("payments/checkout", "web-1", 2, false)) // a changed report is decoded
	rs, _ = f.live("payments/checkout")
	if len(rs) != 1 || rs[0].Version != 2 || rs[0].Healthy {
		t.Errorf("after a change: got %+v, want web-1 on v2 unhealthy", rs)
	}
}
