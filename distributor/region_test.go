package distributor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestDetailAnswerBoundToItsRegion plays a region that answers drill-downs
// for another: region leaf-1's host (its distributor login, which may
// publish anything in its own server) answers every drill-down request in
// the name of leaf-2, whose summarizer has stopped, with forged reports of
// leaf-2's instances — on the request's reply subject, and on its own
// region's answer subject with a body naming leaf-2. The hub's Detail
// believes neither: it returns leaf-1's real instances, and says leaf-2
// did not answer.
func TestDetailAnswerBoundToItsRegion(t *testing.T) {
	t.Parallel()
	tr, d, _, west := twoRegions(t)
	// leaf-2 falls silent; its summary is still in the stream, so it is
	// asked, and cannot answer.
	west.stop()
	<-west.done

	liar := tr.Leaves[0].Connect(t, natsconf.DistributorUser)
	forged, _ := json.Marshal(distributor.DetailReply{Region: "leaf-2", Reports: []cuecast.Report{
		{Instance: "west-1", Config: cfg, Version: 99, Healthy: true},
	}})
	sub, err := liar.Subscribe(cuecast.DetailPrefix+".>", func(m *nats.Msg) {
		if m.Reply != "" {
			_ = m.Respond(forged)
		}
		var req distributor.DetailRequest
		if json.Unmarshal(m.Data, &req) == nil && req.Reply != "" {
			_ = liar.Publish(cuecast.DetailReplySubject("leaf-1", req.Reply), forged)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := liar.Flush(); err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	det, err := d.Detail(ctx, cfg, distributor.DetailRequest{})
	if !errors.Is(err, distributor.ErrDetailIncomplete) || !strings.Contains(err.Error(), "leaf-2") {
		t.Errorf("Detail error = %v, want ErrDetailIncomplete naming leaf-2 (which did not answer)", err)
	}
	for _, r := range det {
		if r.Version == 99 || strings.HasPrefix(r.Instance, "west-") {
			t.Errorf("Detail believed an answer for leaf-2 from leaf-1: %+v", r)
		}
	}
	if len(det) != 6 {
		t.Errorf("Detail = %d reports, want leaf-1's 6: %+v", len(det), det)
	}
}

// TestDetailSaysWhatARegionLeftOut: a region answers a drill-down with at
// most its DetailLimit of reports and counts the rest in More. Detail, which
// the rollout controller judges named and labelled stages by and check
// --fleet counts a blast radius by, returned the reports it got with no
// error, so either took part of a region for the whole of it.
func TestDetailSaysWhatARegionLeftOut(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 1, hb)
	startRegion(t, tr.Leaves[0], hb, fleetReports("east", 9), func(o *distributor.SummarizerOptions) { o.DetailLimit = 4 })
	poll.Until(t, "the hub counts the region's instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 9, fmt.Sprintf("%+v", st[0])
	})
	det, err := d.Detail(t.Context(), cfg, distributor.DetailRequest{})
	if !errors.Is(err, distributor.ErrDetailTruncated) || !strings.Contains(err.Error(), "leaf-1 (5 more than the 4 it sent)") {
		t.Errorf("Detail error = %v, want ErrDetailTruncated naming leaf-1 and the 5 left out", err)
	}
	if len(det) != 4 {
		t.Errorf("Detail = %d reports, want the 4 the region sent", len(det))
	}
	// The per-region view says the same without an error: it is the
	// operator's, and shows the count left out (status --instances).
	regions, err := d.DetailByRegion(t.Context(), cfg, distributor.DetailRequest{})
	if err != nil || len(regions) != 1 || regions[0].More != 5 || len(regions[0].Reports) != 4 {
		t.Errorf("DetailByRegion = %+v, %v; want leaf-1 with 4 reports and 5 more", regions, err)
	}
}

// TestDrillDownBelievesARegionOnlyForItself plays region leaf-1's host,
// which holds its own server and its summarizer's credential: on its own
// server it reports west-5, an instance of leaf-2 that failed to apply v2
// and is unhealthy there, as healthy on v2, so its summary and its
// drill-down answers hold west-5 too. A stage naming west-5 was judged on
// leaf-1's word (its name sorts first) and leaf-2's own report of west-5
// was dropped, its instance taken out of leaf-1's group, not leaf-2's.
// Now each region's answer leaves only that region's groups, and the
// instance two regions claim is judged on the worse claim: leaf-2's.
// The honest instances named beside it are judged on their own region's
// word, and leaf-2's groups and west-5 still count leaf-2's 9 instances
// (a strict cutover waits for them all); west-5 counts in leaf-1's part
// too, since leaf-1 claimed it.
func TestDrillDownBelievesARegionOnlyForItself(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	forged := cuecast.Report{Instance: "west-5", Config: cfg, Version: 2, Checksum: "sum2", Healthy: true}
	startRegion(t, tr.Leaves[0], hb, append(fleetReports("east", 3), forged))
	west := fleetReports("west", 9)
	west[5] = cuecast.Report{Instance: "west-5", Config: cfg, Version: 1, Checksum: "sum1", Healthy: false, LastError: "version 2: validate: bad field 5"}
	startRegion(t, tr.Leaves[1], hb, west)
	var reports []cuecast.Report
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		var err error
		reports, err = d.Reports(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return distributor.Weigh(reports) == 13, fmt.Sprintf("%+v", reports)
	})
	r := &rollout.Rollout{Config: cfg, Version: 2, Policy: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "named", Instances: []string{"west-5", "west-1", "east-1"}}, {Name: "all", Percent: 100}}}}
	dr, err := rollout.DrillDown(t.Context(), d, cfg, r, reports)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]cuecast.Report{"west-5": west[5], "west-1": west[1], "east-1": fleetReports("east", 3)[1]}
	// west-5, claimed by both, counts in both regions' parts of the fleet.
	region := map[string]string{"west-5": "leaf-1 leaf-2", "west-1": "leaf-2", "east-1": "leaf-1"}
	seen := map[string]int{}
	byRegion := map[string]int{}
	for _, rp := range dr.Reports {
		claimants := rollout.Claimants(rp)
		for _, c := range claimants {
			byRegion[c] += rp.Weight()
		}
		w, ok := want[rp.Instance]
		if !ok || rp.Count != 0 {
			continue
		}
		seen[rp.Instance]++
		if from := strings.Join(claimants, " "); rp.Healthy != w.Healthy || rp.Version != w.Version || rp.LastError != w.LastError || from != region[rp.Instance] {
			t.Errorf("%s judged as healthy=%v v%d %q from %q, want healthy=%v v%d %q from %s",
				rp.Instance, rp.Healthy, rp.Version, rp.LastError, from, w.Healthy, w.Version, w.LastError, region[rp.Instance])
		}
	}
	for id := range want {
		if seen[id] != 1 {
			t.Errorf("%s: %d reports of its own, want 1", id, seen[id])
		}
	}
	if byRegion["leaf-2"] != 9 {
		t.Errorf("leaf-2's groups and instances count %d, want its 9 (by region: %v)", byRegion["leaf-2"], byRegion)
	}
}

