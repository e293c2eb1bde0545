package distributor_test

import (
	"encoding/json"
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
	const hb = 500 * time.Millisecond
	tr, d := regionTree(t, 2, hb)
	east := startRegion(t, tr.Leaves[0], hb, fleetReports("east", 6))
	startRegion(t, tr.Leaves[1], hb, fleetReports("west", 9))
	poll.Until(t, "the hub counts both regions' instances", poll.Patience, func() (bool, string) {
		st, err := d.Status(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return st[0].Instances == 15, fmt.Sprintf("%+v", st[0])
	})
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
