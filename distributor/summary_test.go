package distributor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// fleetReports makes n reports on cfg named <prefix>-<i>: every third on
// v1, failing to apply v2; the rest on v2, every fifth of those unhealthy.
func fleetReports(prefix string, n int) []cuecast.Report {
	var out []cuecast.Report
	for i := range n {
		r := cuecast.Report{Instance: fmt.Sprintf("%s-%d", prefix, i), Config: cfg, Version: 2, Checksum: "sum2", Healthy: true,
			Labels: map[string]string{"zone": fmt.Sprint("z", i%2)}}
		if i%3 == 0 {
			r.Version, r.Checksum, r.LastError = 1, "sum1", fmt.Sprintf("version 2: validate: bad field %d", i)
		} else if i%5 == 0 {
			r.Healthy = false
		}
		out = append(out, r)
	}
	return out
}

func TestSummaryCountsWhatReportsCount(t *testing.T) {
	t.Parallel()
	rs := fleetReports("web", 300)
	sum := distributor.BuildSummary("eu-west", cfg, rs, time.Now())
	data, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	got, err := distributor.DecodeSummary(cuecast.SummarySubject("eu-west", cfg), data)
	if err != nil {
		t.Fatalf("DecodeSummary: %v", err)
	}
	latest := cuecast.Version{Config: cfg, Version: 2, Checksum: "sum2"}
	now := time.Now()
	want := distributor.Summarize(latest, now, rs, nil, 0, time.Hour, now)
	have := distributor.Summarize(latest, now, got.Reports(false), nil, 0, time.Hour, now)
	if want.Instances != have.Instances || want.OnLatest != have.OnLatest || want.Behind != have.Behind ||
		want.Unhealthy != have.Unhealthy || want.Failing != have.Failing || have.Instances != 300 {
		t.Fatalf("from the summary %+v, from the reports %+v", have, want)
	}
	if len(data) > 40_000 {
		t.Errorf("a summary of 300 instances is %d bytes: it must not grow with the fleet", len(data))
	}
	// A group per class (here 6: two zones, failing, unhealthy, healthy),
	// each counted in at most every bucket, whatever the fleet.
	big := distributor.BuildSummary("eu-west", cfg, fleetReports("web", 30_000), now)
	if len(big.Groups) > 6 || len(big.Reports(false)) > 6*cuecast.Buckets {
		t.Errorf("30,000 instances of 6 classes make %d groups, %d reports", len(big.Groups), len(big.Reports(false)))
	}
	// Unknown: every instance unheard, none healthy or on a version.
	lost := distributor.Summarize(latest, now, got.Reports(true), nil, 0, time.Hour, now)
	if lost.Unknown != 300 || lost.OnLatest != 0 || lost.Instances != 300 {
		t.Fatalf("a lost region's summary counts %+v", lost)
	}
}

