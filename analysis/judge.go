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
	// (or the number of points, for Mann-Whitney without one); NaN when
	// not measured.
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
	var value, scale float64
	switch m.Compare {
	case cuecast.CompareThreshold:
		value = r.Cohort
	case cuecast.CompareRatio:
		value = r.Cohort / r.Baseline
		if r.Baseline == 0 {
			value = 0
			if r.Cohort > 0 {
				value = math.Inf(1)
			}
		}
	default:
		value = r.Cohort - r.Baseline
		// The difference's rounding error is relative to the sides,
		// not to the difference.
		scale = max(math.Abs(r.Cohort), math.Abs(r.Baseline))
	}
	fail := exceeds(value, m.Max, scale)
	if !fail {
		// Within the tolerance of max: say so, as decided.
		value = min(value, m.Max)
	}
	p := digits(fail, value, m.Max, r.Cohort, r.Baseline)
	var expr string
	switch m.Compare {
	case cuecast.CompareThreshold:
		expr = fmt.Sprintf("cohort %s", numP(r.Cohort, p))
	case cuecast.CompareRatio:
		expr = fmt.Sprintf("cohort %s ÷ baseline %s = %s", numP(r.Cohort, p), numP(r.Baseline, p), numP(value, p))
	default:
		expr = fmt.Sprintf("cohort %s − baseline %s = %s", numP(r.Cohort, p), numP(r.Baseline, p), numP(value, p))
	}
	if fail {
		v.Outcome, v.Detail = Fail, fmt.Sprintf("%s > max %s", expr, numP(m.Max, p))
		return v
	}
	v.Outcome, v.Detail = Pass, fmt.Sprintf("%s ≤ max %s", expr, numP(m.Max, p))
	return v
}

// tolerance is how far, relative to the values compared, a value may lie
// over max and still be at it: float arithmetic puts 0.07 − 0.06 at
// 0.010000000000000009, which is 0.01 as printed and as meant ("halts only
// when greater than max").
const tolerance = 1e-9

// exceeds says whether value is greater than limit by more than the
// tolerance, relative to the larger of value, limit and scale (the sides
// a difference was computed from).
func exceeds(value, limit, scale float64) bool {
	if math.IsInf(value, 1) {
		return !math.IsInf(limit, 1)
	}
	scale = max(scale, math.Abs(value), math.Abs(limit))
	return value > limit && value-limit > tolerance*scale
}

// digits is the precision to print a verdict's values at: four
// significant digits, or as many more as it takes for a value over the
// limit (fail) to print unlike the limit, and for the two sides (a, b) to
// print unlike each other when they differ, so what is printed says what
// was decided.
func digits(fail bool, value, limit, a, b float64) int {
	for p := 4; p < 17; p++ {
		if (!fail || numP(value, p) != numP(limit, p)) && (a == b || math.IsNaN(a) || math.IsNaN(b) || numP(a, p) != numP(b, p)) {
			return p
		}
	}
	return 17
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
func num(f float64) string { return numP(f, 4) }

// numP writes a value for people with p significant digits.
func numP(f float64, p int) string { return fmt.Sprintf("%.*g", p, f) }
