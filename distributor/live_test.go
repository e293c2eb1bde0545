package distributor_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

func reportJSON(inst string, v uint64, at time.Time) []byte {
	b, _ := json.Marshal(cuecast.Report{Instance: inst, Config: cfg, Version: v, Healthy: true, At: at})
	return b
}

// TestLiveReportsKeepsTheNewer: a report can come both from the stream read
// (Seed) and as a message (Add), in either order; the newer by At stays,
// except that a message always replaces a message (they arrive in order).
func TestLiveReportsKeepsTheNewer(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	older, newer := t0, t0.Add(time.Second)
	type step struct {
		seed bool // else Add
		v    uint64
		at   time.Time
	}
	for _, tc := range []struct {
		name  string
		steps []step
		want  uint64
	}{
		{"message, then an older read", []step{{false, 2, newer}, {true, 1, older}}, 2},
		{"message, then the same report read", []step{{false, 2, newer}, {true, 1, newer}}, 2},
		{"read, then a newer message", []step{{true, 1, older}, {false, 2, newer}}, 2},
		{"read, then an older message queued before it", []step{{true, 2, newer}, {false, 1, older}}, 2},
		{"message, then a newer read", []step{{false, 1, older}, {true, 2, newer}}, 2},
		{"message, then a message stamped earlier (the instance's clock stepped back)", []step{{false, 1, newer}, {false, 2, older}}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := distributor.NewLiveReports(cfg, time.Minute)
			now := t0.Add(2 * time.Second)
			for _, s := range tc.steps {
				if s.seed {
					l.Seed([]cuecast.Report{{Instance: "web-1", Config: cfg, Version: s.v, At: s.at}}, now)
				} else {
					l.Add("web-1", reportJSON("web-1", s.v, s.at), now)
				}
			}
			rs := l.Live(now)
			if len(rs) != 1 || rs[0].Version != tc.want {
				t.Errorf("got %+v, want web-1 on v%d", rs, tc.want)
			}
		})
	}
}

// TestLiveReportsExpire: a report is live for the TTL after it arrived; one
// read from the stream counts as arrived at its own At, so it expires when
// the stream drops it.
func TestLiveReportsExpire(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	l := distributor.NewLiveReports(cfg, time.Minute)
	l.Seed([]cuecast.Report{
		{Instance: "read-40s-ago", Config: cfg, Version: 1, At: now.Add(-40 * time.Second)},
		{Instance: "clock-ahead", Config: cfg, Version: 1, At: now.Add(time.Hour)},
		{Instance: "other-config", Config: "payments/refunds", Version: 1, At: now},
		{Instance: "bad id!", Config: cfg, Version: 1, At: now},
	}, now)
	if !l.Add("web-1", reportJSON("web-1", 1, now), now) {
		t.Errorf("Add of a first report: got false, want new")
	}
	for _, tc := range []struct {
		name string
		inst string
		data []byte
	}{
		{"a report on another config", "web-2", []byte(`{"instance":"web-2","config":"payments/refunds","version":1}`)},
		{"a report naming another instance", "web-2", reportJSON("web-3", 1, now)},
		{"not a report", "web-2", []byte(`not json`)},
	} {
		if l.Add(tc.inst, tc.data, now) {
			t.Errorf("Add of %s: got new, want it ignored", tc.name)
		}
	}
	live := func() string {
		var ids []string
		for _, r := range l.Live(now) {
			ids = append(ids, r.Instance)
		}
		slices.Sort(ids)
		return fmt.Sprint(ids)
	}
	if got, want := live(), "[clock-ahead read-40s-ago web-1]"; got != want {
		t.Fatalf("live at first: got %s, want %s", got, want)
	}
	now = now.Add(30 * time.Second)
	if l.Add("web-1", reportJSON("web-1", 1, now), now) {
		t.Errorf("Add of a heartbeat: got new, want a repeat")
	}
	if got, want := live(), "[clock-ahead web-1]"; got != want {
		t.Errorf("live 30s later: got %s, want %s (the stream dropped read-40s-ago)", got, want)
	}
	now = now.Add(45 * time.Second)
	if got, want := live(), "[web-1]"; got != want {
		t.Errorf("live 75s later: got %s, want %s (the heartbeat kept web-1)", got, want)
	}
}

