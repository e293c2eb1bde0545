package distributor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
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

	regions, err := d.DetailByRegion(t.Context(), cfg, distributor.DetailRequest{})
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
