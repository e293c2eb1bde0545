package analysis_test

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
)

func TestJudge(t *testing.T) {
	nan := math.NaN()
	errRate := cuecast.Metric{Name: "errors", Compare: cuecast.CompareDifference, Max: 0.01, MinSamples: 100}
	tests := []struct {
		name   string
		m      cuecast.Metric
		r      analysis.Result
		want   analysis.Outcome
		detail string
	}{
		{"difference over max", errRate, analysis.Result{Cohort: 0.05, Baseline: 0.001, CohortSamples: 500, BaselineSamples: 5000},
			analysis.Fail, "cohort 0.05 − baseline 0.001 = 0.049 > max 0.01"},
		{"difference within max", errRate, analysis.Result{Cohort: 0.002, Baseline: 0.001, CohortSamples: 500, BaselineSamples: 5000},
			analysis.Pass, "cohort 0.002 − baseline 0.001 = 0.001 ≤ max 0.01"},
		{"too few cohort samples", errRate, analysis.Result{Cohort: 0.5, Baseline: 0.001, CohortSamples: 20, BaselineSamples: 5000},
			analysis.Inconclusive, "too few samples: cohort 20 < min 100"},
		{"no baseline data", errRate, analysis.Result{Cohort: 0.5, Baseline: nan, CohortSamples: nan, BaselineSamples: nan},
			analysis.Inconclusive, "no data for the baseline"},
		{"ratio over max", cuecast.Metric{Compare: cuecast.CompareRatio, Max: 1.5}, analysis.Result{Cohort: 0.3, Baseline: 0.1, CohortSamples: nan, BaselineSamples: nan},
			analysis.Fail, "cohort 0.3 ÷ baseline 0.1 = 3 > max 1.5"},
		{"ratio of a zero baseline", cuecast.Metric{Compare: cuecast.CompareRatio, Max: 1.5}, analysis.Result{Cohort: 0.1, Baseline: 0, CohortSamples: nan, BaselineSamples: nan},
			analysis.Fail, "= +Inf > max 1.5"},
		{"ratio of nothing to nothing", cuecast.Metric{Compare: cuecast.CompareRatio, Max: 1.5}, analysis.Result{Cohort: 0, Baseline: 0, CohortSamples: nan, BaselineSamples: nan},
			analysis.Pass, "= 0 ≤ max 1.5"},
		{"threshold ignores the baseline", cuecast.Metric{Compare: cuecast.CompareThreshold, Max: 0.25}, analysis.Result{Cohort: 0.3, Baseline: nan, CohortSamples: nan, BaselineSamples: nan},
			analysis.Fail, "cohort 0.3 > max 0.25"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := analysis.Judge(tt.m, tt.r)
			if v.Outcome != tt.want || !strings.Contains(v.Detail, tt.detail) {
				t.Errorf("Judge = %s %q, want %s containing %q", v.Outcome, v.Detail, tt.want, tt.detail)
			}
		})
	}
}