// TestLiveReportsExpireSkipsOnlyWhatCannotHaveExpired: expire scans only
// once the oldest arrival it keeps may be past the TTL, so every way an
// instance's report arrives must lower that bound: a report seeded with an
// old time, or an expected one, after a skipped scan still expires on time.
func TestLiveReportsExpireSkipsOnlyWhatCannotHaveExpired(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 5, 17, 0, 0, 0, time.UTC)
	l := distributor.NewLiveReports(cfg, time.Minute)
	l.Add("web-1", reportJSON("web-1", 1, t0), t0)
	for _, step := range []struct {
		name string
		do   func()
		at   time.Time
		want int
	}{
		{"nothing past the TTL", func() {}, t0.Add(30 * time.Second), 1},
		{"a report seeded as 50 s old", func() {
			l.Seed([]cuecast.Report{{Instance: "web-2", Config: cfg, Version: 1, At: t0.Add(-20 * time.Second)}}, t0.Add(30*time.Second))
		}, t0.Add(35 * time.Second), 2},
		{"the seeded one expired, web-1 not yet", func() {}, t0.Add(45 * time.Second), 1},
		{"an instance expected and never heard", func() { l.Expect([]string{"web-3"}, t0.Add(50*time.Second)) }, t0.Add(55 * time.Second), 2},
		{"web-1's heartbeat", func() { l.Add("web-1", reportJSON("web-1", 1, t0.Add(58*time.Second)), t0.Add(58*time.Second)) }, t0.Add(65 * time.Second), 2},
		{"web-3 expired", func() {}, t0.Add(111 * time.Second), 1},
		{"web-1 expired", func() {}, t0.Add(119 * time.Second), 0},
		{"a report after all expired", func() { l.Add("web-4", reportJSON("web-4", 1, t0.Add(120*time.Second)), t0.Add(120*time.Second)) }, t0.Add(121 * time.Second), 1},
		{"and it expires in turn", func() {}, t0.Add(181 * time.Second), 0},
	} {
		step.do()
		if got := l.Expire(step.at); got != step.want {
			t.Errorf("%s: expire at +%s: %d live, want %d", step.name, step.at.Sub(t0), got, step.want)
		}
	}
}

// TestWatchReports: the first reports come from the stream, later ones as
// messages, and reports sent while the connection was down from the read
// after it came back.
func TestWatchReports(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := natstest.Start(t)
	nc := s.Connect(t)
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
	if _, err := distributor.New(ctx, nc, distributor.Options{Logger: log}); err != nil {
		t.Fatalf("New: %v", err)
	}
	link := natstest.StartLink(t, s.Addr().String())
	// The watcher dials through a link the test can cut.
	wnc, err := nats.Connect("nats://"+link.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatalf("connect through the link: %v", err)
	}
	t.Cleanup(wnc.Close)
	d, err := distributor.Open(ctx, wnc, distributor.Options{Logger: log})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(d.Close)

	publishReport(t, nc, cuecast.Report{Instance: "web-1", Config: cfg, Version: 1, At: time.Now()})
	w, err := d.WatchReports(ctx, cfg)
	if err != nil {
		t.Fatalf("WatchReports: %v", err)
	}
	defer w.Stop()
	live := func() string {
		var ids []string
		for _, r := range w.Live() {
			ids = append(ids, fmt.Sprintf("%s@%d", r.Instance, r.Version))
		}
		return fmt.Sprint(ids)
	}
	if got, want := live(), "[web-1@1]"; got != want {
		t.Fatalf("after the read: got %s, want %s", got, want)
	}
	if err := nc.Publish(cuecast.ReportSubject(cfg, "web-2"), reportJSON("web-2", 1, time.Now())); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "web-2's report as a message", 10*time.Second, func() (bool, string) {
		return live() == "[web-1@1 web-2@1]", live()
	})

	link.Cut()
	poll.Until(t, "the watcher's connection down", 10*time.Second, func() (bool, string) {
		return !wnc.IsConnected(), wnc.Status().String()
	})
	publishReport(t, nc, cuecast.Report{Instance: "web-1", Config: cfg, Version: 2, At: time.Now()})
	link.Heal()
	poll.Until(t, "web-1's report sent while disconnected, read after the reconnect", 10*time.Second, func() (bool, string) {
		return live() == "[web-1@2 web-2@1]", live()
	})
}

// TestReceivedReportIsNeverUnheard: only LiveReports.Expect stands for an
// instance not heard yet. A report received without "at", or with the very
// time that marks an unheard one, is heard (stamped with its arrival): the
// rollout controller waits for an unheard cohort member, and one that stayed
// unheard would hold its rollouts up for good.
func TestReceivedReportIsNeverUnheard(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 1, 0, 0, 0, time.UTC)
	l := distributor.NewLiveReports(cfg, time.Minute)
	l.Expect([]string{"expected", "no-at", "sentinel-at", "seeded"}, now)
	l.Add("no-at", fmt.Appendf(nil, `{"instance":"no-at","config":%q,"version":1,"healthy":true}`, cfg), now)
	l.Add("sentinel-at", reportJSON("sentinel-at", 1, time.Unix(0, 1)), now)
	l.Seed([]cuecast.Report{{Instance: "seeded", Config: cfg, Version: 1, Healthy: true}}, now)
	for _, r := range l.Live(now) {
		if got, want := distributor.Unheard(r), r.Instance == "expected"; got != want {
			t.Errorf("%s: Unheard %t, want %t", r.Instance, got, want)
		}
	}
}
