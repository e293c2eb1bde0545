package web_test

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/web"
)

// TestInstancesPageDrillDown: the dashboard's per-instance page
// lists each instance with its version, health and error: on a single
// server, from the instances' own reports; on a tree whose region leaf-1
// summarises (a real summarizer, instances reporting to it), where the hub
// holds one summary and no instance report, by asking the region when
// opened. There it also names region us-east, which summarises the config
// but does not answer, as unknown rather than healthy.
func TestInstancesPageDrillDown(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, testInstancesPageDrillDown)
}

// silentRegion returns a func that sends, through the hub's nc, region
// us-east's summary of one instance, ghost-1, on checkout's version v:
// a region that summarises the config and answers no drill-down. Its
// summary lives four heartbeats; a test that waits sends it each try.
func silentRegion(t *testing.T, nc *nats.Conn, v uint64) func() error {
	t.Helper()
	silent, err := json.Marshal(distributor.BuildSummary("us-east", checkout, []cuecast.Report{{Instance: "ghost-1", Config: checkout, Version: v, Healthy: true}}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	return func() error {
		if err := nc.Publish(cuecast.SummarySubject("us-east", checkout), silent); err != nil {
			return err
		}
		return nc.Flush()
	}
}

func testInstancesPageDrillDown(t *testing.T) {
	t.Parallel()
	const hb = time.Second
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}, Heartbeat: hb, Logger: log})
	hubNC := fl.Hub(t)
	d, err := distributor.New(t.Context(), hubNC, distributor.Options{Heartbeat: hb, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	fl.Summarize(t)

	// Three instances report every heartbeat: one healthy,
	// one unhealthy, one failing to apply v2.
	reports := []cuecast.Report{
		{Instance: "web-1", Config: checkout, Version: 2, Checksum: "sum2", Healthy: true},
		{Instance: "web-2", Config: checkout, Version: 2, Checksum: "sum2", Healthy: false},
		{Instance: "web-3", Config: checkout, Version: 1, Checksum: "sum1", Healthy: true, LastError: "version 2: validate: amount too large"},
	}
	svc := fl.Instance(t, "payments")
	go func() {
		tk := time.NewTicker(hb)
		defer tk.Stop()
		for {
			for _, r := range reports {
				r.At = time.Now().UTC()
				b, _ := json.Marshal(r)
				if err := svc.Publish(cuecast.ReportSubject(checkout, r.Instance), b); err != nil {
					t.Errorf("report: %v", err)
				}
			}
			select {
			case <-t.Context().Done():
				return
			case <-tk.C:
			}
		}
	}()

	srv, err := web.New(web.Options{Fleet: d, Regions: d, DetailTimeout: 2 * time.Second, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	poll.Until(t, "the hub holding the 3 instances (on a tree: the region's summary of them)", poll.Patience, func() (bool, string) {
		rs, err := d.Reports(t.Context(), checkout)
		if err != nil {
			return false, err.Error()
		}
		return distributor.Weigh(rs) == 3 && (rs[0].Count > 0) == natstest.InTree(t), fmt.Sprintf("%+v", rs)
	})
	// The rows are the server's own (single) or region leaf-1's (tree).
	section := `<section class="panel" id="here">`
	if natstest.InTree(t) {
		section = `data-region="leaf-1"`
	}

	row := func(inst, version, health, errText string) *regexp.Regexp {
		return regexp.MustCompile(`<tr data-instance="` + inst + `"><td>` + inst + `</td><td>` + version + `</td>.*\n<td>` + health + `</td><td class="err">` + regexp.QuoteMeta(errText) + `</td>`)
	}
	want := []*regexp.Regexp{
		row("web-1", "v2", "healthy", ""),
		row("web-2", "v2", `<span class="count danger">unhealthy</span>`, ""),
		row("web-3", "v1", "healthy", "version 2: validate: amount too large"),
	}
	// Asked again if the region, busy, did not answer within the timeout.
	var code int
	var page string
	poll.Until(t, "the per-instance page listing the region's instances", poll.Patience, func() (bool, string) {
		code, page = get(t, ts.URL+"/instances/"+string(checkout))
		for _, re := range want {
			if !re.MatchString(page) {
				return false, fmt.Sprintf("%d: no %s in\n%s", code, re, page)
			}
		}
		return code == 200 && strings.Contains(page, section) && !strings.Contains(page, "data-unanswered"), page
	})
	if !natstest.InTree(t) {
		return // a single server is its own region: it asks none
	}

	// A region that summarises the config and does not answer is named,
	// beside the rows of the region that did, and none of its instances is
	// shown (healthy or otherwise). Its summary lives four heartbeats:
	// each try sends it again.
	summarise := silentRegion(t, hubNC, 2)
	poll.Until(t, "the page naming the region that did not answer", poll.Patience, func() (bool, string) {
		if err := summarise(); err != nil {
			return false, err.Error()
		}
		code, page = get(t, ts.URL+"/instances/"+string(checkout))
		for _, re := range want { // leaf-1 answered this time too
			if !re.MatchString(page) {
				return false, fmt.Sprintf("%d: no %s in\n%s", code, re, page)
			}
		}
		return code == 200 && strings.Contains(page, `data-unanswered="us-east"`), page
	})
	if !strings.Contains(page, "Region us-east did not answer within 2s: the state of its instances is unknown (not healthy)") || strings.Contains(page, "ghost-1") {
		t.Errorf("the silent region is not named as unknown:\n%s", page)
	}
}

// TestSilentRegionShownUnknown: a region whose summary is overdue (it
// stopped summarising) is counted by the config page as unknown, and its
// rows say so: not healthy, not reported at the Unix epoch.
func TestSilentRegionShownUnknown(t *testing.T) {
	tr := natstest.StartTree(t, natstest.TreeOptions{Namespaces: []string{"payments"}})
	const hb = 2 * time.Second
	log := slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelWarn}))
	nc := tr.Hub.Connect(t, natsconf.DistributorUser)
	d, err := distributor.New(t.Context(), nc, distributor.Options{Heartbeat: hb, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(t.Context(), cuecast.Version{Config: checkout, Version: 1, Commit: "c001", Author: "ann", Message: "change"}, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	srv, err := web.New(web.Options{Fleet: d, Regions: d, Interval: 50 * time.Millisecond, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Run(t.Context())
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	// One summary of two instances, never renewed: overdue after two
	// heartbeats, gone after four; sent again whenever it is gone.
	silent, err := json.Marshal(distributor.BuildSummary("us-east", checkout, []cuecast.Report{
		{Instance: "ghost-1", Config: checkout, Version: 1, Healthy: true},
		{Instance: "ghost-2", Config: checkout, Version: 1, Healthy: true}}, time.Now()))
	if err != nil {
		t.Fatal(err)
	}
	type view struct {
		Row struct {
			Instances int `json:"instances"`
			Unknown   int `json:"unknown"`
		} `json:"row"`
		Instances []struct {
			Instance string `json:"instance"`
			Healthy  bool   `json:"healthy"`
			Unknown  bool   `json:"unknown"`
			Count    int    `json:"count"`
		} `json:"instances"`
	}
	var v view
	poll.Until(t, "the config page counting the silent region's instances", poll.Patience, func() (bool, string) {
		code, body := get(t, ts.URL+"/api/configs/"+string(checkout))
		v = view{}
		if code != 200 || json.Unmarshal([]byte(body), &v) != nil {
			return false, body
		}
		if v.Row.Instances == 0 {
			if err := nc.Publish(cuecast.SummarySubject("us-east", checkout), silent); err != nil {
				return false, err.Error()
			}
		}
		return v.Row.Unknown == 2, body
	})
	n := 0
	for _, i := range v.Instances {
		if !i.Unknown || i.Healthy {
			t.Errorf("the silent region's row %+v: want unknown, not healthy", i)
		}
		n += i.Count
	}
	if v.Row.Instances != 2 || n != 2 {
		t.Fatalf("the silent region's rows stand for %d instances of %d: %+v", n, v.Row.Instances, v)
	}
}