func TestDecodeSummaryRefusesWhatItCannotBelieve(t *testing.T) {
	t.Parallel()
	good := distributor.BuildSummary("eu-west", cfg, fleetReports("web", 20), time.Now())
	edit := func(f func(*distributor.Summary)) []byte {
		s := good
		s.Groups = append([]distributor.SummaryGroup(nil), good.Groups...)
		f(&s)
		b, _ := json.Marshal(s)
		return b
	}
	subj := cuecast.SummarySubject("eu-west", cfg)
	cases := map[string]struct {
		subject string
		data    []byte
	}{
		"another region's subject": {cuecast.SummarySubject("us-east", cfg), edit(func(*distributor.Summary) {})},
		"another config":           {subj, edit(func(s *distributor.Summary) { s.Config = "payments/other" })},
		"counts that do not add":   {subj, edit(func(s *distributor.Summary) { s.Live += 1000 })},
		"a sampled instance in a bucket of nobody": {subj, edit(func(s *distributor.Summary) {
			g := &s.Groups[0]
			from := cuecast.Cohort(cfg.Namespace(), g.Instances[0])
			to := (from + 1) % cuecast.Buckets
			g.ByBucket[to] += g.ByBucket[from]
			g.ByBucket[from] = 0
		})},
		"a sample out of order": {subj, edit(func(s *distributor.Summary) {
			g := &s.Groups[0]
			g.Instances = slices.Clone(g.Instances)
			slices.Reverse(g.Instances)
		})},
		"a sample past its bound": {subj, edit(func(s *distributor.Summary) {
			g := &s.Groups[0]
			g.Instances = append(slices.Clone(g.Instances), "zz-1", "zz-2", "zz-3")
		})},
		"a group of nobody": {subj, edit(func(s *distributor.Summary) {
			g := &s.Groups[0]
			s.Live -= g.Count()
			g.ByBucket = distributor.BucketCounts{}
		})},
		"counts without names": {subj, edit(func(s *distributor.Summary) {
			s.Groups[0].Instances = nil
		})},
		"bucket counts too short": {subj, regexp.MustCompile(`"by_bucket":"[^"]*"`).ReplaceAll(edit(func(*distributor.Summary) {}), []byte(`"by_bucket":"AAAAAQ=="`))},
		"an error of another class": {subj, edit(func(s *distributor.Summary) {
			for i, g := range s.Groups {
				if g.Error != "" {
					s.Groups[i].Errors = []string{"version 9: apply: no"}
				}
			}
		})},
		// Drops are counted at the hub by reason: the label stays bounded.
		"drops for no known reason": {subj, edit(func(s *distributor.Summary) { s.Dropped = map[string]int{"because": 1} })},
		"a negative drop count":     {subj, edit(func(s *distributor.Summary) { s.Dropped = map[string]int{distributor.DropInstance: -5} })},
	}
	for name, c := range cases {
		if _, err := distributor.DecodeSummary(c.subject, c.data); !errors.Is(err, distributor.ErrReportSubject) {
			t.Errorf("%s: DecodeSummary = %v, want ErrReportSubject", name, err)
		}
	}
	// An instance's report never speaks for more than one.
	b, _ := json.Marshal(cuecast.Report{Instance: "web-1", Config: cfg, Version: 2, Count: 5000})
	if _, err := distributor.DecodeReport(cuecast.ReportSubject(cfg, "web-1"), b); !errors.Is(err, distributor.ErrReportSubject) {
		t.Errorf("a report with a count: DecodeReport = %v, want ErrReportSubject", err)
	}
}

// region is one summarising region of a test tree: its server, its
// summarizer (stop ends it) and its instances, which report every
// heartbeat until the test ends.
type region struct {
	srv  *natstest.TreeServer
	stop context.CancelFunc
	done chan struct{}
}

// regionTree starts a tree of leaves regions carrying payments, and a
// distributor on its hub beating every hb, with version 1 published.
func regionTree(t *testing.T, leaves int, hb time.Duration) (*natstest.Tree, *distributor.Distributor) {
	t.Helper()
	tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: leaves, Namespaces: []string{"payments"}, Regions: true})
	d := newDistOn(t, tr.Hub.Connect(t, natsconf.DistributorUser), distributor.Options{Heartbeat: hb})
	mustPublish(t, d, 1, content(1))
	return tr, d
}

func startRegion(t *testing.T, srv *natstest.TreeServer, hb time.Duration, rs []cuecast.Report, set ...func(*distributor.SummarizerOptions)) *region {
	t.Helper()
	r := summarize(t, srv, hb, set...)
	reportEvery(t, srv.Connect(t, natsconf.ServiceUser("payments")), hb, rs)
	return r
}

// summarize starts the summarizer of srv's region, beating every hb,
// until the test ends or the region's stop is called.
func summarize(t *testing.T, srv *natstest.TreeServer, hb time.Duration, set ...func(*distributor.SummarizerOptions)) *region {
	t.Helper()
	return runSummarizer(t, srv, newSummarizer(t, srv, hb, set...))
}

