package compiler_test

import (
	"context"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/cputime"
	"github.com/cuecast/cuecast/internal/gen"
)

// BenchmarkExplainOneConfig is `cuecast explain` of one config of the
// 2,000-config generated repo on disk, everything included: listing the
// repo, the manifest, the schema, the evaluation and the walk over the
// output. Issue 20's target is under 100 ms (BENCHMARKS.md).
func BenchmarkExplainOneConfig(b *testing.B) {
	dir, _ := benchRepo(b, 2000)
	cfg := cuecast.ConfigPath(gen.ConfigPath(gen.Options{}, 1000))
	b.ReportAllocs()
	cputime.PerOp(b, func() {
		ex, err := compiler.Explain(context.Background(), dir, cfg, compiler.ExplainOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if len(ex.Values) == 0 {
			b.Fatal("no values explained")
		}
	})
}
