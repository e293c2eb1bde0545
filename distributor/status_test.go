package distributor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestReportsWhileInstancesReport: instances keep reporting while the fleet
// is read, each report replacing the instance's last one (keep-last-1), and
// every read still returns every instance. The server lowers a consumer's
// pending count as soon as a report replaces one not yet delivered, but
// raises it for the new report only later; a read that trusted that count
// came back short, or empty, while every instance was live.
//
// On a tree the hub reads the region's summaries, replaced as they change
// (at most once an interval), and every read still counts every instance.
func TestReportsWhileInstancesReport(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, testReportsWhileInstancesReport)
}

func testReportsWhileInstancesReport(t *testing.T) {
	t.Parallel()
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	// The oracle is replacement, not expiry: a heartbeat of 2s lets a
	// report live 8s, room for a loaded machine's stalls, and a changing
	// summary still goes out every 400ms. (It was raised from 200ms when
	// a loaded run's read counted 3 of 20, put down then to a busy
	// summarizer; the instances had in fact stopped reporting: sent,
	// below.)
	fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments", "search"}, Logger: log, Heartbeat: 2 * time.Second})
	o := distributor.Options{Logger: log}
	if fl.Tree != nil {
		o.Heartbeat = fl.Heartbeat()
	}
	d := fl.Distributor(t, o)
	// count is how many instances reports stand for: on a single server
	// one each, on a tree each summary group its count.
	count := func(rs []cuecast.Report) int {
		if fl.Tree != nil {
			return distributor.Weigh(rs)
		}
		return len(rs)
	}
	// Enough instances, each reporting every millisecond, that some report
	// is always being replaced while a read runs.
	const instances = 10
	other := cuecast.ConfigPath("search/ranking")
	type subject struct {
		cfg cuecast.ConfigPath
		id  string
	}
	var subjects []subject
	for i := range instances {
		for _, c := range []cuecast.ConfigPath{cfg, other} {
			subjects = append(subjects, subject{c, string(rune('a' + i))})
		}
	}
	report := func(s subject, n int) cuecast.Report {
		return cuecast.Report{Instance: s.id, Config: s.cfg, Version: uint64(n), Healthy: true, At: time.Now()}
	}
	// The instances publish on their own connections, as they would.
	pubs := map[cuecast.ConfigPath]*nats.Conn{}
	for _, c := range []cuecast.ConfigPath{cfg, other} {
		pubs[c] = fl.Instance(t, c.Namespace())
	}
	// Every instance is stored before the first read.
	for _, s := range subjects {
		fl.Report(t, report(s, 0))
	}
	poll.Until(t, "every instance heard at the hub", poll.Patience, func() (bool, string) {
		all, err := d.Reports(t.Context(), "")
		if err != nil {
			return false, err.Error()
		}
		return count(all) == len(subjects), fmt.Sprintf("%d instances", count(all))
	})
	for _, s := range subjects {
		fl.Forget(s.cfg, s.id) // reported from now on by the loops below
	}
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	// sent counts each instance's reports, so that the test can tell
	// they kept coming while it read: its publishers once sent one each
	// and stopped (a flush that wants a deadline refused theirs, and they
	// took that for the end), and a read that came more than a report's
	// life (four heartbeats) after the first counted 0.
	sent := make([]atomic.Int64, len(subjects))
	for i, s := range subjects {
		wg.Go(func() {
			pub := pubs[s.cfg]
			for n := 1; ctx.Err() == nil; n++ {
				b, err := json.Marshal(report(s, n))
				if err != nil {
					t.Error(err)
					return
				}
				if err := pub.Publish(cuecast.ReportSubject(s.cfg, s.id), b); err != nil {
					if ctx.Err() == nil {
						t.Errorf("instance %s on %s: report %d: %v", s.id, s.cfg, n, err)
					}
					return
				}
				// A round trip per report keeps the publishers at the
				// server's pace: unpaced, 20 publishers at 1 kHz each
				// outran a busy server's store, and every request behind
				// that backlog (the reads under test) timed out.
				if err := pub.FlushTimeout(poll.Patience); err != nil {
					if ctx.Err() == nil {
						t.Errorf("instance %s on %s: flush report %d: %v", s.id, s.cfg, n, err)
					}
					return
				}
				sent[i].Add(1)
				time.Sleep(time.Millisecond)
			}
		})
	}
	counts := func() []int64 {
		out := make([]int64, len(sent))
		for i := range sent {
			out[i] = sent[i].Load()
		}
		return out
	}
	before := counts()
	for i := range 50 {
		all, err := d.Reports(ctx, "")
		if err != nil {
			t.Fatalf("read %d: Reports: %v", i, err)
		}
		if count(all) != len(subjects) {
			t.Fatalf("read %d: Reports: got %d instances, want %d; %s", i, count(all), len(subjects), storedNow(t, d, cfg))
		}
		one, err := d.Reports(ctx, cfg)
		if err != nil {
			t.Fatalf("read %d: Reports(%s): %v", i, cfg, err)
		}
		if count(one) != instances {
			t.Fatalf("read %d: Reports(%s): got %d instances, want %d (%+v); %s", i, cfg, count(one), instances, one, storedNow(t, d, cfg))
		}
	}
	// Every instance reported while the reads ran: they read reports
	// being replaced.
	after := counts()
	for i, s := range subjects {
		if after[i] <= before[i] {
			t.Errorf("instance %s on %s sent no report while the fleet was read (%d before the first read, %d after the last)", s.id, s.cfg, before[i], after[i])
		}
	}
}

