package natsconf_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestOperatorReadsReportTTL: the operator's credentials read how long a
// report stays live from the report stream's max age (serve's heartbeat),
// not from four default heartbeats: `status --wait` counts a report live
// as serve does. The stores were created with a heartbeat of an hour, so
// a report of five minutes ago is live.
func TestOperatorReadsReportTTL(t *testing.T) {
	forEachSuiteMode(t, func(t *testing.T, st *suiteTree) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		old, _ := json.Marshal(cuecast.Report{Instance: "old-1", Config: checkout, Version: 1, Healthy: true, At: time.Now().Add(-5 * time.Minute)})
		if _, err := st.dist.Request(cuecast.ReportSubject(checkout, "old-1"), old, 5*time.Second); err != nil {
			t.Fatalf("report: %v", err)
		}
		nc := st.Hub.Connect(t, natsconf.OperatorUser)
		d, err := distributor.Open(ctx, nc, distributor.Options{})
		if err != nil {
			t.Fatalf("open as operator: %v", err)
		}
		w, err := d.WatchReports(ctx, checkout)
		if err != nil {
			t.Fatalf("watch reports as operator: %v", err)
		}
		defer w.Stop()
		poll.Until(t, "the five minutes old report live for the operator", poll.Patience, func() (bool, string) {
			rs := w.Live()
			return slices.ContainsFunc(rs, func(r cuecast.Report) bool { return r.Instance == "old-1" }), fmt.Sprintf("%d live reports", len(rs))
		})
	})
}
