package analysis

import (
	"fmt"
	"math"

	"github.com/cuecast/cuecast"
)

// Outcome is what one evaluation of a metric says.
type Outcome string

// The outcomes of an evaluation.
const (
	// Pass: the cohort is within the metric's limit of the baseline.
	Pass Outcome = "pass"
	// Fail: the cohort breaches it.
	Fail Outcome = "fail"
	// Inconclusive: too few samples (or no data) to say; it neither
	// fails nor lets a stage pass.
	Inconclusive Outcome = "inconclusive"
)

// Result is what Measure read for both sides of one metric.
type Result struct {
	// Cohort and Baseline are the query's value for each side (Baseline
	// is NaN for a threshold, which queries no baseline). NaN: no data.
	Cohort   float64 `json:"cohort"`
	Baseline float64 `json:"baseline"`
	// CohortSamples and BaselineSamples are the Samples query's values
	// (or the number of points, for Mann-Whitney); NaN when not measured.
	CohortSamples   float64 `json:"cohort_samples"`
	BaselineSamples float64 `json:"baseline_samples"`
	// CohortPoints and BaselinePoints are Mann-Whitney's observations.
	CohortPoints   []float64 `json:"-"`
	BaselinePoints []float64 `json:"-"`
}

// Verdict is Judge's answer: the outcome and, for people, the values and
// the limit it compared ("cohort 0.05 − baseline 0.001 = 0.049 > max
// 0.01").
type Verdict struct {
	Outcome Outcome `json:"outcome"`
	Detail  string  `json:"detail"`
	// Cohort and Baseline are the values compared (for Mann-Whitney the
	// medians of the points).
	Cohort   float64 `json:"cohort"`
	Baseline float64 `json:"baseline"`
}

// Judge compares a metric's measured sides by its comparison. Every
// comparison reads "higher is worse". A side with no data or fewer
// samples than MinSamples is inconclusive.
func Judge(m cuecast.Metric, r Result) Verdict {
	m = m.WithDefaults()
	if m.Compare == cuecast.CompareMannWhitney {
		return judgeMannWhitney(m, r)
	}
	v := Verdict{Cohort: r.Cohort, Baseline: r.Baseline}
	if why := tooFew(m, r); why != "" {
		v.Outcome, v.Detail = Inconclusive, why
		return v
	}
	var value float64
	var expr string
	switch m.Compare {
	case cuecast.CompareThreshold:
		value, expr = r.Cohort, fmt.Sprintf("cohort %s", num(r.Cohort))
	case cuecast.CompareRatio:
		value = r.Cohort / r.Baseline
		if r.Baseline == 0 {
			value = 0
			if r.Cohort > 0 {
				value = math.Inf(1)
			}
		}
		expr = fmt.Sprintf("cohort %s ÷ baseline %s = %s", num(r.Cohort), num(r.Baseline), num(value))
	default:
		value = r.Cohort - r.Baseline
		expr = fmt.Sprintf("cohort %s − baseline %s = %s", num(r.Cohort), num(r.Baseline), num(value))
	}
	if value > m.Max {
		v.Outcome, v.Detail = Fail, fmt.Sprintf("%s > max %s", expr, num(m.Max))
		return v
	}
	v.Outcome, v.Detail = Pass, fmt.Sprintf("%s ≤ max %s", expr, num(m.Max))
	return v
}

// tooFew says why r has too little data to judge, or "".
func tooFew(m cuecast.Metric, r Result) string {
	sides := []struct {
		name           string
		value, samples float64
	}{{"cohort", r.Cohort, r.CohortSamples}}
	if m.Compare != cuecast.CompareThreshold {
		sides = append(sides, struct {
			name           string
			value, samples float64
		}{"baseline", r.Baseline, r.BaselineSamples})
	}
	for _, s := range sides {
		switch {
		case math.IsNaN(s.value):
			return fmt.Sprintf("no data for the %s", s.name)
		case m.MinSamples > 0 && !math.IsNaN(s.samples) && s.samples < m.MinSamples:
			return fmt.Sprintf("too few samples: %s %s < min %s", s.name, num(s.samples), num(m.MinSamples))
		}
	}
	return ""
}

// num writes a value for people: four significant digits.
func num(f float64) string { return fmt.Sprintf("%.4g", f) }
