package ci_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/compiler/gen"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/gittest"
)

// TestCheckPlansWhatFullPlansDo: on random changes to generated repos, the
// configs a check compiles and reports are exactly those that full plans
// of both revisions (every file read and indexed) say the changed files
// affect, however the check arrives at them.
func TestCheckPlansWhatFullPlansDo(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 42))
			o := gen.Options{Configs: 24, Namespaces: 3, Libraries: 4, Seed: seed}
			files := gen.Repo(o)
			r := gittest.New(t)
			// The base already has some extra imports, so a change can
			// remove a dependency as well as add one.
			extra := map[string]string{}
			for range 4 {
				name, content := randomImport(rnd, o)
				extra[name] = content
			}
			if err := files.Write(r.Dir); err != nil {
				t.Fatal(err)
			}
			r.Write(extra)
			base := r.Commit("base")
			for round := range 4 {
				randomChange(t, rnd, r, o, files, extra)
				head := r.Commit(fmt.Sprintf("change %d", round))
				want := fullPlanAffected(t, r, base, head)
				rep, err := ci.Check(context.Background(), r.Dir, ci.Options{Base: base, Head: head, Workers: 2})
				if err != nil {
					t.Fatal(err)
				}
				var got []cuecast.ConfigPath
				for _, cc := range rep.Configs {
					got = append(got, cc.Config)
					if cc.From != "" {
						got = append(got, cc.From)
					}
				}
				slices.Sort(got)
				if !slices.Equal(got, want) {
					t.Fatalf("round %d, changed %v:\n check reports %v\nfull plans say %v", round, rep.ChangedFiles, got, want)
				}
				t.Logf("round %d: %d changed files, %d configs", round, len(rep.ChangedFiles), len(got))
				base = head
			}
		})
	}
}

// fullPlanAffected plans both revisions in full and returns the configs,
// present at either, that the changed files affect by either's index.
func fullPlanAffected(t *testing.T, r *gittest.Repo, base, head string) []cuecast.ConfigPath {
	t.Helper()
	var out, present []cuecast.ConfigPath
	var trees []string
	for _, rev := range []string{base, head} {
		c, err := r.Git.CommitObject(plumbing.NewHash(rev))
		if err != nil {
			t.Fatal(err)
		}
		trees = append(trees, c.TreeHash.String())
	}
	changed, err := gitfs.Diff(r.Git.Storer, nil, plumbing.NewHash(trees[0]), plumbing.NewHash(trees[1]))
	if err != nil {
		t.Fatal(err)
	}
	for _, rev := range []string{base, head} {
		fsys, err := gitfs.Commit(r.Git, rev)
		if err != nil {
			t.Fatal(err)
		}
		res, err := compiler.Compile(context.Background(), r.Dir, compiler.Options{FS: fsys, PlanOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.Index.Affected(changed)...)
		present = append(present, res.Configs...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	return slices.DeleteFunc(out, func(cp cuecast.ConfigPath) bool { return !slices.Contains(present, cp) })
}

// randomImport is a new file in a random config or library directory that
// imports a random shared library.
func randomImport(rnd *rand.Rand, o gen.Options) (string, string) {
	lib := gen.Lib(rnd.IntN(o.Libraries))
	imp := fmt.Sprintf("import %q\n\n", gen.Module+"/lib/"+lib)
	n := rnd.IntN(1000)
	if rnd.IntN(2) == 0 {
		i := rnd.IntN(o.Configs)
		return fmt.Sprintf("%s/extra%d.cue", gen.ConfigPath(o, i), n),
			fmt.Sprintf("package svc%d\n\n%sextra_%d: %s.Limits.cpu_millis\n", i, imp, n, lib)
	}
	l := gen.Lib(rnd.IntN(o.Libraries))
	if l == lib {
		return fmt.Sprintf("lib/%s/extra%d.cue", l, n), fmt.Sprintf("package %s\n\nExtra%d: 1\n", l, n)
	}
	return fmt.Sprintf("lib/%s/extra%d.cue", l, n), fmt.Sprintf("package %s\n\n%sExtra%d: %s.Limits\n", l, imp, n, lib)
}

// randomChange makes one to three random edits in the work tree: a config
// or library edited, a dependency added or removed, a data file added, a
// config added or deleted.
func randomChange(t *testing.T, rnd *rand.Rand, r *gittest.Repo, o gen.Options, files gen.Files, extra map[string]string) {
	t.Helper()
	for range 1 + rnd.IntN(3) {
		switch rnd.IntN(7) {
		case 0: // edit a config
			p := gen.ConfigPath(o, rnd.IntN(o.Configs)) + "/config.cue"
			if _, ok := files[p]; ok {
				files[p] = append(slices.Clip(files[p]), fmt.Sprintf("edited_%d: 1\n", rnd.IntN(1000))...)
				r.Write(map[string]string{p: string(files[p])})
			}
		case 1: // edit a library
			l := gen.Lib(rnd.IntN(o.Libraries))
			p := fmt.Sprintf("lib/%s/%s.cue", l, l)
			files[p] = append(slices.Clip(files[p]), fmt.Sprintf("Edited%d: 1\n", rnd.IntN(1000))...)
			r.Write(map[string]string{p: string(files[p])})
		case 2: // add a dependency
			name, content := randomImport(rnd, o)
			extra[name] = content
			r.Write(map[string]string{name: content})
		case 3: // remove one
			for _, name := range sortedNames(extra) {
				delete(extra, name)
				r.Remove(name)
				break
			}
		case 4: // a data file next to a config or a library
			dir := gen.ConfigPath(o, rnd.IntN(o.Configs))
			if rnd.IntN(2) == 0 {
				dir = "lib/" + gen.Lib(rnd.IntN(o.Libraries))
			}
			r.Write(map[string]string{fmt.Sprintf("%s/data%d.json", dir, rnd.IntN(1000)): "{}\n"})
		case 5: // a new config, a copy of another under a new name
			i := rnd.IntN(o.Configs)
			src := string(files[gen.ConfigPath(o, i)+"/config.cue"])
			if src == "" {
				continue
			}
			n := rnd.IntN(1000)
			dir := fmt.Sprintf("%s/new%d", gen.NS(i%o.Namespaces), n)
			src = strings.Replace(src, fmt.Sprintf("package svc%d", i), fmt.Sprintf("package new%d", n), 1)
			src = strings.Replace(src, fmt.Sprintf("%q", fmt.Sprintf("svc-%d", i)), fmt.Sprintf("%q", fmt.Sprintf("new-%d", n)), 1)
			r.Write(map[string]string{dir + "/config.cue": src})
		case 6: // delete a config
			i := rnd.IntN(o.Configs)
			r.Remove(gen.ConfigPath(o, i))
			delete(files, gen.ConfigPath(o, i)+"/config.cue")
			for name := range extra {
				if strings.HasPrefix(name, gen.ConfigPath(o, i)+"/") {
					delete(extra, name)
				}
			}
		}
	}
}

func sortedNames(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
