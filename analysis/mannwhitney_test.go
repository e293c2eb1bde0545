package analysis_test

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
)

// enumeratedP is the oracle of TestMannWhitneyPExact: the one-sided p of
// x above y by the permutation distribution itself. It counts, over every
// way of taking len(x) of the pooled values as the cohort, the share whose
// U (pairs above, ties a half) is at least x's. Midranks make U of a
// split its rank sum less len(x)·(len(x)+1)/2, so the count compares
// doubled rank sums, in integers.
func enumeratedP(x, y []float64) float64 {
	pooled := append(slices.Clone(x), y...)
	rank2 := make([]int, len(pooled)) // twice each value's midrank
	for i, v := range pooled {
		below, equal := 0, 0
		for _, w := range pooled {
			switch {
			case w < v:
				below++
			case w == v:
				equal++
			}
		}
		rank2[i] = 2*below + equal + 1
	}
	observed := 0
	for i := range x {
		observed += rank2[i]
	}
	atLeast, all := 0, 0
	var choose func(from, left, sum int)
	choose = func(from, left, sum int) {
		if left == 0 {
			all++
			if sum >= observed {
				atLeast++
			}
			return
		}
		for i := from; i <= len(pooled)-left; i++ {
			choose(i+1, left-1, sum+rank2[i])
		}
	}
	choose(0, len(x), 0)
	return float64(atLeast) / float64(all)
}

// hypergeometricP is the oracle for samples on two levels, 0 and 1: a
// split's rank sum grows with the ones it takes, so the exact p is the
// chance that len(x) values drawn from the pool, without replacement,
// hold at least as many ones as x does.
func hypergeometricP(x, y []float64) float64 {
	count := func(vs []float64) (ones int64) {
		for _, v := range vs {
			if v == 1 {
				ones++
			}
		}
		return ones
	}
	k, n := int64(len(x)), int64(len(x)+len(y))
	ones := count(x) + count(y)
	atLeast := new(big.Int)
	for j := count(x); j <= min(k, ones); j++ {
		ways := new(big.Int).Binomial(ones, j)
		atLeast.Add(atLeast, ways.Mul(ways, new(big.Int).Binomial(n-ones, k-j)))
	}
	p, _ := new(big.Rat).SetFrac(atLeast, new(big.Int).Binomial(n, k)).Float64()
	return p
}

// enumerable reports whether enumeratedP can count x against y in a
// test's time: at most a few million splits.
func enumerable(x, y []float64) bool {
	splits := new(big.Int).Binomial(int64(len(x)+len(y)), int64(len(x)))
	return splits.Cmp(big.NewInt(3_000_000)) <= 0
}

// levels is n values, the first ones of them 1, the rest 0.
func levels(n, ones int) []float64 {
	out := make([]float64, n)
	for i := range ones {
		out[i] = 1
	}
	return out
}

// seq is from, from+1, …, n values.
func seq(from float64, n int) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = from + float64(i)
	}
	return out
}

