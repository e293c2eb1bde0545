package rollout

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
)

// TestEvaluated steps one metric through evaluations (the pure half of
// the controller's analysis): failures halt at the metric's limit, errors
// at max_errors in a row, inconclusive ones never, and a stage waits on
// any metric whose last evaluation did not pass.
func TestEvaluated(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	m := cuecast.Metric{Name: "error_rate", Query: "q{$selector}", Compare: cuecast.CompareDifference, Max: 0.01,
		MinSamples: 100, Interval: cuecast.Duration(time.Minute), Failures: 2, MaxErrors: 2}
	st := cuecast.Stage{Name: "canary", Analysis: []cuecast.Metric{m}}
	r := &Rollout{Config: "payments/checkout", Version: 2, From: 1, Policy: cuecast.Policy{Stages: []cuecast.Stage{st}}, State: StateHolding}
	r.Analysis = startAnalysis(st, now)
	bad := analysis.Result{Cohort: 0.05, Baseline: 0.001, CohortSamples: 500, BaselineSamples: 5000}
	good := analysis.Result{Cohort: 0.001, Baseline: 0.001, CohortSamples: 500, BaselineSamples: 5000}
	few := analysis.Result{Cohort: 0.05, Baseline: 0.001, CohortSamples: 5, BaselineSamples: 5000}
	down := errors.New("connection refused")
	steps := []struct {
		res     analysis.Result
		err     error
		halts   string // in the halt's reason; "" for none
		pending string // in analysisPending; "" for none
	}{
		{few, nil, "", "error_rate inconclusive (too few samples: cohort 5 < min 100)"},
		{bad, nil, "", "error_rate fail"},
		{good, nil, "", ""},
		{analysis.Result{}, down, "", "error_rate error (connection refused)"},
		{good, nil, "", ""}, // the error count is of errors in a row
		{analysis.Result{}, down, "", "error_rate error"},
		{analysis.Result{}, down, `could not be evaluated 2 times in a row (max_errors 2): connection refused; query: q{config="payments/checkout",version="2"}; baseline: q{config="payments/checkout",version="1"}`, ""},
	}
	for i, s := range steps {
		now = now.Add(time.Minute)
		ms := &r.Analysis[0]
		why := evaluated(ms, m, st, r, s.res, s.err, now)
		if (s.halts == "") != (why == "") || !strings.Contains(why, s.halts) {
			t.Fatalf("step %d: halt %q, want %q", i, why, s.halts)
		}
		if why != "" {
			break
		}
		if p := analysisPending(r); (s.pending == "") != (p == "") || !strings.Contains(p, s.pending) {
			t.Errorf("step %d: pending %q, want %q", i, p, s.pending)
		}
		if !ms.Next.Equal(now.Add(time.Minute)) {
			t.Errorf("step %d: next %s, want an interval on", i, ms.Next)
		}
	}
	// The second failure halts, with both values and the threshold, and
	// the queries as run, placeholders filled, for the operator to run
	// again (the reason used to give them raw, $selector and all).
	ms := MetricState{Name: m.Name}
	evaluated(&ms, m, st, r, bad, nil, now)
	why := evaluated(&ms, m, st, r, bad, nil, now)
	if want := `stage canary: analysis error_rate failed 2 of 2 evaluations (failures 2 halt): cohort 0.05 − baseline 0.001 = 0.049 > max 0.01; query: q{config="payments/checkout",version="2"}; baseline: q{config="payments/checkout",version="1"}`; why != want {
		t.Errorf("halt %q, want %q", why, want)
	}
	// A first version has no baseline: a comparison is skipped, not waited on.
	first := &Rollout{Version: 1, Policy: r.Policy, State: StateHolding, Analysis: startAnalysis(st, now)}
	if why := evaluated(&first.Analysis[0], m, st, first, analysis.Result{Cohort: math.NaN()}, nil, now); why != "" || analysisPending(first) != "" {
		t.Errorf("first version: halt %q, pending %q; want the comparison skipped", why, analysisPending(first))
	}
}