// TestSplitLeavesOnlyItsOwnRegionsGroups: a region's drill-down answer
// naming another region's instances (which its host can report on its own
// server) takes them out of its own groups in their bucket, or, where it
// counts nobody there, is left out; the other region's groups keep their
// instances, and a report that names no region speaks for none.
func TestSplitLeavesOnlyItsOwnRegionsGroups(t *testing.T) {
	t.Parallel()
	now := time.Now()
	reports := slices.Concat(distributor.BuildSummary("eu-west", cfg, fleetReports("east", 20), now).Reports(false),
		distributor.BuildSummary("us-east", cfg, fleetReports("west", 20), now).Reports(false))
	var detail []cuecast.Report
	for _, r := range fleetReports("east", 20) {
		r.Region = "us-east" // us-east answers for every one of eu-west's instances
		detail = append(detail, r)
	}
	unbound := fleetReports("west", 1)[0] // no region: nobody's answer
	split := distributor.Split(reports, append(detail, unbound))
	weight := map[string]int{}
	for _, r := range split {
		weight[r.Region] += r.Weight()
	}
	if weight["eu-west"] != 20 || weight["us-east"] != 20 || len(weight) != 2 {
		t.Errorf("after the split the regions count %v, want eu-west and us-east 20 each", weight)
	}
}

