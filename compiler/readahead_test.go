package compiler_test

import (
	"context"
	"path"
	"slices"
	"testing"

	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gen"
)

// TestPlanReadsAheadInParallel plans a repo large enough for the compiler
// to read the configs' directories on several goroutines (readAhead), with
// files the file lints reject in config and namespace directories, and
// holds the result to a plan that reads them one at a time: the same
// configs, errors in the same order, and the same answer from the index
// for every file of the repo.
func TestPlanReadsAheadInParallel(t *testing.T) {
	o := gen.Options{Configs: 300, Seed: 5}
	files := gen.Repo(o)
	for _, i := range []int{4, 150, 299} {
		files[gen.ConfigPath(o, i)+"/bad.cue"] = []byte("package x\n\nname: \"\xff\"\n")
	}
	ns := path.Dir(gen.ConfigPath(o, 10))
	files[ns+"/shared.cue"] = []byte("package x\n\nowner: \"\xfe\"\n")
	plan := func(workers int) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: files.MapFS(), Workers: workers, PlanOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	serial := plan(1)
	if len(serial.Configs) != 300 || len(serial.Errors) != 4 {
		t.Fatalf("serial plan: %d configs, %d errors; want 300 and 4: %v", len(serial.Configs), len(serial.Errors), serial.Errors)
	}
	for _, workers := range []int{2, 4} {
		par := plan(workers)
		if !slices.Equal(par.Configs, serial.Configs) {
			t.Errorf("workers=%d: configs differ", workers)
		}
		if !slices.Equal(par.Errors, serial.Errors) {
			t.Errorf("workers=%d: errors\n%v\nwant\n%v", workers, par.Errors, serial.Errors)
		}
		for _, f := range files.Paths() {
			if got, want := par.Index.Affected([]string{f}), serial.Index.Affected([]string{f}); !slices.Equal(got, want) {
				t.Errorf("workers=%d: %s affects %v, want %v", workers, f, got, want)
			}
		}
	}
}
