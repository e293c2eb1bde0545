package analysis_test

import (
	"fmt"
	"math"
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
// evidence does not support). Known values first, then the enumeration as
// the oracle, with and without ties, each way round.
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := tt.want
			if math.IsNaN(want) {
				want = enumeratedP(tt.x, tt.y)
			} else if e := enumeratedP(tt.x, tt.y); math.Abs(e-want) > 1e-12 {
				t.Fatalf("the oracle: enumeration %v, known %v", e, want)
			}
			if got := analysis.MannWhitneyP(tt.x, tt.y); math.Abs(got-want) > 1e-12*want {
				t.Errorf("MannWhitneyP(%v, %v) = %.6g, want %.6g (exact)", tt.x, tt.y, got, want)
			}
		})
	}
}

// TestJudgeMannWhitneySmallSamples: 3 points a side, every cohort point
// above every baseline point, is p = 0.05 exactly, which is not below
// alpha 0.05: the evaluation passes (it failed on the normal
// approximation's 0.040).
func TestJudgeMannWhitneySmallSamples(t *testing.T) {
	m := cuecast.Metric{Name: "latency", Compare: cuecast.CompareMannWhitney, Max: 0, MinSamples: 3, Alpha: 0.05}
	v := analysis.Judge(m, analysis.Result{CohortPoints: []float64{4, 5, 6}, BaselinePoints: []float64{1, 2, 3}})
	if want := fmt.Sprintf("p = %.3g", 0.05); v.Outcome != analysis.Pass || !strings.Contains(v.Detail, want) {
		t.Errorf("Judge = %s %q, want pass with %s", v.Outcome, v.Detail, want)
	}
}

// BenchmarkMannWhitneyP measures MannWhitneyP's two ways at the sizes
// around exactMaxPairs: the time of each, and how eager the normal
// approximation is against the exact p (eager-%: the most it falls below
// it, relative, over 200 draws whose exact p lies in [0.001, 0.1], the
// levels alpha takes), for continuous values and for values on 4 levels
// (ties, as error ratios of few requests have).
func BenchmarkMannWhitneyP(b *testing.B) {
	for _, size := range [][2]int{{3, 3}, {8, 8}, {20, 20}, {21, 20}, {2, 200}, {200, 2}, {2, 201}, {30, 30}} {
		for _, levels := range []int{0, 4} {
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