// twoRegions starts a tree of two summarising regions, leaf-1 with six
// instances (east-*) and leaf-2 with nine (west-*), beating every 500 ms,
// and waits until the hub counts all 15.
//
// The hub keeps a summary for four of its own heartbeats, an hour each:
// a test stops a region's summarizer and still finds its summary, so the
// hub asks the region it stopped, however long the test takes to get
// there. With the regions' 500 ms, a stopped region's summary was gone
// two seconds later, and a loaded machine took longer than that to build
// an answer and ask.
func twoRegions(t *testing.T) (tr *natstest.Tree, d *distributor.Distributor, east, west *region) {
	t.Helper()
	const hb = 500 * time.Millisecond
	tr, d = regionTree(t, 2, time.Hour)
	east = startRegion(t, tr.Leaves[0], hb, fleetReports("east", 6))
	west = startRegion(t, tr.Leaves[1], hb, fleetReports("west", 9))
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 15, fmt.Sprintf("%+v", st[0])
	})
	return tr, d, east, west
}

// TestDetailAnswerBoundedAtTheHub plays region leaf-1's host, which holds
// its own server: with its summarizer stopped it answers every drill-down
// itself, on its own region's answer subject, with an answer of many
// parts that carries more reports than any region's limit, one with a
// last_error of 200 KB. The hub keeps at most the limit, counts the rest
// as left out, and cuts each report's texts as it does a report it reads
// (distributor.DecodeReport); before, it kept whatever the parts carried,
// for as long as they came. Region leaf-2's answer is still taken whole.
func TestDetailAnswerBoundedAtTheHub(t *testing.T) {
	t.Parallel()
	tr, d, east, _ := twoRegions(t)
	east.stop()
	<-east.done

	const perPart, parts = 4_000, 3
	var answers [][]byte
	for p := range parts {
		rs := make([]cuecast.Report, perPart)
		for i := range rs {
			rs[i] = cuecast.Report{Instance: fmt.Sprintf("east-%d-%d", p, i), Config: cfg, Version: 2, Checksum: "sum2", Healthy: true}
		}
		rs[0].LastError = strings.Repeat("x", 200_000)
		b, err := json.Marshal(distributor.DetailReply{Region: "leaf-1", Reports: rs, Answer: "flood", Part: p, Continued: p < parts-1})
		if err != nil {
			t.Fatal(err)
		}
		answers = append(answers, b)
	}
	liar := tr.Leaves[0].Connect(t, natsconf.DistributorUser)
	sub, err := liar.Subscribe(cuecast.DetailPrefix+".>", func(m *nats.Msg) {
		var req distributor.DetailRequest
		if json.Unmarshal(m.Data, &req) != nil || req.Reply == "" {
			return
		}
		for _, b := range answers {
			_ = liar.Publish(cuecast.DetailReplySubject("leaf-1", req.Reply), b)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := liar.Flush(); err != nil {
		t.Fatal(err)
	}
	// The host's answerer listens before the hub asks (its summarizer,
	// stopped above, took the hub's interest in the requests with it).
	tr.Leaves[0].WaitParentInterest(t, cuecast.DetailPrefix+".>")

	// The test's patience, not Detail's 5 s: the hub decodes 12,000
	// reports here, under the race detector on a loaded box
	// (TestDetailAnswersUpToItsLimit).
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	regions, err := d.DetailByRegion(ctx, cfg, distributor.DetailRequest{})
	if err != nil || len(regions) != 2 {
		t.Fatalf("DetailByRegion = %d regions, %v; want both", len(regions), err)
	}
	east1, west := regions[0], regions[1]
	if len(east1.Reports) != distributor.DefaultDetailLimit || east1.More != perPart*parts-distributor.DefaultDetailLimit {
		t.Errorf("leaf-1: %d reports, %d more; want the limit, %d, and the %d past it counted", len(east1.Reports), east1.More, distributor.DefaultDetailLimit, perPart*parts-distributor.DefaultDetailLimit)
	}
	for _, r := range east1.Reports {
		if len(r.LastError) > distributor.MaxReportText+len(distributor.Truncated) {
			t.Errorf("leaf-1's %s: a last_error of %d bytes kept, want at most %d", r.Instance, len(r.LastError), distributor.MaxReportText)
		}
	}
	if len(west.Reports) != 9 || west.More != 0 {
		t.Errorf("leaf-2: %d reports, %d more; want its 9", len(west.Reports), west.More)
	}
}

// The rollout rules of a summarised tree (docs/SCALING.md, "Bound to the
// region", "Loss rule"; docs/ROLLOUT.md, "Health") played on a real tree:
// the hub's real controller, the regions' real summarizers on their own
// servers, from generated configurations.

// hubController runs a rollout controller on the hub with d, rolling
// out by pol, with d's heartbeat hb, until the test ends; each of set, if
// any, changes its options.
func hubController(t *testing.T, hub *natstest.TreeServer, d *distributor.Distributor, hb time.Duration, pol cuecast.Policy, cons cuecast.Consistency, set ...func(*rollout.Options)) *rollout.Controller {
	t.Helper()
	o := rollout.Options{Interval: 20 * time.Millisecond, Heartbeat: hb, ApplyTimeout: time.Minute,
		Logger: slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))}
	for _, f := range set {
		f(&o)
	}
	c, err := rollout.New(t.Context(), hub.Connect(t, natsconf.DistributorUser), d, rollout.Static{P: pol, Consistency: cons}, o)
	if err != nil {
		t.Fatalf("rollout.New: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("controller Run: %v", err)
		}
	})
	return c
}

