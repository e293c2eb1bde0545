package distributor_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
)

// TestSummarizerSendsTheCompletingSummaryAtOnce drives a summarizer on a
// fake clock (its add and its interval's tick): a summary goes out at most
// once an interval while its region's instances move from one version to
// the next, but the report that completes the move (every live instance
// on the new version), or that brings a new failing class, sends its
// summary at once, without waiting for the next tick; once per version,
// so the rate stays bounded (`status --wait`, the rollout controller and
// the dashboard see the completed state an interval sooner: docs/SCALING.md).
func TestSummarizerSendsTheCompletingSummaryAtOnce(t *testing.T) {
	t.Parallel()
	const hb, interval = time.Minute, time.Second
	nc, sums, s := summarizerOnce(t, hb, interval)
	t0 := time.Now()
	add, flush := distributor.SummarizerAt(s, t0.Add(-2*hb)) // past its first heartbeat and a quarter
	const n = 10
	// Instance i's report at at, on v since applied.
	beat := func(i int, v uint64, lastErr string, applied, at time.Time) {
		id := fmt.Sprintf("web-%d", i)
		b, _ := json.Marshal(cuecast.Report{Instance: id, Config: cfg, Version: v, Checksum: fmt.Sprint("sum", v), Healthy: lastErr == "",
			LastError: lastErr, AppliedAt: applied, At: at})
		add(cuecast.ReportSubject(cfg, id), b, at)
	}
	report := func(i int, v uint64, lastErr string, at time.Time) { beat(i, v, lastErr, t0, at) }
	received := func(v uint64) []string { t.Helper(); return sentSummaries(t, nc, sums, v) }
	now := t0
	for i := range n {
		report(i, 1, "", now)
	}
	flush(now)
	received(1) // the fleet on v1, however many summaries that took
	// The move to v2: one instance every 150 ms, the ticks a second apart.
	// Before the last instance, a summary per tick at most.
	var got []string
	tick := now
	for i := range n - 1 {
		now = now.Add(150 * time.Millisecond)
		report(i, 2, "", now)
		if now.Sub(tick) >= interval {
			tick = tick.Add(interval)
			flush(tick)
		}
	}
	got = append(got, received(2)...)
	if len(got) > 2 {
		t.Errorf("while the fleet moved to v2 over %s: %d summaries (%v), want at most one per %s tick", now.Sub(t0), len(got), got, interval)
	}
	// The last instance completes the move: its summary goes at once.
	now = now.Add(150 * time.Millisecond)
	report(n-1, 2, "", now)
	if got := received(2); len(got) != 1 || got[0] != fmt.Sprintf("%d/%d", n, n) {
		t.Fatalf("after the report that completes v2, before the next tick: summaries %v, want one of %d/%d", got, n, n)
	}
	// Its heartbeat, the same report again, and the next tick: nothing new.
	beat(n-1, 2, "", t0, now.Add(time.Millisecond))
	flush(tick.Add(interval))
	if got := received(2); len(got) != 0 {
		t.Errorf("the fleet at rest on v2: summaries %v, want none before a heartbeat passed", got)
	}
	// A failing instance is a new class: at once, once.
	now = tick.Add(interval + 100*time.Millisecond)
	report(0, 2, "version 3: compile: oops", now)
	if got := received(2); len(got) != 1 {
		t.Errorf("after the first failing report: summaries %v, want one at once", got)
	}
	report(1, 2, "version 3: compile: oops", now.Add(10*time.Millisecond))
	if got := received(2); len(got) != 0 {
		t.Errorf("after a second failing report of the same class: summaries %v, want none before the next tick", got)
	}
	// A strict cutover: every live instance staging v4 is what it waits
	// for; the last one to stage sends the summary at once.
	tick = tick.Add(2 * interval)
	flush(tick)
	received(2)
	for i := range n {
		now = tick.Add(time.Duration(i+1) * 50 * time.Millisecond)
		id := fmt.Sprintf("web-%d", i)
		b, _ := json.Marshal(cuecast.Report{Instance: id, Config: cfg, Version: 2, Checksum: "sum2", Healthy: true, Staged: 4, AppliedAt: t0, At: now})
		add(cuecast.ReportSubject(cfg, id), b, now)
		got := received(2)
		if i < n-1 && len(got) != 0 {
			t.Fatalf("%d of %d instances staging v4, before the next tick: summaries %v, want none", i+1, n, got)
		}
		if i == n-1 && len(got) != 1 {
			t.Fatalf("every instance staging v4, before the next tick: summaries %v, want one at once", got)
		}
	}
}

