package rollout

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// fromRegion is what the hub believes of region's reports: their summary,
// as region's summarizer credential may publish it on its own subject,
// sent and read back by the hub's rule (distributor.DecodeSummary), with
// each group's counts multiplied by inflate (a forger's summary claims any
// count it likes; the hub cannot check it).
func fromRegion(t *testing.T, region string, reports []cuecast.Report, inflate uint32) []cuecast.Report {
	t.Helper()
	cfg := reports[0].Config
	s := distributor.BuildSummary(region, cfg, reports, time.Now())
	s.Live = 0
	for gi := range s.Groups {
		for b := range s.Groups[gi].ByBucket {
			s.Groups[gi].ByBucket[b] *= inflate
		}
		s.Live += s.Groups[gi].Count()
	}
	data, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := distributor.DecodeSummary(cuecast.SummarySubject(region, cfg), data)
	if err != nil {
		t.Fatalf("the hub refused %s's summary: %v", region, err)
	}
	return got.Reports(false)
}

// TestOneRegionCannotMaskAnothersCanary plays region eu-west's summarizer
// credential, which may publish its own region's summaries only, and
// claims a million instances outside the canary, all unhealthy and
// failing to apply: the outside share over the whole fleet is then
// ~100%, and us-east's canary, 10 of 10 unhealthy (or failing), passed. Each
// region's canary is now judged against its own region's outside as
// well, so eu-west's claims change nothing of how us-east's instances are
// judged: they can only halt a stage, as eu-west could by misstating its
// own instances. On a single server (no regions) the judgement is the
// whole fleet's, as before.
func TestOneRegionCannotMaskAnothersCanary(t *testing.T) {
	t.Parallel()
	const cfg = cuecast.ConfigPath("payments/checkout")
	inCanary := func(id string) bool { return cuecast.Cohort(cfg.Namespace(), id) == 0 }
	// fleet is us-east's: 10 canary instances and 30 outside, each as
	// canary and outside say.
	fleet := func(canary, outside func(*cuecast.Report)) []cuecast.Report {
		var rs []cuecast.Report
		for i, in, out := 0, 0, 0; in < 10 || out < 30; i++ {
			r := cuecast.Report{Instance: fmt.Sprintf("web-%d", i), Config: cfg, Version: 2, Checksum: "sum2", Healthy: true}
			switch {
			case inCanary(r.Instance) && in < 10:
				canary(&r)
				in++
			case !inCanary(r.Instance) && out < 30:
				r.Version, r.Checksum = 1, "sum1"
				outside(&r)
				out++
			default:
				continue
			}
			rs = append(rs, r)
		}
		return rs
	}
	healthy := func(*cuecast.Report) {}
	unhealthy := func(r *cuecast.Report) { r.Healthy = false }
	failing := func(r *cuecast.Report) {
		r.Version, r.Checksum, r.LastError = 1, "sum1", "version 2: validation hook: refused"
	}
	// eu-west's claim: instances outside the canary, unhealthy and failing.
	var forged []cuecast.Report
	for i := 0; len(forged) < 3; i++ {
		if id := fmt.Sprintf("ghost-%d", i); !inCanary(id) {
			forged = append(forged, cuecast.Report{Instance: id, Config: cfg, Version: 1, Checksum: "sum1", Healthy: false,
				LastError: "version 1: validation hook: refused"})
		}
	}
	st := cuecast.Stage{Name: "canary", Percent: 1, MaxUnhealthy: 0.1, MaxApplyFailures: 0.1}
	cohort := Cohort{Buckets: []int{0}}
	for _, tc := range []struct {
		name    string
		reports func(t *testing.T) []cuecast.Report
		halts   bool
	}{
		{"unhealthy canary, honest region alone", func(t *testing.T) []cuecast.Report {
			return fromRegion(t, "us-east", fleet(unhealthy, healthy), 1)
		}, true},
		{"unhealthy canary, another region inflating the outside", func(t *testing.T) []cuecast.Report {
			return append(fromRegion(t, "us-east", fleet(unhealthy, healthy), 1), fromRegion(t, "eu-west", forged, 1_000_000)...)
		}, true},
		{"failing canary, another region inflating the outside", func(t *testing.T) []cuecast.Report {
			return append(fromRegion(t, "us-east", fleet(failing, healthy), 1), fromRegion(t, "eu-west", forged, 1_000_000)...)
		}, true},
		{"healthy canary, another region inflating the outside", func(t *testing.T) []cuecast.Report {
			return append(fromRegion(t, "us-east", fleet(healthy, healthy), 1), fromRegion(t, "eu-west", forged, 1_000_000)...)
		}, false},
		{"unhealthy region-wide, not the version's fault", func(t *testing.T) []cuecast.Report {
			return append(fromRegion(t, "us-east", fleet(unhealthy, unhealthy), 1), fromRegion(t, "eu-west", forged, 1)...)
		}, false},
		{"single server: unhealthy canary", func(*testing.T) []cuecast.Report {
			return fleet(unhealthy, healthy)
		}, true},
		{"single server: unhealthy everywhere", func(*testing.T) []cuecast.Report {
			return fleet(unhealthy, unhealthy)
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := measure(cfg.Namespace(), tc.reports(t), cohort, 2, false)
			if why := breach(m, st); (why != "") != tc.halts {
				t.Errorf("breach = %q, want a halt: %v (measured %+v)", why, tc.halts, m)
			}
		})
	}
}