// settled waits until c's rollout of v is halted or complete, and
// returns its record.
func settled(t *testing.T, c *rollout.Controller, v uint64) rollout.Record {
	t.Helper()
	var rec rollout.Record
	poll.Until(t, fmt.Sprintf("the rollout of v%d halts or completes", v), poll.Patience, func() (bool, string) {
		var err error
		if rec, err = c.Record(t.Context(), cfg); err != nil {
			return false, err.Error()
		}
		cur := rec.Current
		if cur == nil {
			return false, "no rollout"
		}
		return cur.Version == v && (cur.State == rollout.StateHalted || cur.State == rollout.StateComplete),
			fmt.Sprintf("v%d %s stage %d note %q", cur.Version, cur.State, cur.Stage, cur.Note)
	})
	return rec
}

// healthyOn is n reports of instances prefix-0… running v, healthy.
func healthyOn(prefix string, n int, v uint64) []cuecast.Report {
	out := make([]cuecast.Report, n)
	for i := range out {
		out[i] = cuecast.Report{Instance: fmt.Sprintf("%s-%d", prefix, i), Config: cfg, Version: v, Checksum: fmt.Sprint("sum", v), Healthy: true}
	}
	return out
}

// TestRegionCannotMaskAnothersNamedCanary plays region leaf-1's host,
// which holds its own server and its summarizer's credential, against a
// stage that names west-3, an instance of leaf-2: west-3 is unhealthy on
// v2, and leaf-1 reports it on its own server as healthy on v2, beside
// its own 60 healthy instances. leaf-2's own part of the cohort (west-3
// and its instances in the stage's buckets) breaches max_unhealthy, so
// the stage must halt. The instance both regions claimed was judged on
// the worse claim (unhealthy) but counted in the part of the region that
// sorted first, leaf-1's, where leaf-1's own instances diluted it, and
// the stage passed: one region masked another's bad canary.
func TestRegionCannotMaskAnothersNamedCanary(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	v2 := mustPublish(t, d, 2, content(2))
	const named = "west-3"
	west := healthyOn("west", 8, 2)
	west[3].Healthy = false
	forged := west[3]
	forged.Healthy = true
	east := healthyOn("east", 60, 2)
	startRegion(t, tr.Leaves[0], hb, append(east, forged))
	startRegion(t, tr.Leaves[1], hb, west)
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "early", Percent: 50, Instances: []string{named}, MaxUnhealthy: 0.05},
		{Name: "all", Percent: 100, MaxUnhealthy: 0.05},
	}}
	// The premise: leaf-2's part of the first stage breaches 5 %, and
	// leaf-1's part with west-3 in it, or the whole cohort, would not.
	in := func(rs []cuecast.Report) int {
		n := 0
		for _, r := range rs {
			if r.Instance != named && cuecast.Cohort(cfg.Namespace(), r.Instance) < 50 {
				n++
			}
		}
		return n
	}
	if w, e := in(west), in(east); 1.0/float64(w+1) <= 0.05 || 1.0/float64(e+1) > 0.05 {
		t.Fatalf("premise: %d of leaf-2's and %d of leaf-1's instances in the stage's buckets", w, e)
	}
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		// 69: west-3 twice, since each region counts it.
		return st[0].Instances == 69 && st[0].Unknown == 0, fmt.Sprintf("%+v", st[0])
	})

	c := hubController(t, tr.Hub, d, hb, pol, cuecast.Relaxed)
	if err := c.Deploy(t.Context(), v2); err != nil {
		t.Fatalf("Deploy v2: %v", err)
	}
	rec := settled(t, c, 2)
	if cur := rec.Current; cur.State != rollout.StateHalted || cur.Stage != 0 {
		t.Fatalf("rollout of v2 %s at stage %d (%q), want halted at stage 0: leaf-2's canary %s is unhealthy", cur.State, cur.Stage, cur.Reason, named)
	}
}

