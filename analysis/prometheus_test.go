package analysis_test

import (
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/internal/promtest"
)

// TestMeasureMannWhitneySamples: a Mann-Whitney metric with a samples
// query has it measured, and a side with fewer than min_samples is
// inconclusive however many points it has (docs/ROLLOUT.md: points count
// only without samples). The queries are arithmetic on $version, so a real
// Prometheus answers them without scraping anything: the cohort's points
// (version 8) all lie above the baseline's (7), which fails when the
// samples are not counted, and its samples are 8 − 5 = 3 < 5.
func TestMeasureMannWhitneySamples(t *testing.T) {
	prom := promtest.Start(t, time.Second)
	p, err := analysis.New(prom.URL, analysis.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := cuecast.Metric{Name: "latency", Compare: cuecast.CompareMannWhitney, Max: 0, MinSamples: 5,
		Query: "vector($version)", Samples: "$version - 5"}
	res, err := p.Measure(t.Context(), m, "payments/checkout", 8, 7, time.Now())
	if err != nil {
		t.Fatalf("Measure: %v", err)
	}
	if res.CohortSamples != 3 || res.BaselineSamples != 2 || len(res.CohortPoints) < 5 || len(res.BaselinePoints) < 5 {
		t.Fatalf("Measure = samples %v and %v over %d and %d points, want 3 and 2 over at least 5 points a side",
			res.CohortSamples, res.BaselineSamples, len(res.CohortPoints), len(res.BaselinePoints))
	}
	if v := analysis.Judge(m, res); v.Outcome != analysis.Inconclusive || !strings.Contains(v.Detail, "too few samples: cohort 3 < min 5") {
		t.Errorf("Judge = %s %q, want inconclusive with too few samples: cohort 3 < min 5", v.Outcome, v.Detail)
	}
	// Without the samples query the points are what min_samples counts.
	m.Samples = ""
	if res, err = p.Measure(t.Context(), m, "payments/checkout", 8, 7, time.Now()); err != nil {
		t.Fatalf("Measure: %v", err)
	}
	if v := analysis.Judge(m, res); v.Outcome != analysis.Fail {
		t.Errorf("Judge without samples = %s %q, want fail (every cohort point above every baseline point)", v.Outcome, v.Detail)
	}
}
