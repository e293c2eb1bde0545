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
	tr := natstest.StartTree(t, natstest.TreeOptions{Leaves: 2, Namespaces: []string{"payments"}, Regions: true})
	const hb = 500 * time.Millisecond
	d := newDistOn(t, tr.Hub.Connect(t, natsconf.DistributorUser), distributor.Options{Heartbeat: hb})
	mustPublish(t, d, 1, content(1))
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
