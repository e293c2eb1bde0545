package client

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// TestReportSoonWaitsOutTheFanOut: the report after an apply waits between
// a half and one and a half of its spread (heartbeat/15, at most 1 s), so
// that no instance reports while the server is still fanning the change out
// to the rest of the fleet: at 10,000 instances on one server that takes
// 0.3–0.45 s (BENCHMARKS.md, "Distribution"), longer than the quarter
// second instances used to wait, and the early ones' reports, stored
// mid-fan-out, slowed it for the others.
func TestReportSoonWaitsOutTheFanOut(t *testing.T) {
	for _, hb := range []time.Duration{15 * time.Second, 3 * time.Second} {
		c, err := New(new(nats.Conn), WithInstance("timers"), WithInsecureSkipVerify(), WithHeartbeat(hb))
		if err != nil {
			t.Fatal(err)
		}
		spread := min(hb/15, time.Second)
		w := newWatcher(c, "payments/checkout", watchOptions{})
		lo, hi := time.Duration(1<<62), time.Duration(0)
		for range 2000 {
			w.reportAt = time.Time{}
			before := time.Now()
			w.reportSoon()
			d := w.reportAt.Sub(before)
			lo, hi = min(lo, d), max(hi, d)
		}
		w.timer.Stop()
		if lo < spread/2 || hi > spread*3/2+time.Millisecond {
			t.Errorf("heartbeat %s: reports %s to %s after the apply, want within [%s, %s]", hb, lo, hi, spread/2, spread*3/2)
		}
		if hi-lo < spread*9/10 {
			t.Errorf("heartbeat %s: reports spread over %s only, want about %s", hb, hi-lo, spread)
		}
	}
}
