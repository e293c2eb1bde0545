package client

import (
	"net"
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

// connectOptions is ConnectOptions (and then more) applied to nats.Options,
// as nats.Connect applies them.
func connectOptions(t *testing.T, more ...nats.Option) nats.Options {
	t.Helper()
	o := nats.GetDefaultOptions()
	for _, opt := range append(ConnectOptions(), more...) {
		if err := opt(&o); err != nil {
			t.Fatal(err)
		}
	}
	return o
}

// TestConnectOptionsReconnectDelay: each wait before a reconnect is drawn
// from [0, min(1 s · 2^(attempt-1), 30 s)), over the whole range (full
// jitter), so a fleet dropped at once comes back spread over a second,
// then two, then four… instead of all within 100 ms.
func TestConnectOptionsReconnectDelay(t *testing.T) {
	o := connectOptions(t)
	if o.CustomReconnectDelayCB == nil {
		t.Fatal("no reconnect delay")
	}
	for _, tc := range []struct {
		attempt int
		ceiling time.Duration
	}{
		{1, time.Second},
		{2, 2 * time.Second},
		{3, 4 * time.Second},
		{5, 16 * time.Second},
		{6, 30 * time.Second},
		{7, 30 * time.Second},
		{1000, 30 * time.Second},
	} {
		// 200 draws: each half of the range is missed with odds 2^-200.
		lo, hi := tc.ceiling, time.Duration(0)
		for range 200 {
			d := o.CustomReconnectDelayCB(tc.attempt)
			if d < 0 || d >= tc.ceiling {
				t.Fatalf("attempt %d: waited %s, want [0, %s)", tc.attempt, d, tc.ceiling)
			}
			lo, hi = min(lo, d), max(hi, d)
		}
		if lo >= tc.ceiling/2 || hi < tc.ceiling/2 {
			t.Errorf("attempt %d: waits from %s to %s, want both halves of [0, %s)", tc.attempt, lo, hi, tc.ceiling)
		}
	}
}

// TestConnectOptionsDialerPerConnection: a ConnectOptions() slice applied
// to two connections gives each a dialer of its own, which closes only its
// own abandoned sockets (client/integration's
// TestConnectOptionsReusedForTwoConnections runs two).
func TestConnectOptionsDialerPerConnection(t *testing.T) {
	opts := ConnectOptions()
	var a, b nats.Options
	for _, o := range []*nats.Options{&a, &b} {
		*o = nats.GetDefaultOptions()
		for _, opt := range opts {
			if err := opt(o); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a.CustomDialer == nil || a.CustomDialer == b.CustomDialer {
		t.Fatalf("dialers %p and %p, want one of its own for each connection", a.CustomDialer, b.CustomDialer)
	}
}

// TestConnectOptionsLaterOptionsWin: a caller's own dialer and login
// timeout, appended after ConnectOptions, replace the library's.
func TestConnectOptionsLaterOptionsWin(t *testing.T) {
	var mine net.Dialer
	if o := connectOptions(t, nats.SetCustomDialer(&mine), nats.Timeout(time.Minute)); o.CustomDialer != &mine || o.Timeout != time.Minute {
		t.Errorf("dialer %T, timeout %s; want the caller's", o.CustomDialer, o.Timeout)
	}
}
