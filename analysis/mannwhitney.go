package analysis

import (
	"fmt"
	"math"
	"slices"

	"github.com/cuecast/cuecast"
)

// judgeMannWhitney is Judge for CompareMannWhitney: a one-sided
// Mann-Whitney U test that the cohort's points are higher than the
// baseline's, failing when p < Alpha and the cohort's median exceeds the
// baseline's by more than Max. MinSamples counts the Samples query's
// observations per side when there is one, else the points. Its
// false-positive rate per evaluation is
// about Alpha (TestMannWhitneyFalsePositiveRate measures it).
func judgeMannWhitney(m cuecast.Metric, r Result) Verdict {
	nc, nb := float64(len(r.CohortPoints)), float64(len(r.BaselinePoints))
	v := Verdict{Cohort: median(r.CohortPoints), Baseline: median(r.BaselinePoints)}
	if m.Samples != "" {
		// min_samples counts the samples query's observations; the
		// points need only exist.
		switch {
		case nc == 0:
			v.Outcome, v.Detail = Inconclusive, "no data for the cohort"
			return v
		case nb == 0:
			v.Outcome, v.Detail = Inconclusive, "no data for the baseline"
			return v
		}
		if why := tooFew(m, Result{Cohort: v.Cohort, Baseline: v.Baseline, CohortSamples: r.CohortSamples, BaselineSamples: r.BaselineSamples}); why != "" {
			v.Outcome, v.Detail = Inconclusive, why
			return v
		}
	} else if minN := max(m.MinSamples, 1); nc < minN || nb < minN {
		v.Outcome = Inconclusive
		v.Detail = fmt.Sprintf("too few samples: cohort %d, baseline %d points < min %s", len(r.CohortPoints), len(r.BaselinePoints), num(minN))
		return v
	}
	p := MannWhitneyP(r.CohortPoints, r.BaselinePoints)
	diff := v.Cohort - v.Baseline
	over := exceeds(diff, m.Max, max(math.Abs(v.Cohort), math.Abs(v.Baseline)))
	if !over {
		diff = min(diff, m.Max) // within the tolerance of max: at it
	}
	d := digits(over, diff, m.Max, v.Cohort, v.Baseline)
	expr := fmt.Sprintf("Mann-Whitney p = %.3g (alpha %s) over %d cohort and %d baseline points; median cohort %s − baseline %s = %s",
		p, num(m.Alpha), len(r.CohortPoints), len(r.BaselinePoints), numP(v.Cohort, d), numP(v.Baseline, d), numP(diff, d))
	if p < m.Alpha && over {
		v.Outcome, v.Detail = Fail, fmt.Sprintf("%s > max %s", expr, numP(m.Max, d))
		return v
	}
	v.Outcome, v.Detail = Pass, fmt.Sprintf("%s; max %s", expr, numP(m.Max, d))
	return v
}

// MannWhitneyP is the one-sided p-value of a Mann-Whitney U test that the
// values of x tend to be greater than those of y: the normal approximation
// with the tie correction and a continuity correction, good from about
// eight values a side (the test Kayenta runs per metric). It is 1 when
// either side is empty or every value is equal.
func MannWhitneyP(x, y []float64) float64 {
	n1, n2 := float64(len(x)), float64(len(y))
	if n1 == 0 || n2 == 0 {
		return 1
	}
	type obs struct {
		v     float64
		fromX bool
	}
	all := make([]obs, 0, len(x)+len(y))
	for _, v := range x {
		all = append(all, obs{v, true})
	}
	for _, v := range y {
		all = append(all, obs{v, false})
	}
	slices.SortFunc(all, func(a, b obs) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	var rankX, ties float64
	for i := 0; i < len(all); {
		j := i
		for j < len(all) && all[j].v == all[i].v {
			j++
		}
		rank := float64(i+j+1) / 2 // average of ranks i+1 … j
		for k := i; k < j; k++ {
			if all[k].fromX {
				rankX += rank
			}
		}
		t := float64(j - i)
		ties += t*t*t - t
		i = j
	}
	u := rankX - n1*(n1+1)/2
	n := n1 + n2
	sigma2 := n1 * n2 / 12 * ((n + 1) - ties/(n*(n-1)))
	if sigma2 <= 0 {
		return 1
	}
	z := (u - n1*n2/2 - 0.5) / math.Sqrt(sigma2)
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Sorted(slices.Values(xs))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
