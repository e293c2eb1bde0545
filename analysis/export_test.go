package analysis

// ExactP and NormalP are MannWhitneyP's two ways, whichever the sizes,
// for the benchmark that measures how far apart they are.
func ExactP(x, y []float64) float64 { return exactP(tieGroups(x, y), len(x)) }

func NormalP(x, y []float64) float64 { return normalP(tieGroups(x, y), len(x), len(y)) }