// TestRestartedSummarizerAnswersOnlyOnceWarm: a restarted summarizer
// sends nothing for a heartbeat and a quarter, until it has heard every
// live instance (docs/SCALING.md, "Loss rule"), but it answered
// drill-downs at once with the instances it had heard since it started:
// asked right after a restart, region leaf-1 answered that it held none
// of its 6 live instances, and a stage naming them would have counted
// nobody in its cohort. Until it is warm it does not answer (the hub
// counts the region unanswered: the controller's step waits); once warm
// it answers for all 6.
func TestRestartedSummarizerAnswersOnlyOnceWarm(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 1, hb)
	first := summarize(t, tr.Leaves[0], hb)
	// The instances beat twice a heartbeat: a restarted summarizer hears
	// every one of them twice before it is warm.
	rounds := make(chan struct{}, 1)
	reportEvery(t, tr.Leaves[0].Connect(t, natsconf.ServiceUser("payments")), hb/2, healthyOn("east", 6, 1), func() {
		select {
		case rounds <- struct{}{}:
		default:
		}
	})
	poll.Until(t, "the hub counts the region's instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 6 && st[0].Unknown == 0, fmt.Sprintf("%+v", st[0])
	})
	// Restarted right after a round, the summarizer has heard nobody when
	// it is first asked.
	<-rounds // perhaps a round before this point
	<-rounds // one just now
	first.stop()
	<-first.done
	summarize(t, tr.Leaves[0], hb)
	var got distributor.RegionDetail
	poll.Until(t, "the restarted summarizer answers", poll.Patience, func() (bool, string) {
		ctx, cancel := context.WithTimeout(t.Context(), hb/10)
		defer cancel()
		regions, err := d.DetailByRegion(ctx, cfg, distributor.DetailRequest{})
		if len(regions) != 1 {
			return false, fmt.Sprintf("%+v, %v", regions, err)
		}
		got = regions[0]
		return !got.Unanswered, fmt.Sprint(err)
	})
	if len(got.Reports) != 6 {
		t.Errorf("the restarted summarizer answered for %d instances, want its 6 live ones: %+v", len(got.Reports), got.Reports)
	}
}

