package rollout

import (
	"fmt"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// TestMeasureOnSummaries measures a cohort of buckets and one named
// instance on a region's summary, with the named instance drilled down and
// split out, and gets what the instances' own reports give.
func TestMeasureOnSummaries(t *testing.T) {
	t.Parallel()
	const cfg = cuecast.ConfigPath("payments/checkout")
	var rs []cuecast.Report
	for i := range 2000 {
		r := cuecast.Report{Instance: fmt.Sprintf("web-%d", i), Config: cfg, Version: 1, Healthy: true}
		if i%7 == 0 {
			r.Version, r.Healthy = 2, i%2 == 0
		}
		rs = append(rs, r)
	}
	// A named instance outside the buckets, in a bucket shared with others.
	var named cuecast.Report
	for _, r := range rs {
		if b := cuecast.Cohort(cfg.Namespace(), r.Instance); b >= 10 && r.Version == 2 {
			named = r
			break
		}
	}
	cohort := Cohort{Buckets: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, Instances: []string{named.Instance}}
	want := measure(cfg.Namespace(), rs, cohort, 2, false)
	sum := distributor.BuildSummary("eu-west", cfg, rs, time.Now())
	named.Region = "eu-west" // as its region's drill-down answer gives it
	got := measure(cfg.Namespace(), distributor.Split(sum.Reports(false), []cuecast.Report{named}), cohort, 2, false)
	if got.Instances != want.Instances || got.OnTarget != want.OnTarget || got.Unhealthy != want.Unhealthy ||
		got.Outside != want.Outside || got.OutsideUnhealthy != want.OutsideUnhealthy || got.WaitingCount != want.WaitingCount {
		t.Fatalf("on the summary %+v\non the reports %+v", got, want)
	}
	// Without the drill-down the named instance is lost in its group.
	if lost := measure(cfg.Namespace(), sum.Reports(false), cohort, 2, false); lost.Instances == want.Instances {
		t.Fatalf("the named instance counted without a drill-down: %+v", lost)
	}
}
