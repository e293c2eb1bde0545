//go:build unix

package ci_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/cputime"
	"github.com/cuecast/cuecast/internal/gen"
	"github.com/cuecast/cuecast/internal/gittest"
)

// BenchmarkCheckOneConfig is the PR check of a commit that edits one
// config of a generated repo, next to a full compile of the same repo
// (BenchmarkCheckOneConfig/full): issue 16 asks for the check to take at
// most 1/20 of the full compile. check-loose reads loose objects, as right
// after the commits; check reads the repacked repo, as a CI checkout does. BENCHMARKS.md, section Compiler, has the
// numbers.
func BenchmarkCheckOneConfig(b *testing.B) {
	for _, n := range []int{2000} {
		o := gen.Options{Configs: n, Seed: 7}
		r := gittest.New(b)
		files := gen.Repo(o)
		if err := files.Write(r.Dir); err != nil {
			b.Fatal(err)
		}
		base := r.Commit("base")
		p := gen.ConfigPath(o, n/2) + "/config.cue"
		r.Write(map[string]string{p: string(files[p]) + "extra_setting: 1\n"})
		head := r.Commit("one config")
		b.Run(fmt.Sprintf("configs=%d/check-loose", n), func(b *testing.B) {
			b.ReportAllocs()
			cputime.PerOp(b, func() { checkOne(b, r.Dir, base, head) })
		})
		// A CI checkout reads a packfile, not loose objects.
		if err := r.Git.RepackObjects(&git.RepackConfig{}); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("configs=%d/check", n), func(b *testing.B) {
			b.ReportAllocs()
			cputime.PerOp(b, func() { checkOne(b, r.Dir, base, head) })
		})
		b.Run(fmt.Sprintf("configs=%d/full", n), func(b *testing.B) {
			b.ReportAllocs()
			cputime.PerOp(b, func() {
				res, err := compiler.Compile(context.Background(), r.Dir, compiler.Options{})
				if err != nil || !res.OK() {
					b.Fatalf("compile: %v %v", err, res.Errors)
				}
			})
		})
	}
}

func checkOne(b *testing.B, dir, base, head string) {
	b.Helper()
	rep, err := ci.Check(context.Background(), dir, ci.Options{Base: base, Head: head})
	if err != nil {
		b.Fatal(err)
	}
	if len(rep.Configs) != 1 {
		b.Fatalf("check reports %d configs, want 1", len(rep.Configs))
	}
}