// storedNow says what the hub's report stream holds of cfg's summaries
// now, and what a second read counts, for a read that came back short.
func storedNow(t *testing.T, d *distributor.Distributor, cfg cuecast.ConfigPath) string {
	sums, err := d.Summaries(t.Context(), cfg)
	out := fmt.Sprintf("summaries now (err %v):", err)
	for _, s := range sums {
		out += fmt.Sprintf(" %s live %d at %s stored %s ago;", s.Region, s.Live, s.At.Format(time.StampMilli), time.Since(s.Stored).Round(time.Millisecond))
	}
	rs, err := d.Reports(t.Context(), cfg)
	return out + fmt.Sprintf(" a read now: %d instances (err %v)", distributor.Weigh(rs), err)
}

// TestDriftOneRule: the one drift rule of status, the dashboard and the
// metrics. The CLI called a version out of retention drift and the
// dashboard did not; the CLI missed a version newer than the latest.
func TestDriftOneRule(t *testing.T) {
	t.Parallel()
	sums := map[uint64]string{2: "aaa", 3: "bbb"}
	for _, c := range []struct {
		name string
		r    cuecast.Report
		want bool
	}{
		{"on latest", cuecast.Report{Version: 3, Checksum: "bbb"}, false},
		{"behind, intact", cuecast.Report{Version: 2, Checksum: "aaa"}, false},
		{"other content", cuecast.Report{Version: 3, Checksum: "zzz"}, true},
		{"newer than latest", cuecast.Report{Version: 4, Checksum: "ccc"}, true},
		{"out of retention", cuecast.Report{Version: 1, Checksum: "old"}, false},
		{"no checksum reported", cuecast.Report{Version: 3}, false},
		{"nothing applied", cuecast.Report{}, false},
	} {
		why, got := distributor.Drift(c.r, sums, 3)
		if got != c.want || (got && why == "") {
			t.Errorf("%s: drift = %t (%q), want %t", c.name, got, why, c.want)
		}
	}
}

// TestDriftOfRetention: drift over a config's reports and retained
// versions, the form status and the dashboard both ask. An instance on a
// version retention removed cannot be checked and is not drift (the CLI
// called it drift, the dashboard did not); one on a retained version with
// other content, or on a version newer than the latest, is.
func TestDriftOfRetention(t *testing.T) {
	t.Parallel()
	retained := []cuecast.Version{{Version: 4, Checksum: "ddd"}, {Version: 3, Checksum: "ccc"}} // v1 and v2 removed
	for _, c := range []struct {
		name    string
		reports []cuecast.Report
		want    []string
	}{
		{"on a version retention removed", []cuecast.Report{{Instance: "old-1", Version: 1, Checksum: "aaa"}, {Instance: "old-2", Version: 2, Checksum: "zzz"}}, nil},
		{"on retained versions, intact", []cuecast.Report{{Instance: "a", Version: 3, Checksum: "ccc"}, {Instance: "b", Version: 4, Checksum: "ddd"}}, nil},
		{"retained version, other content", []cuecast.Report{{Instance: "b", Version: 3, Checksum: "xxx"}, {Instance: "a", Version: 1, Checksum: "xxx"}}, []string{"b"}},
		{"newer than the latest", []cuecast.Report{{Instance: "c", Version: 5, Checksum: "eee"}, {Instance: "a", Version: 4, Checksum: "bad"}}, []string{"a", "c"}},
	} {
		var got []string
		for _, d := range distributor.DriftOf(c.reports, retained, 4) {
			if d.Why == "" {
				t.Errorf("%s: %s drifted without a why", c.name, d.Instance)
			}
			got = append(got, d.Instance)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: drifted %v, want %v", c.name, got, c.want)
		}
	}
}

