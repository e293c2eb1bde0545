package distributor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
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
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	startRegion(t, tr.Leaves[0], hb, fleetReports("east", 6))
	west := startRegion(t, tr.Leaves[1], hb, fleetReports("west", 9))
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 15, fmt.Sprintf("%+v", st[0])
	})
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
