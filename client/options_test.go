package client

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestConnectOptionsNoticeADeadConnection: a connection whose way back has
// died (a one-way partition) is given up after at most two unanswered pings
// within 45 s, not nats.go's 4–6 minutes, and redialed forever.
func TestConnectOptionsNoticeADeadConnection(t *testing.T) {
	o := nats.GetDefaultOptions()
	for _, opt := range ConnectOptions() {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	if stale := o.PingInterval * time.Duration(o.MaxPingsOut+1); stale > 45*time.Second {
		t.Errorf("a dead connection is noticed only after %s (ping every %s, %d outstanding)", stale, o.PingInterval, o.MaxPingsOut)
	}
	if o.MaxReconnect != -1 || !o.RetryOnFailedConnect {
		t.Errorf("reconnects: max %d, retry on failed connect %v; want forever", o.MaxReconnect, o.RetryOnFailedConnect)
	}
}
