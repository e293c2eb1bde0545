package compiler_test

import (
	"context"
	"testing"

	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gen"
)

// TestGeneratedRepoCompiles keeps the generator honest: the repos the
// benchmarks and property tests use must be valid.
func TestGeneratedRepoCompiles(t *testing.T) {
	o := gen.Options{Configs: 40, Seed: 1}
	files := gen.Repo(o)
	res, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: files.MapFS(), Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("%v", e)
	}
	if got, want := len(res.Outputs), o.Configs; got != want {
		t.Fatalf("got %d outputs, want %d", got, want)
	}
	lib := res.Index.Affected([]string{"lib/l3/l3.cue"})
	if got, want := len(lib), o.Configs/10; got != want {
		t.Errorf("lib/l3 affects %d configs, want %d: %v", got, want, lib)
	}
	if got := res.Index.Affected([]string{"lib/base/base.cue"}); len(got) != o.Configs {
		t.Errorf("lib/base affects %d configs, want all %d", len(got), o.Configs)
	}
}