// TestMannWhitneyPExact: at small samples MannWhitneyP is the exact
// permutation p, not the normal approximation, which is eager there (3
// against 3 all above: 0.040 for an exact 0.05, a halt at alpha 0.05 the
// evidence does not support). So it is with a small side against a large
// one, and with heavy ties, where counting is cheap though the sides'
// sizes multiply to far more than 400. Known values first, then the
// enumeration as the oracle, with and without ties, each way round.
func TestMannWhitneyPExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 1))
	draw := func(n, levels int, shift float64) []float64 {
		out := make([]float64, n)
		for i := range out {
			out[i] = float64(rng.IntN(levels)) + shift
		}
		return out
	}
	tests := []struct {
		name string
		x, y []float64
		want float64 // NaN: the enumeration's
	}{
		{"3 v 3 all above: 1/C(6,3)", []float64{4, 5, 6}, []float64{1, 2, 3}, 1.0 / 20},
		{"4 v 4 all above: 1/C(8,4)", []float64{5, 6, 7, 8}, []float64{1, 2, 3, 4}, 1.0 / 70},
		{"8 v 8 all above: 1/C(16,8)", []float64{9, 10, 11, 12, 13, 14, 15, 16}, []float64{1, 2, 3, 4, 5, 6, 7, 8}, 1.0 / 12870},
		{"3 v 3 all below", []float64{1, 2, 3}, []float64{4, 5, 6}, 1},
		{"200 v 2 all above: 1/C(202,2)", seq(3, 200), []float64{1, 2}, 1.0 / 20301},
		{"2 v 200 all above: 1/C(202,2)", []float64{201, 202}, seq(1, 200), 1.0 / 20301},
		{"9 v 3 with ties", []float64{1, 2, 2, 3, 4, 4, 5, 6, 6}, []float64{2, 4, 5}, math.NaN()},
		{"1 v 1 above", []float64{2}, []float64{1}, 0.5},
		{"2 v 2 with a tie: P(U ≥ 3.5) = 2/6", []float64{2, 3}, []float64{1, 2}, 1.0 / 3},
		{"all tied", []float64{1, 1, 1}, []float64{1, 1, 1}, 1},
		{"3 v 5 interleaved", []float64{2, 5, 8}, []float64{1, 3, 4, 6, 7}, math.NaN()},
		{"5 v 4 with ties", []float64{1, 2, 2, 3, 3}, []float64{1, 1, 2, 3}, math.NaN()},
		{"2 v 9", []float64{7, 9}, []float64{1, 2, 3, 4, 5, 6, 8, 10, 11}, math.NaN()},
		{"6 v 6 drawn, 4 levels", draw(6, 4, 0.5), draw(6, 4, 0), math.NaN()},
		{"7 v 5 drawn, 3 levels", draw(7, 3, 0), draw(5, 3, 0), math.NaN()},
		{"10 v 10 drawn, 5 levels, cohort higher", draw(10, 5, 1), draw(10, 5, 0), math.NaN()},
		{"10 v 10 drawn, continuous", draw(10, 1000, 0), draw(10, 1000, 0), math.NaN()},
		{"12 v 6 drawn, 2 levels", draw(12, 2, 0), draw(6, 2, 0), math.NaN()},
		{"3 v 200 all above: 1/C(203,3)", []float64{201, 202, 203}, seq(1, 200), 1.0 / 1373701},
		{"2 v 300 all above: 1/C(302,2)", []float64{301, 302}, seq(1, 300), 1.0 / 45451},
		{"300 v 2 all above: 1/C(302,2)", seq(3, 300), []float64{1, 2}, 1.0 / 45451},
		{"3 v 250 drawn, continuous, cohort higher", draw(3, 1000, 700), draw(250, 1000, 0), math.NaN()},
		{"3 v 200 drawn, 4 levels, cohort higher", draw(3, 4, 2), draw(200, 4, 0), math.NaN()},
		{"2 v 300 drawn, 3 levels, cohort higher", draw(2, 3, 1), draw(300, 3, 0), math.NaN()},
		{"8 v 300 on 2 levels: hypergeometric", levels(8, 5), levels(300, 30), hypergeometricP(levels(8, 5), levels(300, 30))},
		{"300 v 8 on 2 levels: hypergeometric", levels(300, 290), levels(8, 3), hypergeometricP(levels(300, 290), levels(8, 3))},
		{"3 v 200 on 2 levels, 1 cohort point up: 0.058", levels(3, 1), levels(200, 3), hypergeometricP(levels(3, 1), levels(200, 3))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			switch {
			case math.IsNaN(want):
				want = enumeratedP(tt.x, tt.y)
			case enumerable(tt.x, tt.y):
				if e := enumeratedP(tt.x, tt.y); math.Abs(e-want) > 1e-12 {
					t.Fatalf("the oracle: enumeration %v, known %v", e, want)
				}
			}
			if got := analysis.MannWhitneyP(tt.x, tt.y); math.Abs(got-want) > 1e-12*want {
				t.Errorf("MannWhitneyP of %d and %d points = %.6g, want %.6g (exact)", len(tt.x), len(tt.y), got, want)
			}
		})
	}
}

// TestMannWhitneyPWay: MannWhitneyP counts the exact p while exactP's
// work is at most that of 20 points a side without ties, and its counts,
// at most C(N, k) for k of N on the smaller side, stay below 2^53, where
// a float64 holds them exactly; otherwise it is the normal approximation.
func TestMannWhitneyPWay(t *testing.T) {
	tests := []struct {
		name  string
		x, y  []float64
		exact bool
	}{
		{"20 v 20, the dearest count admitted", seq(0.5, 20), seq(0, 20), true},
		{"21 v 20, dearer", seq(0.5, 21), seq(0, 20), false},
		{"30 v 30", seq(0.5, 30), seq(0, 30), false},
		{"3 v 250", seq(0.5, 3), seq(0, 250), true},
		{"3 v 300, dearer", seq(0.5, 3), seq(0, 300), false},
		{"400 v 2", seq(0.5, 400), seq(0, 2), true},
		{"8 v 300 on 2 levels, C(308,8) < 2^53", levels(8, 4), levels(300, 30), true},
		{"10 v 300 on 2 levels, cheap but C(310,10) > 2^53", levels(10, 4), levels(300, 30), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			way, want := "normal", analysis.NormalP(tt.x, tt.y)
			if tt.exact {
				way, want = "exact", analysis.ExactP(tt.x, tt.y)
			}
			if got := analysis.MannWhitneyP(tt.x, tt.y); got != want {
				t.Errorf("MannWhitneyP of %d and %d points = %.6g, want the %s p %.6g", len(tt.x), len(tt.y), got, way, want)
			}
		})
	}
}