// TestJudgeAtTheBoundary: a value at max, as printed, passes ("halts only
// when greater than max"), though float arithmetic puts it a hair over
// (0.07 − 0.06 = 0.010000000000000009); a value really over max fails
// and is printed with the digits that show it over.
func TestJudgeAtTheBoundary(t *testing.T) {
	nan := math.NaN()
	diff := cuecast.Metric{Compare: cuecast.CompareDifference, Max: 0.01}
	ratio := cuecast.Metric{Compare: cuecast.CompareRatio, Max: 7}
	thr := cuecast.Metric{Compare: cuecast.CompareThreshold, Max: 0.3}
	side := func(c, b float64) analysis.Result {
		return analysis.Result{Cohort: c, Baseline: b, CohortSamples: nan, BaselineSamples: nan}
	}
	for _, tt := range []struct {
		name   string
		m      cuecast.Metric
		r      analysis.Result
		want   analysis.Outcome
		detail string
	}{
		{"difference at max", diff, side(0.07, 0.06), analysis.Pass, "cohort 0.07 − baseline 0.06 = 0.01 ≤ max 0.01"},
		{"difference over max", diff, side(0.0700001, 0.06), analysis.Fail, "cohort 0.0700001 − baseline 0.06 = 0.0100001 > max 0.01"},
		{"difference of large sides at max", diff, side(1000.07, 1000.06), analysis.Pass, "cohort 1000.07 − baseline 1000.06 = 0.01 ≤ max 0.01"},
		{"ratio at max", ratio, side(0.07, 0.01), analysis.Pass, "cohort 0.07 ÷ baseline 0.01 = 7 ≤ max 7"},
		{"ratio over max", ratio, side(0.0700007, 0.01), analysis.Fail, "cohort 0.070001 ÷ baseline 0.01 = 7.0001 > max 7"},
		{"threshold at max", thr, side(0.30000000000000004, nan), analysis.Pass, "cohort 0.3 ≤ max 0.3"},
		{"threshold over max", thr, side(0.30000001, nan), analysis.Fail, "cohort 0.30000001 > max 0.3"},
		{"threshold at a max of 0", cuecast.Metric{Compare: cuecast.CompareThreshold}, side(0, nan), analysis.Pass, "cohort 0 ≤ max 0"},
		{"threshold just over a max of 0", cuecast.Metric{Compare: cuecast.CompareThreshold}, side(1e-12, nan), analysis.Fail, "cohort 1e-12 > max 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			v := analysis.Judge(tt.m, tt.r)
			if v.Outcome != tt.want || !strings.Contains(v.Detail, tt.detail) {
				t.Errorf("Judge = %s %q, want %s containing %q", v.Outcome, v.Detail, tt.want, tt.detail)
			}
		})
	}
}

func TestMannWhitneyP(t *testing.T) {
	// Every x above every y: U = n1·n2, the smallest p there is.
	hi := analysis.MannWhitneyP([]float64{6, 7, 8, 9, 10, 11, 12, 13}, []float64{1, 2, 3, 4, 5, 0, -1, -2})
	// Exact one-sided p for 8 vs 8 with complete separation is 1/C(16,8)
	// = 7.8e-5; the normal approximation is within a factor of a few.
	if hi > 0.001 {
		t.Errorf("p of complete separation = %g, want < 0.001", hi)
	}
	if p := analysis.MannWhitneyP([]float64{1, 2, 3, 4, 5, 0, -1, -2}, []float64{6, 7, 8, 9, 10, 11, 12, 13}); p < 0.999 {
		t.Errorf("p of the other direction = %g, want > 0.999 (one-sided)", p)
	}
	if p := analysis.MannWhitneyP([]float64{1, 1, 1}, []float64{1, 1, 1}); p != 1 {
		t.Errorf("p of all ties = %g, want 1", p)
	}
}

// simulatedStage is one stage's Mann-Whitney evaluations of an error
// ratio: each evaluation has points per side, each point the errors of
// requests draws at the side's rate. It returns how many failed.
func simulatedStage(rng *rand.Rand, m cuecast.Metric, evaluations, points, requests int, cohortRate, baseRate float64) int {
	draw := func(rate float64) []float64 {
		out := make([]float64, points)
		for i := range out {
			out[i] = float64(binomial(rng, requests, rate)) / float64(requests)
		}
		return out
	}
	failed := 0
	for range evaluations {
		r := analysis.Result{CohortPoints: draw(cohortRate), BaselinePoints: draw(baseRate)}
		if analysis.Judge(m, r).Outcome == analysis.Fail {
			failed++
		}
	}
	return failed
}

// binomial draws the number of successes of n trials at p by jumping
// from one success to the next (geometric gaps): about n·p draws, not n.
func binomial(rng *rand.Rand, n int, p float64) int {
	k := 0
	for at := 0; ; k++ {
		at += int(math.Floor(math.Log(1-rng.Float64())/math.Log(1-p))) + 1
		if at > n {
			return k
		}
	}
}