// TestDriftPerVariant: an instance reporting on a variant its dimension
// labels contradict runs another variant's content, and is drift; one
// whose labels agree, or that declares no such dimension, is not.
func TestDriftPerVariant(t *testing.T) {
	t.Parallel()
	const prodEU = cuecast.ConfigPath("payments/checkout/env=prod/region=eu")
	retained := []cuecast.Version{{Config: prodEU, Version: 2, Checksum: "eu2"}}
	reports := []cuecast.Report{
		{Instance: "eu-1", Config: prodEU, Version: 2, Checksum: "eu2", Labels: map[string]string{"env": "prod", "region": "eu", "tier": "gold"}},
		{Instance: "stg-1", Config: prodEU, Version: 2, Checksum: "eu2", Labels: map[string]string{"env": "staging", "region": "eu"}},
		{Instance: "us-1", Config: prodEU, Version: 2, Checksum: "us2", Labels: map[string]string{"env": "prod", "region": "us"}},
		{Instance: "unlabelled", Config: prodEU, Version: 2, Checksum: "eu2"},
	}
	got := distributor.DriftOf(reports, retained, 2)
	var names []string
	for _, d := range got {
		names = append(names, d.Instance+": "+d.Why)
	}
	want := []string{
		"stg-1: stg-1 declares env=staging but runs variant env=prod,region=eu (v2)",
		"us-1: us-1 declares region=us but runs variant env=prod,region=eu (v2)",
	}
	if !slices.Equal(names, want) {
		t.Errorf("drifted:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
}

// TestCoverageOfNoInstanceIsNotOne: a config nobody runs is not "fully
// covered"; it read 1.
func TestCoverageOfNoInstanceIsNotOne(t *testing.T) {
	t.Parallel()
	st := distributor.Summarize(cuecast.Version{Config: "a/b", Version: 1}, time.Now(), nil, nil, 0, time.Second, time.Now())
	if st.Coverage != 0 || st.Instances != 0 {
		t.Errorf("coverage %v with %d instances, want 0", st.Coverage, st.Instances)
	}
}

// TestStatusReadsEveryLatestAtOnce: the status of every config reads the
// newest version of all of them in one answer, so a status (and each
// dashboard sample) sends as many requests for 8 configs as for 2. It read
// each config's latest apart: a request per config, every second per
// dashboard. The fenced writer (serve's) counts the same way, and every
// config's status is against its newest version, whoever reads.
func TestStatusReadsEveryLatestAtOnce(t *testing.T) {
	natstest.BothModes(t, func(t *testing.T) {
		t.Parallel()
		fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}})
		d := fl.Distributor(t, distributor.Options{})
		if err := d.ClaimFence(t.Context(), 1, "serve"); err != nil {
			t.Fatal(err)
		}
		nc := fl.Hub(t) // the reader's own: what it sends is what Status asked
		rd, err := distributor.Open(t.Context(), nc, distributor.Options{})
		if err != nil {
			t.Fatal(err)
		}
		publish := func(from, to int) {
			t.Helper()
			for i := from; i < to; i++ {
				c := cuecast.ConfigPath(fmt.Sprintf("payments/svc%d", i))
				for n := range uint64(i%3 + 1) { // a config's versions: 1 to 3
					v := cuecast.Version{Config: c, Version: n + 1, Commit: fmt.Sprintf("c%d%d", i, n), Author: "ann", Message: "change"}
					if err := d.Publish(t.Context(), v, content(int(n))); err != nil {
						t.Fatal(err)
					}
				}
				fl.Report(t, cuecast.Report{Instance: fmt.Sprintf("svc%d-1", i), Config: c, Version: 1, Healthy: true})
			}
		}
		status := func(d *distributor.Distributor, configs int) uint64 {
			t.Helper()
			before := nc.Stats().OutMsgs
			st, err := d.Status(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			sent := nc.Stats().OutMsgs - before
			if len(st) != configs {
				t.Fatalf("status of %d configs, want %d", len(st), configs)
			}
			for i, s := range st {
				if want := uint64(i%3 + 1); s.Config != cuecast.ConfigPath(fmt.Sprintf("payments/svc%d", i)) || s.Latest.Version != want {
					t.Errorf("status %d: %s against v%d, want payments/svc%d against v%d", i, s.Config, s.Latest.Version, i, want)
				}
			}
			return sent
		}
		publish(0, 2)
		two := status(rd, 2)
		publish(2, 8)
		eight := status(rd, 8)
		t.Logf("a status sent %d requests for 2 configs, %d for 8", two, eight)
		if eight > two {
			t.Errorf("a status of 8 configs sent %d requests, of 2 configs %d: one more per config", eight, two)
		}
		// The fenced writer's status, against the newest versions too (what
		// it returns counts the reader's connection, so it is not used).
		status(d, 8)
	})
}