// TestSilentRegionHoldsTheRolloutUntilItsSummaryExpires plays the loss
// rule (docs/SCALING.md) on a real tree: region leaf-2's summarizer
// stops. Two heartbeats after its last summary its 4 instances are
// unknown in status (counted, never healthy nor on a version), and the
// hub's controller, asked then to roll v2 out to everyone, waits for
// them: the stage neither passes nor fails, and a strict cutover does
// not flip. Four heartbeats after, the summary expires, they are not
// live, and the rollout completes on leaf-1's 4 alone.
func TestSilentRegionHoldsTheRolloutUntilItsSummaryExpires(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cons    cuecast.Consistency
		waiting string // the note while the region is unknown
	}{
		{cuecast.Relaxed, "waiting for 4 of 8 instances to apply v2"},
		{cuecast.Strict, "staged on 4 of 8 live instances"},
	} {
		t.Run(string(tc.cons), func(t *testing.T) {
			t.Parallel()
			// Wider than the other tests' 500 ms: the unknown window
			// (two heartbeats) is what the test must catch.
			const hb = time.Second
			tr, d := regionTree(t, 2, hb)
			// Every bucket on v1, so that a strict v2 is a cutover, not
			// a first version (which goes to everyone at once).
			v1 := version(1)
			v1.Checksum, v1.Size = cuecast.Checksum(content(1)), int64(len(content(1)))
			if err := d.Deploy(t.Context(), v1); err != nil {
				t.Fatal(err)
			}
			v2 := mustPublish(t, d, 2, content(2))
			on2 := func(prefix string) []cuecast.Report {
				rs := healthyOn(prefix, 4, 2)
				for i := range rs {
					rs[i].Staged = 2
				}
				return rs
			}
			startRegion(t, tr.Leaves[0], hb, on2("east"))
			west := startRegion(t, tr.Leaves[1], hb, on2("west"))
			status := func(want string, ok func(distributor.ConfigStatus) bool) {
				t.Helper()
				poll.Until(t, want, poll.Patience, func() (bool, string) {
					st, err := d.Status(t.Context(), cfg)
					if err != nil {
						return false, err.Error()
					}
					return ok(st[0]), fmt.Sprintf("%+v", st[0])
				})
			}
			status("the hub counts both regions", func(st distributor.ConfigStatus) bool { return st.Instances == 8 && st.OnTarget == 8 })
			west.stop()
			<-west.done
			status("leaf-2's instances unknown", func(st distributor.ConfigStatus) bool {
				return st.Instances == 8 && st.Unknown == 4 && st.OnTarget == 4 && st.Unhealthy == 0
			})

			c := hubController(t, tr.Hub, d, hb, cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}}, tc.cons)
			if err := c.Deploy(t.Context(), v2); err != nil {
				t.Fatalf("Deploy v2: %v", err)
			}
			poll.Until(t, "the controller waits for leaf-2's unknown instances", poll.Patience, func() (bool, string) {
				rec, err := c.Record(t.Context(), cfg)
				if err != nil || rec.Current == nil {
					return false, fmt.Sprint(err)
				}
				cur := rec.Current
				if cur.State == rollout.StateHalted || cur.State == rollout.StateComplete {
					t.Fatalf("rollout %s while leaf-2's instances were unknown, or before the controller said it waited for them: %q %q", cur.State, cur.Reason, cur.Note)
				}
				return strings.HasPrefix(cur.Note, tc.waiting), fmt.Sprintf("%s %q", cur.State, cur.Note)
			})
			rec := settled(t, c, 2)
			if cur := rec.Current; cur.State != rollout.StateComplete {
				t.Errorf("rollout %s (%q), want complete once leaf-2's summary expired", cur.State, cur.Reason)
			}
			status("leaf-2's instances gone", func(st distributor.ConfigStatus) bool { return st.Instances == 4 && st.Unknown == 0 })
		})
	}
}

// TestSummaryCannotPassForUnheard plays region leaf-1's host, which holds
// its summarizer's credential: instead of running the summarizer it sends
// the hub, every tenth of a heartbeat, a summary of 5 instances on v1
// dated the instant that marks a report not heard yet
// (distributor.Unheard). A report an instance sends with that time is
// stamped with its arrival, since the controller waits for an unheard
// cohort member past its stage's wait and hold alike; a summary was
// believed, and its instances were unknown for as long as the host sent
// it: status counted them so, and the hub's controller waited to hear
// them for ever, where their own instances could hold a stage only until
// ApplyTimeout. The hub drops such a summary as malformed, and the
// rollout completes on leaf-2's instances.
func TestSummaryCannotPassForUnheard(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	v2 := mustPublish(t, d, 2, content(2))
	startRegion(t, tr.Leaves[1], hb, healthyOn("west", 4, 2))
	forged, err := json.Marshal(distributor.BuildSummary("leaf-1", cfg, healthyOn("east", 5, 1), time.Unix(0, 1).UTC()))
	if err != nil {
		t.Fatal(err)
	}
	forgeSummary(t, tr.Leaves[0], forged, hb/10)
	poll.Until(t, "the hub counts leaf-2's instances and nothing of leaf-1's", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 4 && st[0].Unknown == 0, fmt.Sprintf("%+v", st[0])
	})
	c := hubController(t, tr.Hub, d, hb, cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}}, cuecast.Relaxed)
	if err := c.Deploy(t.Context(), v2); err != nil {
		t.Fatalf("Deploy v2: %v", err)
	}
	if cur := settled(t, c, 2).Current; cur.State != rollout.StateComplete {
		t.Errorf("rollout %s (%q), want complete on leaf-2's instances", cur.State, cur.Reason)
	}
}

// forgeSummary publishes body as srv's region's summary of cfg, with
// that region's summarizer credential on its own server, now and then
// every interval until the test ends: a region's host in place of its
// summarizer.
func forgeSummary(t *testing.T, srv *natstest.TreeServer, body []byte, every time.Duration) {
	t.Helper()
	nc := srv.Connect(t, natsconf.SummarizerUser(srv.Spec.Name))
	forging := make(chan struct{})
	go func() {
		defer close(forging)
		tk := time.NewTicker(every)
		defer tk.Stop()
		for {
			if err := nc.Publish(cuecast.SummarySubject(srv.Spec.Name, cfg), body); err != nil {
				t.Errorf("forge a summary: %v", err)
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-tk.C:
			}
		}
	}()
	t.Cleanup(func() { <-forging })
}