// TestSummarizerResendsOnceAHeartbeatAtRest: at rest a region resends its
// unchanged summary once a heartbeat, so the hub's intake at rest is one
// summary per region, config and heartbeat whatever the fleet. Its ticks
// come an interval apart give or take the scheduler's jitter: a tick a
// millisecond early, a heartbeat after the last summary, put the resend
// off to the next tick, and the resends came a heartbeat and an interval
// apart (15 in 16 heartbeats here), which the scale harness
// counted as at-rest intake varying from one window to the next.
func TestSummarizerResendsOnceAHeartbeatAtRest(t *testing.T) {
	t.Parallel()
	const hb, interval = 15 * time.Second, time.Second
	nc, sums, s := summarizerOnce(t, hb, interval)
	t0 := time.Now()
	add, flush := distributor.SummarizerAt(s, t0.Add(-2*hb))
	const n = 10
	heartbeat := func(at time.Time) {
		for i := range n {
			id := fmt.Sprintf("web-%d", i)
			b, _ := json.Marshal(cuecast.Report{Instance: id, Config: cfg, Version: 1, Checksum: "sum1", Healthy: true, AppliedAt: t0, At: at})
			add(cuecast.ReportSubject(cfg, id), b, at)
		}
	}
	count := func() int {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		got := 0
		for {
			if _, err := sums.NextMsg(0); err == nats.ErrTimeout {
				return got
			} else if err != nil {
				t.Fatal(err)
			}
			got++
		}
	}
	const beats = 16
	ticks := int(hb / interval)
	var sent []int // the tick of each summary
	for k := range beats*ticks + 1 {
		at := t0.Add(time.Duration(k) * interval)
		if k%2 == 1 {
			at = at.Add(-time.Millisecond) // every other tick a little early
		}
		if k%ticks == 0 {
			heartbeat(at)
		}
		flush(at)
		for range count() {
			sent = append(sent, k)
		}
	}
	// The first summaries go as the fleet first reports (the first
	// report completes "all on v1", the tick after it has all ten); from
	// then on one a heartbeat, every 15 ticks.
	if len(sent) < beats {
		t.Fatalf("over %d heartbeats at rest: summaries at ticks %v, want one a heartbeat", beats, sent)
	}
	for i := 3; i < len(sent); i++ {
		if gap := sent[i] - sent[i-1]; gap != ticks {
			t.Fatalf("over %d heartbeats at rest: summaries at ticks %v, %d ticks apart; want one a heartbeat (%d ticks)", beats, sent, gap, ticks)
		}
	}
}

