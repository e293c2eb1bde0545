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
		r, base, head := editedRepo(b, gen.Options{Configs: n, Seed: 7}, 1)
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

// BenchmarkCheckExplain is the PR check of a commit that edits eight
// configs of a generated repo, as the pull request comment runs it: with
// the origins of the changed values (explain), and without (plain), so
// the difference is what explaining costs. BENCHMARKS.md, section
// Compiler, has the numbers.
func BenchmarkCheckExplain(b *testing.B) {
	const n, edited = 2000, 8
	r, base, head := editedRepo(b, gen.Options{Configs: n, Seed: 7}, edited)
	if err := r.Git.RepackObjects(&git.RepackConfig{}); err != nil {
		b.Fatal(err)
	}
	for _, explain := range []bool{false, true} {
		name := "plain"
		if explain {
			name = "explain"
		}
		b.Run(fmt.Sprintf("configs=%d/edited=%d/%s", n, edited, name), func(b *testing.B) {
			b.ReportAllocs()
			cputime.PerOp(b, func() {
				rep, err := ci.Check(context.Background(), r.Dir, ci.Options{Base: base, Head: head, Explain: explain})
				if err != nil {
					b.Fatal(err)
				}
				if len(rep.Configs) != edited {
					b.Fatalf("check reports %d configs, want %d", len(rep.Configs), edited)
				}
				if explain && len(rep.Origins) == 0 {
					b.Fatal("no origins explained")
				}
			})
		})
	}
}

// editedRepo commits a repo generated with o (base), then a commit that
// adds a field to the config.cue of edited configs from the middle of it
// on, seven configs apart (head).
func editedRepo(b *testing.B, o gen.Options, edited int) (r *gittest.Repo, base, head string) {
	b.Helper()
	r = gittest.New(b)
	files := gen.Repo(o)
	if err := files.Write(r.Dir); err != nil {
		b.Fatal(err)
	}
	base = r.Commit("base")
	edits := make(map[string]string, edited)
	for k := range edited {
		p := gen.ConfigPath(o, o.Configs/2+k*7) + "/config.cue"
		edits[p] = string(files[p]) + "extra_setting: 1\n"
	}
	r.Write(edits)
	return r, base, r.Commit(fmt.Sprintf("edit %d configs", edited))
}