// TestInflatedRegionCannotMaskAnothersCanary plays what
// TestOneRegionCannotMaskAnothersCanary (distributor/rollout) judges on
// fabricated summaries, on a real tree: region leaf-1's host, with its
// summarizer's credential on its own server, claims the most healthy
// instances on v2 a summary can count (2³²−1 in every bucket), while
// leaf-2's canary, its 3 instances in the stage's buckets, is unhealthy
// on v2. The hub's controller halts the canary on leaf-2's own part of
// the cohort, and nothing overflows on the way.
func TestInflatedRegionCannotMaskAnothersCanary(t *testing.T) {
	t.Parallel()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	v2 := mustPublish(t, d, 2, content(2))
	// 3 instances in the canary's buckets, unhealthy, and 3 outside.
	var west []cuecast.Report
	in, out := 0, 0
	for _, r := range healthyOn("west", 100, 2) {
		switch {
		case cuecast.Cohort(cfg.Namespace(), r.Instance) < 10 && in < 3:
			in++
			r.Healthy = false
		case cuecast.Cohort(cfg.Namespace(), r.Instance) >= 10 && out < 3:
			out++
		default:
			continue
		}
		west = append(west, r)
	}
	if len(west) != 6 {
		t.Fatalf("premise: %d instances, want 3 in the canary's buckets and 3 outside", len(west))
	}
	startRegion(t, tr.Leaves[1], hb, west)
	sum := distributor.BuildSummary("leaf-1", cfg, healthyOn("east", 1, 2), time.Now().UTC())
	sum.Live = 0
	for b := range sum.Groups[0].ByBucket {
		sum.Groups[0].ByBucket[b] = math.MaxUint32
		sum.Live += math.MaxUint32
	}
	forged, err := json.Marshal(sum)
	if err != nil {
		t.Fatal(err)
	}
	forgeSummary(t, tr.Leaves[0], forged, hb/10)
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == sum.Live+6 && st[0].Unhealthy == 3, fmt.Sprintf("%+v", st[0])
	})
	c := hubController(t, tr.Hub, d, hb, cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 10, MaxUnhealthy: 0.05},
		{Name: "all", Percent: 100, MaxUnhealthy: 0.05},
	}}, cuecast.Relaxed)
	if err := c.Deploy(t.Context(), v2); err != nil {
		t.Fatalf("Deploy v2: %v", err)
	}
	if cur := settled(t, c, 2).Current; cur.State != rollout.StateHalted || cur.Stage != 0 || !strings.Contains(cur.Reason, "in region leaf-2") {
		t.Errorf("rollout %s at stage %d (%q), want halted at stage 0 on region leaf-2's part", cur.State, cur.Stage, cur.Reason)
	}
}

// muteRegion plays srv's region's host, which holds its summarizer's
// credential: on its own server it keeps the region's summary of cfg
// fresh, with reports rs, and takes every drill-down request, answering
// it (for none of its instances: the stages below name none) only when
// answer, given the request's number from 1, says so. It returns how many
// requests it has taken.
func muteRegion(t *testing.T, srv *natstest.TreeServer, rs []cuecast.Report, answer func(n int64) bool) *atomic.Int64 {
	t.Helper()
	sum, err := json.Marshal(distributor.BuildSummary(srv.Spec.Name, cfg, rs, time.Now().UTC()))
	if err != nil {
		t.Fatal(err)
	}
	forgeSummary(t, srv, sum, 50*time.Millisecond)
	nc := srv.Connect(t, natsconf.SummarizerUser(srv.Spec.Name))
	empty, err := json.Marshal(distributor.DetailReply{Region: srv.Spec.Name, Reports: []cuecast.Report{}})
	if err != nil {
		t.Fatal(err)
	}
	var taken atomic.Int64
	sub, err := nc.Subscribe(cuecast.DetailPrefix+".>", func(m *nats.Msg) {
		var req distributor.DetailRequest
		if json.Unmarshal(m.Data, &req) != nil || req.Reply == "" || !answer(taken.Add(1)) {
			return
		}
		if err := nc.Publish(cuecast.DetailReplySubject(srv.Spec.Name, req.Reply), empty); err != nil {
			t.Errorf("answer a drill-down: %v", err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	return &taken
}

// mutedTree starts a tree of two regions, leaf-1 summarising its 6
// instances and leaf-2 played by muteRegion(answer), its 4 instances in
// its summary, all healthy on v2 (published), and a hub controller with
// an ApplyTimeout of 1 s rolling v2 out by a policy whose first stage
// names east-1, an instance of leaf-1: judging it on a summarised tree
// needs a drill-down into every region.
func mutedTree(t *testing.T, answer func(n int64) bool) (*rollout.Controller, cuecast.Version, *atomic.Int64) {
	t.Helper()
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	v2 := mustPublish(t, d, 2, content(2))
	startRegion(t, tr.Leaves[0], hb, healthyOn("east", 6, 2))
	taken := muteRegion(t, tr.Leaves[1], healthyOn("west", 4, 2), answer)
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 10 && st[0].Unknown == 0, fmt.Sprintf("%+v", st[0])
	})
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"east-1"}},
		{Name: "all", Percent: 100},
	}}
	c := hubController(t, tr.Hub, d, hb, pol, cuecast.Relaxed, func(o *rollout.Options) { o.ApplyTimeout = time.Second })
	return c, v2, taken
}

