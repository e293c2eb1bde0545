package compiler_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/cputime"
	"github.com/cuecast/cuecast/internal/gen"
)

// The benchmarks compile generated repos written to disk, as the CLI and
// a checkout-based CI would. BENCHMARKS.md, section Compiler, has the
// numbers and the comparison with the cue CLI.

func benchRepo(b *testing.B, configs int) (string, gen.Files) {
	b.Helper()
	dir := b.TempDir()
	files := gen.Repo(gen.Options{Configs: configs, Seed: 7})
	if err := files.Write(dir); err != nil {
		b.Fatal(err)
	}
	return dir, files
}

func mustCompile(b *testing.B, dir string, opts compiler.Options) *compiler.Result {
	b.Helper()
	res, err := compiler.Compile(context.Background(), dir, opts)
	if err != nil {
		b.Fatal(err)
	}
	if !res.OK() {
		b.Fatalf("generated repo does not compile: %v", res.Errors[0])
	}
	return res
}

// BenchmarkCompileFull includes 5,000 and 10,000 configs so that
// superlinear growth shows: cpu-ms/op divided by configs should stay flat.
func BenchmarkCompileFull(b *testing.B) {
	for _, n := range []int{200, 2000, 5000, 10000} {
		b.Run(fmt.Sprintf("configs=%d", n), func(b *testing.B) {
			dir, _ := benchRepo(b, n)
			b.ReportAllocs()
			cputime.PerOp(b, func() { mustCompile(b, dir, compiler.Options{}) })
		})
	}
}

// BenchmarkIncrementalOneConfig is what the tailer does for a commit that
// touches one config: plan with the previous Index, compile what it names.
func BenchmarkIncrementalOneConfig(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("configs=%d", n), func(b *testing.B) {
			dir, _ := benchRepo(b, n)
			full := mustCompile(b, dir, compiler.Options{})
			changed := gen.ConfigPath(gen.Options{}, n/2) + "/config.cue"
			b.ReportAllocs()
			cputime.PerOp(b, func() {
				affected := full.Index.Affected([]string{changed})
				if len(affected) != 1 {
					b.Fatalf("affected %v, want one config", affected)
				}
				mustCompile(b, dir, compiler.Options{Configs: affected})
			})
		})
	}
}

// BenchmarkIncrementalLibrary changes a library imported by 10% of configs.
func BenchmarkIncrementalLibrary(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("configs=%d", n), func(b *testing.B) {
			dir, _ := benchRepo(b, n)
			full := mustCompile(b, dir, compiler.Options{})
			b.ReportAllocs()
			cputime.PerOp(b, func() {
				affected := full.Index.Affected([]string{"lib/l3/l3.cue"})
				if len(affected) != n/10 {
					b.Fatalf("affected %d configs, want %d", len(affected), n/10)
				}
				mustCompile(b, dir, compiler.Options{Configs: affected})
			})
		})
	}
}

// BenchmarkAffected measures planning alone.
func BenchmarkAffected(b *testing.B) {
	files := gen.Repo(gen.Options{Configs: 2000, Seed: 7})
	res, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: files.MapFS()})
	if err != nil {
		b.Fatal(err)
	}
	changed := []string{"lib/l3/l3.cue", gen.ConfigPath(gen.Options{}, 5) + "/config.cue"}
	var got []cuecast.ConfigPath
	for b.Loop() {
		got = res.Index.Affected(changed)
	}
	if len(got) == 0 {
		b.Fatal("nothing affected")
	}
}

// benchVariantRepo writes a generated repo with Variants: a quarter of the
// configs read env and region (6 variants each); every namespace also
// declares tier, which no config reads. Without tier, the namespaces
// declare 6 combinations instead of 24.
func benchVariantRepo(b *testing.B, configs int, tier bool) string {
	b.Helper()
	dir := b.TempDir()
	files := gen.Repo(gen.Options{Configs: configs, Seed: 7, Variants: true})
	if !tier {
		files = files.Clone()
		files["cuecast.cue"] = []byte(strings.ReplaceAll(string(files["cuecast.cue"]), "\t\ttier: [\"t1\", \"t2\", \"t3\", \"t4\"]\n", ""))
	}
	if err := files.Write(dir); err != nil {
		b.Fatal(err)
	}
	return dir
}

// BenchmarkCompileVariants is a full compile of a repo whose configs use
// dimensions (docs/VARIANTS.md): "plain" has no dimensions; "variants"
// has a quarter of the configs compiled 6 times each; "declared=24" is
// the same with a third, unused dimension declared (24 combinations
// declared, still 6 compiled). Time should follow variants/op, the
// outputs compiled, and "declared=24" should cost what "variants" does.
func BenchmarkCompileVariants(b *testing.B) {
	for _, n := range []int{200, 2000} {
		for _, c := range []struct {
			name           string
			variants, tier bool
		}{{"plain", false, false}, {"variants", true, false}, {"declared=24", true, true}} {
			b.Run(fmt.Sprintf("configs=%d/%s", n, c.name), func(b *testing.B) {
				var dir string
				if c.variants {
					dir = benchVariantRepo(b, n, c.tier)
				} else {
					dir, _ = benchRepo(b, n)
				}
				b.ReportAllocs()
				var res *compiler.Result
				cputime.PerOp(b, func() { res = mustCompile(b, dir, compiler.Options{}) })
				b.ReportMetric(float64(len(res.Outputs)), "outputs/op")
			})
		}
	}
}

// BenchmarkIncrementalOneVariantConfig is the tailer's work for a commit
// that changes one config using two dimensions: plan with the Index, then
// compile that config's 6 variants (and its index). Compare with
// BenchmarkCompileVariants/configs=2000/variants: the issue asks for at
// least 20 times faster.
func BenchmarkIncrementalOneVariantConfig(b *testing.B) {
	for _, n := range []int{200, 2000} {
		b.Run(fmt.Sprintf("configs=%d", n), func(b *testing.B) {
			dir := benchVariantRepo(b, n, true)
			full := mustCompile(b, dir, compiler.Options{})
			i := n / 2
			if !gen.UsesDimensions(gen.Options{Variants: true}, i) {
				b.Fatalf("config %d uses no dimension", i)
			}
			changed := gen.ConfigPath(gen.Options{}, i) + "/config.cue"
			b.ReportAllocs()
			cputime.PerOp(b, func() {
				affected := full.Index.Affected([]string{changed})
				if len(affected) != 1 {
					b.Fatalf("affected %v, want one config", affected)
				}
				res := mustCompile(b, dir, compiler.Options{Configs: affected})
				if len(res.Outputs) != 7 {
					b.Fatalf("%d outputs, want 6 variants and the index", len(res.Outputs))
				}
			})
		})
	}
}