// TestMannWhitneyFalsePositiveRate measures the statistical comparison on
// 1,000 simulated stages whose cohort and baseline have the same error
// rate (1 %, 30 points a side of 200 requests each): a stage judged once
// halts with about Alpha's probability, and one needing 2 failures of 5
// evaluations far less often; a real regression (5 % against 0.1 %) is
// caught every time. The seed is fixed: the rates are the same every run
// (docs/ROLLOUT.md, "Analysis", quotes them).
func TestMannWhitneyFalsePositiveRate(t *testing.T) {
	const stages = 1000
	m := cuecast.Metric{Name: "errors", Compare: cuecast.CompareMannWhitney, Max: 0, MinSamples: 10, Alpha: 0.05}
	rate := func(seed uint64, evaluations, failures int, cohortRate, baseRate float64) float64 {
		rng := rand.New(rand.NewPCG(seed, 1))
		halted := 0
		for range stages {
			if simulatedStage(rng, m, evaluations, 30, 200, cohortRate, baseRate) >= failures {
				halted++
			}
		}
		return float64(halted) / stages
	}
	once := rate(1, 1, 1, 0.01, 0.01)
	twoOfFive := rate(2, 5, 2, 0.01, 0.01)
	caught := rate(3, 1, 1, 0.05, 0.001)
	t.Logf("false positives, one evaluation at alpha 0.05: %.1f%%; 2 failures of 5 evaluations: %.1f%%; 5%% vs 0.1%% caught: %.1f%%",
		100*once, 100*twoOfFive, 100*caught)
	if once > 0.07 {
		t.Errorf("false-positive rate of one evaluation = %.3f, want ≤ 0.07 (alpha 0.05)", once)
	}
	if twoOfFive > 0.05 {
		t.Errorf("false-positive rate of 2 failures in 5 evaluations = %.3f, want ≤ 0.05", twoOfFive)
	}
	if caught < 0.99 {
		t.Errorf("5%% against 0.1%% caught in %.3f of stages, want ≥ 0.99", caught)
	}
}

func TestMetricValidate(t *testing.T) {
	good := cuecast.Metric{Name: "errors", Compare: cuecast.CompareDifference, Max: 0.01,
		Query: `sum(rate(errors_total[$interval]) * on(instance, job) group_left cuecast_config_info{$selector})`}
	if err := good.Validate(); err != nil {
		t.Fatalf("Validate of a good metric: %v", err)
	}
	for _, tt := range []struct{ name, query, want string }{
		{"unclosed", `sum(rate(errors_total[1m]) * on(instance) group_left cuecast_config_info{$selector}`, `unclosed '('`},
		{"no selector", `sum(rate(errors_total[1m]))`, "neither $selector nor $version"},
		{"unknown placeholder", `sum(x{$cohort})`, "unknown placeholder $cohort"},
		{"unterminated string", `sum(x{$selector, a="b})`, "unterminated string"},
		{"min_samples without samples", "", "min_samples: without a samples query"},
		// A placeholder in a comment fills nothing Prometheus reads.
		{"selector only in a comment", "sum(rate(x[$interval])) / sum(rate(y[$interval])) # $selector", "neither $selector nor $version"},
		{"selector in a comment line", "sum(rate(x[$interval]))\n# by cuecast_config_info{$selector}\n", "neither $selector nor $version"},
	} {
		m := good
		if tt.query != "" {
			m.Query = tt.query
		} else {
			m.MinSamples = 100
		}
		if err := m.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate = %v, want %q", tt.name, err, tt.want)
		}
	}
	// A # in a string is no comment, and a comment's quote opens no
	// string.
	for _, q := range []string{`sum(x{$selector, path="/a#b"})`, "sum(x{$selector}) # the cohort's\n"} {
		m := good
		m.Query = q
		if err := m.Validate(); err != nil {
			t.Errorf("Validate of %q: %v", q, err)
		}
	}
	got := good.Expand(good.Query, "payments/checkout", 7)
	if want := `cuecast_config_info{config="payments/checkout",version="7"}`; !strings.Contains(got, want) || !strings.Contains(got, "[1m]") {
		t.Errorf("Expand = %s, want it to contain %s and [1m]", got, want)
	}
}