// TestJudgeMannWhitneySmallSamples: 3 points a side, every cohort point
// above every baseline point, is p = 0.05 exactly, which is not below
// alpha 0.05: the evaluation passes (it failed on the normal
// approximation's 0.040). So are 2 of 3 cohort points at 1 against 26 of
// 200 baseline points (0.0505; the approximation said 0.0039).
func TestJudgeMannWhitneySmallSamples(t *testing.T) {
	tests := []struct {
		name  string
		x, y  []float64
		wantP float64
	}{
		{"3 v 3 all above", []float64{4, 5, 6}, []float64{1, 2, 3}, 0.05},
		{"3 v 200 on 2 levels", levels(3, 2), levels(200, 26), hypergeometricP(levels(3, 2), levels(200, 26))},
	}
	m := cuecast.Metric{Name: "latency", Compare: cuecast.CompareMannWhitney, Max: 0, MinSamples: 3, Alpha: 0.05}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := analysis.Judge(m, analysis.Result{CohortPoints: tt.x, BaselinePoints: tt.y})
			if want := fmt.Sprintf("p = %.3g", tt.wantP); v.Outcome != analysis.Pass || !strings.Contains(v.Detail, want) {
				t.Errorf("Judge = %s %q, want pass with %s", v.Outcome, v.Detail, want)
			}
		})
	}
}

// BenchmarkMannWhitneyP measures MannWhitneyP's two ways at the sizes
// around exactMaxWork: the time of each, and how eager the normal
// approximation is against the exact p (eager-%: the most it falls below
// it, relative, over 200 draws whose exact p lies in [0.001, 0.1], the
// levels alpha takes), for continuous values, for values on 4 levels
// (ties, as error ratios of few requests have) and on 2 (heavy ties, as
// 0/1 outcomes have), a few points against hundreds among them.
func BenchmarkMannWhitneyP(b *testing.B) {
	sizes := []struct {
		n      [2]int
		levels []int
	}{
		{[2]int{3, 3}, []int{0, 4}}, {[2]int{8, 8}, []int{0, 4}}, {[2]int{20, 20}, []int{0, 4}},
		{[2]int{21, 20}, []int{0, 4}}, {[2]int{2, 200}, []int{0, 4}}, {[2]int{200, 2}, []int{0, 4}},
		{[2]int{2, 201}, []int{0, 4}}, {[2]int{30, 30}, []int{0, 4}},
		{[2]int{3, 200}, []int{0, 4, 2}}, {[2]int{3, 250}, []int{0, 4, 2}},
		{[2]int{2, 300}, []int{0, 4, 2}}, {[2]int{2, 400}, []int{0, 4, 2}},
		{[2]int{8, 300}, []int{2}},
	}
	for _, s := range sizes {
		size := s.n
		for _, levels := range s.levels {
			rng := rand.New(rand.NewPCG(1, 2))
			draw := func(n int, shift float64) []float64 {
				out := make([]float64, n)
				for i := range out {
					if levels == 0 {
						out[i] = rng.NormFloat64() + shift
					} else {
						out[i] = float64(rng.IntN(levels)) + math.Round(shift*rng.Float64())
					}
				}
				return out
			}
			eager := 0.0
			for range 200 {
				x, y := draw(size[0], 1.2), draw(size[1], 0)
				if e := analysis.ExactP(x, y); e >= 0.001 && e <= 0.1 {
					eager = max(eager, (e-analysis.NormalP(x, y))/e)
				}
			}
			x, y := draw(size[0], 0), draw(size[1], 0)
			for _, way := range []struct {
				name string
				p    func(x, y []float64) float64
			}{{"exact", analysis.ExactP}, {"normal", analysis.NormalP}} {
				b.Run(fmt.Sprintf("%dv%d/levels=%d/%s", size[0], size[1], levels, way.name), func(b *testing.B) {
					for b.Loop() {
						way.p(x, y)
					}
					b.ReportMetric(100*eager, "eager-%")
				})
			}
		}
	}
}