// TestStatusPastOneAnswer: past the subjects one multi-last get answers
// (the server's 1,024), Configs reads every retained version for the
// names, and a status of every config reads each config's latest apart,
// counted against the same reports: every config listed once, each against
// its newest version.
func TestStatusPastOneAnswer(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}})
	d := fl.Distributor(t, distributor.Options{})
	nc := fl.Hub(t) // the reader's own: what it sends is what it asked
	rd, err := distributor.Open(ctx, nc, distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const configs = 1030
	name := func(i int) cuecast.ConfigPath { return cuecast.ConfigPath(fmt.Sprintf("payments/svc%04d", i)) }
	// Every config's v1, then svc0007's v2, after every other config's first.
	for i := range configs + 1 {
		v := cuecast.Version{Config: name(i), Version: 1, Commit: fmt.Sprintf("c%d", i), Author: "ann", Message: "change"}
		if i == configs {
			v.Config, v.Version = name(7), 2
		}
		if err := d.Publish(ctx, v, content(int(v.Version))); err != nil {
			t.Fatal(err)
		}
	}
	v1, err := d.Latest(ctx, name(0))
	if err != nil {
		t.Fatal(err)
	}
	fl.Report(t, cuecast.Report{Instance: "svc0000-1", Config: name(0), Version: 1, Checksum: v1.Checksum, Healthy: true})
	fl.Report(t, cuecast.Report{Instance: "svc0007-1", Config: name(7), Version: 1, Healthy: true})

	before := nc.Stats().OutMsgs
	cfgs, err := rd.Configs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if sent := nc.Stats().OutMsgs - before; sent < 2 {
		t.Errorf("Configs sent %d request: the one multi-last get held every config, so its fallback was not tried", sent)
	}
	if len(cfgs) != configs {
		t.Fatalf("Configs listed %d configs, want %d", len(cfgs), configs)
	}
	for i, c := range cfgs {
		if c != name(i) {
			t.Fatalf("config %d is %s, want %s", i, c, name(i))
		}
	}

	var st []distributor.ConfigStatus
	poll.Until(t, "both reports counted", poll.Patience, func() (bool, string) {
		if st, err = rd.Status(ctx); err != nil {
			return false, err.Error()
		}
		return len(st) == configs && st[0].Instances == 1 && st[7].Instances == 1, fmt.Sprintf("%d configs", len(st))
	})
	for i, s := range st {
		want := uint64(1)
		if i == 7 {
			want = 2
		}
		if s.Config != name(i) || s.Latest.Version != want {
			t.Errorf("status %d: %s against v%d, want %s against v%d", i, s.Config, s.Latest.Version, name(i), want)
		}
	}
	if s := st[0]; s.OnLatest != 1 || s.OnIntended != 1 || s.Behind != 0 {
		t.Errorf("%s: %d on latest, %d on intended, %d behind; want its one instance on v1, the latest", s.Config, s.OnLatest, s.OnIntended, s.Behind)
	}
	if s := st[7]; s.OnLatest != 0 || s.Behind != 1 {
		t.Errorf("%s: %d on latest, %d behind; want its one instance behind, on v1 of v2", s.Config, s.OnLatest, s.Behind)
	}
}