// TestSummarizerAtRestBuildsOnceAHeartbeat: at rest each instance's
// heartbeat repeats its last report, and the summarizer built its region's
// summary every interval only to find it equal to the last one sent: at
// 25,000 instances a region, most of its CPU. It now builds one when a
// report brought something new, an instance expired, a report was dropped
// or the heartbeat's resend is due, and what it sends is unchanged: the
// resend once a heartbeat, an expiry and a change each at the next tick.
func TestSummarizerAtRestBuildsOnceAHeartbeat(t *testing.T) {
	t.Parallel()
	const hb, interval = 10 * time.Second, time.Second
	nc, sums, s := summarizerOnce(t, hb, interval)
	t0 := time.Now()
	add, flush := distributor.SummarizerAt(s, t0.Add(-2*hb))
	const n = 20
	version := map[int]uint64{}
	silent := map[int]bool{}
	beat := func(i int, at time.Time) {
		id := fmt.Sprintf("web-%d", i)
		v := version[i]
		b, _ := json.Marshal(cuecast.Report{Instance: id, Config: cfg, Version: v, Checksum: fmt.Sprint("sum", v), Healthy: true, AppliedAt: t0, At: at})
		add(cuecast.ReportSubject(cfg, id), b, at)
	}
	sent := func() []string { t.Helper(); return sentSummaries(t, nc, sums, 2) }
	// run ticks from second from to second to, each instance beating once
	// a heartbeat (instance i at second i%10 of each), and returns the
	// summaries built and sent meanwhile.
	run := func(from, to int) (built int, got []string) {
		before := distributor.SummariesBuilt(s)
		for sec := from; sec < to; sec++ {
			now := t0.Add(time.Duration(sec) * time.Second)
			for i := range n {
				if !silent[i] && sec%10 == i%10 {
					beat(i, now)
				}
			}
			flush(now.Add(interval / 2))
		}
		return distributor.SummariesBuilt(s) - before, sent()
	}
	for i := range n {
		version[i] = 1
	}
	run(0, 10) // every instance heard, the first summary sent
	built, got := run(10, 70)
	if len(got) != 6 {
		t.Errorf("60 s at rest, a heartbeat of 10 s: sent %v, want one summary a heartbeat", got)
	}
	if built > 7 {
		t.Errorf("60 s at rest: built %d summaries for %d sent; want one a heartbeat, not one a tick", built, len(got))
	}
	// A change is summarised at the next tick.
	version[3] = 2
	beat(3, t0.Add(70*time.Second))
	if _, got := run(70, 71); len(got) != 1 || got[0] != "1/20" {
		t.Fatalf("after web-3 moved to v2: sent %v, want [1/20]", got)
	}
	// An instance that stops reporting is summarised without it at the
	// tick after its report expires, though no report came.
	silent[5] = true
	_, got = run(71, 71+int(distributor.LiveFor(hb)/time.Second)+12)
	if len(got) == 0 || got[len(got)-1] != "1/19" {
		t.Fatalf("web-5 silent past its report's life: sent %v, want the last 1/19", got)
	}
}

// sentSummaries is the summaries sub received since the last look, each
// as "on/live": how many of its instances are on version v, of its live.
func sentSummaries(t *testing.T, nc *nats.Conn, sub *nats.Subscription, v uint64) []string {
	t.Helper()
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := sub.NextMsg(0)
		if err == nats.ErrTimeout {
			return got
		}
		if err != nil {
			t.Fatal(err)
		}
		var sum distributor.Summary
		if err := json.Unmarshal(m.Data, &sum); err != nil {
			t.Fatal(err)
		}
		on := 0
		for _, g := range sum.Groups {
			if g.Version == v {
				on += g.Count()
			}
		}
		got = append(got, fmt.Sprintf("%d/%d", on, sum.Live))
	}
}

// summarizerOnce is region eu's summarizer on a fresh server, for a test
// to drive on its own clock (SummarizerAt), and a subscription to the
// summaries it sends on cfg.
func summarizerOnce(t testing.TB, hb, interval time.Duration) (*nats.Conn, *nats.Subscription, *distributor.Summarizer) {
	t.Helper()
	nc := natstest.Start(t).Connect(t)
	sums, err := nc.SubscribeSync(cuecast.SummaryWildcard(cfg))
	if err != nil {
		t.Fatal(err)
	}
	s, err := distributor.NewSummarizer(nc, distributor.SummarizerOptions{Region: "eu", Heartbeat: hb, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	return nc, sums, s
}
