package web_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/web"
)

// tardyFleet is a real distributor that takes delay longer to compute each
// status: a fleet slower to read than a sample's usual time limit, as a
// large fleet is, or any on a loaded box.
type tardyFleet struct {
	*distributor.Distributor
	delay time.Duration
	calls atomic.Int32
}

func (f *tardyFleet) StatusAndReports(ctx context.Context, intents distributor.Intents, cfgs ...cuecast.ConfigPath) ([]distributor.ConfigStatus, []cuecast.Report, error) {
	f.calls.Add(1)
	select {
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	case <-time.After(f.delay):
	}
	return f.Distributor.StatusAndReports(ctx, intents, cfgs...)
}

// TestSampleOutlastsItsLimit: when reading the fleet takes longer than a
// sample's time limit (5 s), the sample that runs out says so in the log
// and gives the next one longer, and the server is sampled: ready, its
// config page showing the fleet's version. With one fixed limit every
// sample ran out the same way, silently, and the pages and the fleet
// gauges stayed on the sample before for good (TestEventsStream/tree and
// TestMetricsDuringRun/tree waited in vain on a loaded box).
func TestSampleOutlastsItsLimit(t *testing.T) {
	t.Parallel()
	fl := natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{"payments"}})
	d, err := distributor.New(t.Context(), fl.Hub(t), distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Publish(t.Context(), cuecast.Version{Config: checkout, Version: 1, Commit: "c001", Author: "ann", Message: "change"}, []byte(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	fleet := &tardyFleet{Distributor: d, delay: 6 * time.Second}
	srv, err := web.New(web.Options{Fleet: fleet, Interval: 50 * time.Millisecond, Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Run(t.Context())
	ts := httptest.NewServer(srv.Handler())
	t.Cleanup(ts.Close)

	poll.Until(t, "a sample of the fleet, ready and showing v1", 2*poll.Patience, func() (bool, string) {
		code, body := get(t, ts.URL+"/readyz")
		if code != http.StatusOK {
			return false, fmt.Sprintf("readyz %d %s after %d samples", code, strings.TrimSpace(body), fleet.calls.Load())
		}
		code, body = get(t, ts.URL+"/api/configs/"+string(checkout))
		var cv struct {
			Row struct {
				Version uint64 `json:"version"`
			} `json:"row"`
		}
		if code != http.StatusOK || json.Unmarshal([]byte(body), &cv) != nil {
			return false, fmt.Sprintf("config page %d %s", code, body)
		}
		return cv.Row.Version == 1, fmt.Sprintf("config page shows v%d", cv.Row.Version)
	})
	var ranOut bool
	for _, rec := range logs.records(t) {
		if rec["msg"] == "fleet sample failed" && strings.Contains(fmt.Sprint(rec["err"]), context.DeadlineExceeded.Error()) && rec["limit"] == float64(5*time.Second) {
			ranOut = true
		}
	}
	if !ranOut {
		t.Errorf("no log of the first sample running out of its 5s limit; the log:\n%s", logs.String())
	}
}
