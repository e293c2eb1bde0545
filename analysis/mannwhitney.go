package analysis

import (
	"cmp"
	"fmt"
	"math"
	"math/bits"
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
// values of x tend to be greater than those of y: the probability, were
// the labels x and y shuffled over the pooled values, of a U (pairs of x
// above y, ties counting a half) at least x's. Where counting it costs at
// most exactMaxWork (exactFits) it is that probability exactly, ties
// included (the permutation distribution given the tied values: exactP);
// beyond, the normal approximation with the tie correction and a
// continuity correction (the test Kayenta runs per metric). It is 1 when
// either side is empty or every value is equal.
func MannWhitneyP(x, y []float64) float64 {
	if len(x) == 0 || len(y) == 0 {
		return 1
	}
	groups := tieGroups(x, y)
	if exactFits(groups, len(x), len(y)) {
		return exactP(groups, len(x))
	}
	return normalP(groups, len(x), len(y))
}

// exactMaxWork is the most exactWork MannWhitneyP spends on the exact p:
// that of 20 points a side without ties (1,330,841, about 1 ms), rounded
// up. The work grows with the smaller side, so a few points against
// hundreds fit (3 against 250, 2 against 400), more on few levels, where
// the normal approximation is most eager (by 69 % of p at 3 against 200
// on 2 levels); past it the approximation is eager by about 1 % of p on
// balanced sides without ties (BenchmarkMannWhitneyP; BENCHMARKS.md,
// "Analysis").
const exactMaxWork = 1_350_000

// exactFits reports whether exactP counts the p of n1 values against n2
// within exactMaxWork, and exactly: its counts reach C(n1+n2, k), k the
// smaller side, which a float64 holds exactly only below 2^53.
func exactFits(groups []tieGroup, n1, n2 int) bool {
	k := min(n1, n2)
	return exactWork(groups, k, n1+n2) <= exactMaxWork && chooseBelow(n1+n2, k, 1<<53)
}

// exactWork is about the cells exactP visits counting k of total values:
// its table of k+1 rows of sums, and per tie group of n, for each i ≤ k
// values taken, a pass over the sums for each j ≤ min(i, n) of the
// group's. A float64, so that no sample overflows it.
func exactWork(groups []tieGroup, k, total int) float64 {
	sums := float64(k)*float64(2*total+1) + 1
	passes := float64(k + 1)
	for _, g := range groups {
		n := float64(min(g.n, k))
		passes += n*float64(k) - n*(n-1)/2 // Σ min(i, n) over i = 1…k
	}
	return passes * sums
}

// chooseBelow reports whether C(n, k) < limit, for k ≤ n/2. It builds
// C(n-k+i, i) for i = 1…k, each an integer, growing, and stops at the
// first at or past limit; limit is at most 2^53, so an overflow of 64
// bits is past it (with k ≤ n/2, C(n, k) ≥ C(2k, k) ≥ 2^53 once k > 2^11).
func chooseBelow(n, k int, limit uint64) bool {
	c := uint64(1)
	for i := 1; i <= k; i++ {
		hi, lo := bits.Mul64(c, uint64(n-k+i))
		if hi != 0 {
			return false
		}
		if c = lo / uint64(i); c >= limit {
			return false
		}
	}
	return true
}

// normalP is the one-sided p of the rank sum of the n1 values from x by
// the normal approximation of U, with the tie correction of its variance
// and a continuity correction.
func normalP(groups []tieGroup, n1, n2 int) float64 {
	var rankX, ties float64
	below := 0
	for _, g := range groups {
		rankX += float64(g.x) * float64(2*below+g.n+1) / 2 // the group's midrank
		t := float64(g.n)
		ties += t*t*t - t
		below += g.n
	}
	m1, m2 := float64(n1), float64(n2)
	u := rankX - m1*(m1+1)/2
	n := m1 + m2
	sigma2 := m1 * m2 / 12 * ((n + 1) - ties/(n*(n-1)))
	if sigma2 <= 0 {
		return 1
	}
	z := (u - m1*m2/2 - 0.5) / math.Sqrt(sigma2)
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// tieGroup is a run of equal values in the pooled, sorted observations:
// n of them, x of which are from x.
type tieGroup struct{ n, x int }

// tieGroups pools x and y, sorts them and returns the runs of equal
// values, lowest first.
func tieGroups(x, y []float64) []tieGroup {
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
	slices.SortFunc(all, func(a, b obs) int { return cmp.Compare(a.v, b.v) })
	var groups []tieGroup
	for i := 0; i < len(all); {
		g := tieGroup{}
		for j := i; j < len(all) && all[j].v == all[i].v; j++ {
			g.n++
			if all[j].fromX {
				g.x++
			}
		}
		groups = append(groups, g)
		i += g.n
	}
	return groups
}

// exactP is the exact one-sided p of the rank sum of the n1 values from x:
// among every choice of n1 of the pooled values (C(N, n1), all equally
// likely when x and y come from one distribution), the share whose sum
// of midranks is at least x's. Tied values share a midrank, so the count
// runs over the tie groups: taking j of a group of n adds j times its
// midrank, in C(n, j) ways. Doubled midranks are integers. The counts are
// at most C(N, n1), exact in a float64 for the sizes exactFits admits.
func exactP(groups []tieGroup, n1 int) float64 {
	total := 0
	for _, g := range groups {
		total += g.n
	}
	// Count the smaller side's choices: the cost grows as the square of
	// its size. The two rank sums add up to a constant, so x's at least
	// its own is y's at most its own.
	k, countY := n1, total-n1 < n1
	if countY {
		k = total - n1
	}
	maxSum := k * (2*total + 1) // twice the largest rank sum of k values
	// count[i][s]: the ways to take i values so far with doubled rank sum s.
	count := make([][]float64, k+1)
	for i := range count {
		count[i] = make([]float64, maxSum+1)
	}
	count[0][0] = 1
	observed, below := 0, 0
	for _, g := range groups {
		rank2 := 2*below + g.n + 1
		if countY {
			observed += (g.n - g.x) * rank2
		} else {
			observed += g.x * rank2
		}
		// Down from k, so that count[i-j] still counts the groups before g.
		for i := k; i >= 1; i-- {
			ways := 1.0 // C(g.n, j)
			for j := 1; j <= min(g.n, i); j++ {
				ways = ways * float64(g.n-j+1) / float64(j)
				from, to := count[i-j], count[i]
				for s := maxSum - j*rank2; s >= 0; s-- {
					if from[s] != 0 {
						to[s+j*rank2] += ways * from[s]
					}
				}
			}
		}
		below += g.n
	}
	var atLeast, all float64
	for s, c := range count[k] {
		all += c
		if (!countY && s >= observed) || (countY && s <= observed) {
			atLeast += c
		}
	}
	return atLeast / all
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