// TestUnansweringRegionHaltsTheStage plays region leaf-2's host, which
// holds its summarizer's credential: it keeps leaf-2's summary fresh and
// never answers a drill-down. The stage names only leaf-1's east-1, yet
// needs every region's answer; leaf-2's missing answer failed every step,
// so the rollout waited for ever with an empty note and no halt (Deploy
// itself returned the drill-down error), where leaf-2's own instances
// could hold a stage only until ApplyTimeout (docs/SCALING.md, "Bound to
// the region"). Drill-downs into leaf-2 failing for ApplyTimeout now halt
// the stage, naming leaf-2.
func TestUnansweringRegionHaltsTheStage(t *testing.T) {
	t.Parallel()
	c, v2, taken := mutedTree(t, func(int64) bool { return false })
	if err := c.Deploy(t.Context(), v2); err != nil {
		t.Fatalf("Deploy v2: %v, want the rollout started though leaf-2 does not answer", err)
	}
	cur := settled(t, c, 2).Current
	if cur.State != rollout.StateHalted || cur.Stage != 0 || !strings.Contains(cur.Reason, "leaf-2") || strings.Contains(cur.Reason, "leaf-1") {
		t.Errorf("rollout of v2 %s at stage %d (%q), want halted at stage 0 naming region leaf-2, which does not answer", cur.State, cur.Stage, cur.Reason)
	}
	if n := taken.Load(); n < 2 {
		t.Errorf("leaf-2 was asked %d times, want at least twice before the halt", n)
	}
	// rollout status's progress: the canary stage names east-1, which only
	// a drill-down finds; without leaf-2's answer the counts are not exact,
	// and the progress says so (it counted east-1 with its bucket silently).
	p, err := c.Progress(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Progress: %v", err)
	}
	if !strings.Contains(p.WithoutDetail, "leaf-2") {
		t.Errorf("progress without leaf-2's answer: without_detail %q, want it to name leaf-2", p.WithoutDetail)
	}
	t.Logf("without_detail: %s", p.WithoutDetail)
}

// TestDrillDownFailingOnceDoesNotHalt: region leaf-2's host leaves the
// first drill-down unanswered and answers every later one. The failed
// answer takes longer than the stage's ApplyTimeout, but drill-downs into
// leaf-2 have not failed for that long when the next is answered: the
// rollout completes.
func TestDrillDownFailingOnceDoesNotHalt(t *testing.T) {
	t.Parallel()
	c, v2, taken := mutedTree(t, func(n int64) bool { return n > 1 })
	if err := c.Deploy(t.Context(), v2); err != nil {
		t.Fatalf("Deploy v2: %v", err)
	}
	if cur := settled(t, c, 2).Current; cur.State != rollout.StateComplete {
		t.Errorf("rollout of v2 %s at stage %d (%q), want complete: leaf-2 failed one drill-down only", cur.State, cur.Stage, cur.Reason)
	}
	if n := taken.Load(); n < 2 {
		t.Errorf("leaf-2 was asked %d times, want the unanswered first and at least one answered", n)
	}
	if p, err := c.Progress(t.Context(), cfg); err != nil || p.WithoutDetail != "" {
		t.Errorf("Progress with every region answering: without_detail %q, %v; want exact counts", p.WithoutDetail, err)
	}
}
