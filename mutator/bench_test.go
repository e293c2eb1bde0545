package mutator_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-git/go-git/v5"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gen"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/mutator"
)

// BenchmarkSet is a change to the 2,000-config generated repo (the
// compiler's benchmark repo, repacked as a clone is): origin found, literal
// edited, affected configs recompiled, committed on main with the work tree
// following. one: one value of one config (issue 35: ≤ 1 s median); bulk:
// one value in each of 300 configs, one commit (≤ 5 s). Each operation
// changes the value again, on top of the one before. BENCHMARKS.md has the
// numbers.
func BenchmarkSet(b *testing.B) {
	const n = 2000
	o := gen.Options{Configs: n, Seed: 7}
	r := gittest.New(b)
	if err := gen.Repo(o).Write(r.Dir); err != nil {
		b.Fatal(err)
	}
	r.Commit("base")
	if err := r.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		b.Fatal(err)
	}
	m := mutator.New(r.Dir, mutator.Options{})
	ctx := context.Background()
	run := func(b *testing.B, cfgs []cuecast.ConfigPath, path string) {
		i := 0
		for b.Loop() {
			i++
			_, err := m.Set(ctx, mutator.Request{
				Configs: cfgs, Set: []mutator.Assignment{{Path: path, Value: fmt.Sprintf("%q", fmt.Sprintf("bench-%d", i))}},
				Reason: "benchmark", Identity: alice, Mode: mutator.ModeCommit,
			})
			if err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run(fmt.Sprintf("configs=%d/one", n), func(b *testing.B) {
		run(b, []cuecast.ConfigPath{cuecast.ConfigPath(gen.ConfigPath(o, n/2))}, "settings.key_0")
	})
	b.Run(fmt.Sprintf("configs=%d/bulk=300", n), func(b *testing.B) {
		var cfgs []cuecast.ConfigPath
		for i := range 300 {
			cfgs = append(cfgs, cuecast.ConfigPath(gen.ConfigPath(o, i*n/300)))
		}
		run(b, cfgs, "settings.key_1")
	})
}