// newSummarizer is the summarizer of srv's region, beating every hb, not
// started (runSummarizer).
func newSummarizer(t *testing.T, srv *natstest.TreeServer, hb time.Duration, set ...func(*distributor.SummarizerOptions)) *distributor.Summarizer {
	t.Helper()
	o := distributor.SummarizerOptions{Region: srv.Spec.Name, Heartbeat: hb, Interval: hb / 10, Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, f := range set {
		f(&o)
	}
	// The summarizer logs in with its own least-privilege credential.
	s, err := distributor.NewSummarizer(srv.Connect(t, natsconf.SummarizerUser(srv.Spec.Name)), o)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runSummarizer runs s, the summarizer of srv's region, until the test
// ends or the region's stop is called.
func runSummarizer(t *testing.T, srv *natstest.TreeServer, s *distributor.Summarizer) *region {
	ctx, cancel := context.WithCancel(t.Context())
	r := &region{srv: srv, stop: cancel, done: make(chan struct{})}
	go func() {
		if err := s.Run(ctx); err != nil {
			t.Errorf("summarizer: %v", err)
		}
		close(r.done)
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

// reportEvery publishes rs on nc now and then every hb, as instances
// report, until the test ends. They stop mid-round when it ends, and the
// test waits for them before nc closes (cleanups run last first): a round
// of 10,000 reports outlasted the test, and its next publish, on the
// closed connection, failed the test after it had completed. Each of
// after, if any, is called after each round.
func reportEvery(t *testing.T, nc *nats.Conn, hb time.Duration, rs []cuecast.Report, after ...func()) {
	t.Helper()
	every(t, hb, func() {
		for _, rep := range rs {
			if t.Context().Err() != nil {
				return
			}
			rep.At = time.Now().UTC()
			b, _ := json.Marshal(rep)
			if err := nc.Publish(cuecast.ReportSubject(cfg, rep.Instance), b); err != nil {
				t.Errorf("report: %v", err)
			}
		}
		for _, f := range after {
			f()
		}
	})
}

// every calls send now and then every hb until the test ends, and the
// test waits for the last call to return before its connections close.
func every(t *testing.T, hb time.Duration, send func()) {
	t.Helper()
	send()
	reporting := make(chan struct{})
	go func() {
		defer close(reporting)
		tk := time.NewTicker(hb)
		defer tk.Stop()
		for {
			select {
			case <-t.Context().Done():
				return
			case <-tk.C:
				send()
			}
		}
	}()
	t.Cleanup(func() { <-reporting })
}

// TestSummarisedTree runs the summarising path end to end on a tree of
// generated configurations: two regions' summarizers, instances reporting
// to their region, and the hub's distributor, which sees summaries and no
// instance report, counts the fleet from them, drills down to instance
// detail, and shows a region that stops summarising as unknown.
func TestSummarisedTree(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	east := startRegion(t, tr.Leaves[0], hb, fleetReports("east", 60))
	startRegion(t, tr.Leaves[1], hb, fleetReports("west", 90))

	status := func() distributor.ConfigStatus {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			t.Fatal(err)
		}
		return st[0]
	}
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st := status()
		return st.Instances == 150 && st.Unknown == 0, fmt.Sprintf("%+v", st)
	})
	st := status()
	want := distributor.Summarize(cuecast.Version{Config: cfg, Version: 1}, time.Now(), append(fleetReports("east", 60), fleetReports("west", 90)...), nil, 0, time.Hour, time.Now())
	if st.Unhealthy != want.Unhealthy || st.Failing != want.Failing || st.OnLatest != want.OnLatest {
		t.Fatalf("from the summaries %+v, from the reports %+v", st, want)
	}

	// No instance report crossed a region's link: only summaries did.
	js, err := jetstream.New(tr.Hub.Connect(t, natsconf.DistributorUser))
	if err != nil {
		t.Fatal(err)
	}
	rst, err := js.Stream(t.Context(), cuecast.ReportStream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := rst.Info(t.Context(), jetstream.WithSubjectFilter(cuecast.ReportPrefix+".>"))
	if err != nil {
		t.Fatal(err)
	}
	if len(info.State.Subjects) != 0 {
		t.Fatalf("the hub stores %d instance reports; a region's link must carry summaries only", len(info.State.Subjects))
	}

	// Drill-down: the instances' own reports, from the regions that hold them.
	det, err := d.Detail(t.Context(), cfg, distributor.DetailRequest{Instances: []string{"east-3", "west-10"}, Labels: map[string]string{"zone": "z9"}})
	if err != nil {
		t.Fatalf("Detail: %v", err)
	}
	if len(det) != 2 || det[0].Instance != "east-3" || det[1].Instance != "west-10" || det[0].Version != 1 || det[0].LastError == "" {
		t.Fatalf("Detail = %+v", det)
	}

	// Loss: a region that stops summarising is unknown, then gone.
	east.stop()
	<-east.done
	poll.Until(t, "the silent region's instances are unknown", poll.Patience, func() (bool, string) {
		st := status()
		return st.Unknown == 60 && st.Instances == 150, fmt.Sprintf("%+v", st)
	})
	poll.Until(t, "the silent region's summary expires", poll.Patience, func() (bool, string) {
		st := status()
		return st.Unknown == 0 && st.Instances == 90, fmt.Sprintf("%+v", st)
	})
	// The drill-down says which region did not answer.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Second)
	defer cancel()
	if _, err := d.Detail(ctx, cfg, distributor.DetailRequest{Instances: []string{"east-3"}}); err != nil {
		t.Fatalf("Detail after the region's summary expired: %v (it is no longer asked)", err)
	}
}

// TestSummarySizeDoesNotDependOnTheFleet pins what a summary costs the
// hub in bytes: per group (a class of alike instances) a constant, at
// rest and mid-change (instances moved to v2 at random, as a change
// spreads), from 100 instances to 100,000. Its groups counted each
// non-empty bucket with a name, so a region's summary grew with how full
// its buckets were (at 250 instances mid-change a group held about 70 of
// the 100), and the hub's bytes per change grew from 1,000 instances to
// 10,000 by 40 % in the scale harness (BENCHMARKS.md, Scale, "Both
// modes").
func TestSummarySizeDoesNotDependOnTheFleet(t *testing.T) {
	t.Parallel()
	sum := func(v uint64) string { return fmt.Sprintf("%064x", v) } // a checksum's length
	at := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	rnd := rand.New(rand.NewPCG(1, 2)) // the same fleet every run
	build := func(n int, moved float64) (distributor.Summary, []byte) {
		rs := make([]cuecast.Report, n)
		for i := range rs {
			v := uint64(1)
			if rnd.Float64() < moved {
				v = 2
			}
			rs[i] = cuecast.Report{Instance: fmt.Sprintf("region-1-%06d", i), Config: cfg, Version: v, Checksum: sum(v), Healthy: true,
				Labels: map[string]string{"zone": "eu-west-1a", "tier": "web"}, AppliedAt: at.Add(time.Duration(i) * time.Millisecond)}
		}
		s := distributor.BuildSummary("region-1", cfg, rs, at)
		data, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if w := distributor.Weigh(s.Reports(false)); w != n {
			t.Fatalf("%d instances: the summary's reports stand for %d", n, w)
		}
		return s, data
	}
	const perClass = 1_024 // 536 of counts; checksum, labels, sampled names, times, field names
	for _, moved := range []float64{0, 0.25, 0.5, 0.75} {
		var sizes []int
		for _, n := range []int{100, 250, 1_000, 10_000, 100_000} {
			s, data := build(n, moved)
			if len(data) > perClass*len(s.Groups) {
				t.Errorf("%.0f%% moved, %d instances: the summary is %d bytes in %d groups; want at most %d a group", moved*100, n, len(data), len(s.Groups), perClass)
			}
			sizes = append(sizes, len(data))
		}
		// What varies is the text of the latest apply's time, a few bytes.
		if lo, hi := slices.Min(sizes), slices.Max(sizes); hi-lo > 16 {
			t.Errorf("%.0f%% moved: summaries of 100 to 100,000 instances are %v bytes, %d apart", moved*100, sizes, hi-lo)
		}
		t.Logf("%.0f%% moved: %v bytes at 100 / 250 / 1,000 / 10,000 / 100,000 instances", moved*100, sizes)
	}
}

// TestSummaryNamesItsSampledInstances: a summary carries a sample of each
// group's names, and a reader names a bucket's report after the sampled
// instance in it; every other bucket's report is named GroupName, which
// no instance can be.
func TestSummaryNamesItsSampledInstances(t *testing.T) {
	t.Parallel()
	rs := fleetReports("web", 400)
	s := distributor.BuildSummary("eu-west", cfg, rs, time.Now())
	sampled := map[string]bool{}
	for gi, g := range s.Groups {
		if len(g.Instances) != distributor.SampleSize || !slices.IsSorted(g.Instances) {
			t.Fatalf("group %d samples %v, want the %d first names, sorted", gi, g.Instances, distributor.SampleSize)
		}
		for _, id := range g.Instances {
			sampled[id] = true
		}
	}
	seen := map[string]bool{}
	named := 0
	for _, r := range s.Reports(false) {
		if seen[r.Instance] {
			t.Fatalf("two reports named %q", r.Instance)
		}
		seen[r.Instance] = true
		switch {
		case sampled[r.Instance]:
			named++
			if b := cuecast.Cohort(cfg.Namespace(), r.Instance); b != r.Cohort {
				t.Fatalf("report of bucket %d named after %q, of bucket %d", r.Cohort, r.Instance, b)
			}
		case cuecast.ValidateInstance(r.Instance) == nil:
			t.Fatalf("report of bucket %d named %q: an instance's name, not sampled", r.Cohort, r.Instance)
		case !strings.HasPrefix(r.Instance, fmt.Sprintf("eu-west/b%d/g", r.Cohort)):
			t.Fatalf("report of bucket %d named %q, want GroupName", r.Cohort, r.Instance)
		}
	}
	if named == 0 {
		t.Fatal("no report is named after a sampled instance")
	}
}

// TestSummaryBoundsLabelSets: a region whose instances each carry their
// own label (a host name) made a group per instance, and its summary grew
// with the fleet (2.6 MB at 10,000 instances, past the 1 MB a message may
// carry: the region could not summarise at all). Beyond MaxLabelSets
// label sets the keys of most values are left out of the groups, but a
// variant dimension stays: drift on it is still seen.
func TestSummaryBoundsLabelSets(t *testing.T) {
	t.Parallel()
	const prod = cuecast.ConfigPath("payments/checkout/env=prod")
	fleet := func(n, hosts int) []cuecast.Report {
		var rs []cuecast.Report
		for i := range n {
			env := "prod"
			if i%100 == 0 {
				env = "staging" // declares another variant than it runs: drift
			}
			rs = append(rs, cuecast.Report{Instance: fmt.Sprintf("web-%06d", i), Config: prod, Version: 1, Checksum: "sum1", Healthy: true,
				Labels: map[string]string{"host": fmt.Sprintf("host-%06d.eu-west-1.internal", i%hosts), "zone": fmt.Sprint("eu-", i%3), "env": env}})
		}
		return rs
	}
	const n = 10_000
	s := distributor.BuildSummary("eu-west", prod, fleet(n, n), time.Now())
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if len(data) > 64_000 {
		t.Errorf("%d instances, each with its own host label: the summary is %d bytes in %d groups", n, len(data), len(s.Groups))
	}
	for _, g := range s.Groups {
		if _, ok := g.Labels["host"]; ok || g.Labels["zone"] == "" || g.Labels["env"] == "" {
			t.Fatalf("a group's labels %v: want zone and env (a dimension), not host", g.Labels)
		}
	}
	drifted := 0
	for _, d := range distributor.DriftOf(s.Reports(false), []cuecast.Version{{Config: prod, Version: 1, Checksum: "sum1"}}, 1) {
		drifted += d.Weight()
	}
	if drifted != n/100 {
		t.Errorf("drift on the variant's dimension: %d instances from the summary, want %d", drifted, n/100)
	}
	// Few label sets: every label kept.
	few := distributor.BuildSummary("eu-west", prod, fleet(n, 5), time.Now())
	for _, g := range few.Groups {
		if g.Labels["host"] == "" {
			t.Fatalf("5 hosts × 3 zones × 2 envs: a group's labels %v lack the host", g.Labels)
		}
	}
}
