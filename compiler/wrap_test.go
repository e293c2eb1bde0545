package compiler_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"testing/fstest"

	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gen"
)

// The compiler applies a namespace schema by evaluating a wrapper package,
// "schema.#Def & config" (one evaluation), rather than unifying the
// evaluated config with the definition (two). These tests hold the two to
// the same outputs and the same failing configs. Error positions may differ:
// the wrapper reports a library error where the config uses the value.

func sameOutcome(a, b *compiler.Result) error {
	if !slices.Equal(a.Configs, b.Configs) {
		return fmt.Errorf("configs %v vs %v", a.Configs, b.Configs)
	}
	for _, cp := range a.Configs {
		oa, okA := a.Outputs[cp]
		ob, okB := b.Outputs[cp]
		if okA != okB || !bytes.Equal(oa.JSON, ob.JSON) || !slices.Equal(oa.Files, ob.Files) {
			return fmt.Errorf("%s: output %s (%v) vs %s (%v)\nerrors %v\nvs %v", cp, oa.JSON, okA, ob.JSON, okB, a.Errors, b.Errors)
		}
	}
	ids := func(r *compiler.Result) []string {
		var out []string
		for _, e := range r.Errors {
			out = append(out, string(e.Config)+" "+e.ID)
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	if ia, ib := ids(a), ids(b); !slices.Equal(ia, ib) {
		return fmt.Errorf("error kinds %v vs %v\n(%v\nvs\n%v)", ia, ib, a.Errors, b.Errors)
	}
	return nil
}

func compileBoth(t testing.TB, fsys fstest.MapFS, opts compiler.Options) error {
	opts.FS = fsys
	a, err := compiler.Compile(context.Background(), "diff", opts)
	if err != nil {
		t.Fatal(err)
	}
	b, err := compiler.CompileUnify(context.Background(), "diff", opts)
	if err != nil {
		t.Fatal(err)
	}
	return sameOutcome(a, b)
}

func TestWrapMatchesUnifyGolden(t *testing.T) {
	ents, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join("testdata", e.Name(), "repo.txtar")); err != nil {
			continue
		}
		fsys, opts := loadCase(t, filepath.Join("testdata", e.Name()))
		if err := compileBoth(t, fsys, opts); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
}

func TestWrapMatchesUnifyGenerated(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	es := edits()
	n := 12
	if raceEnabled {
		n = 3
	}
	for it := range n {
		o := gen.Options{Configs: 12, Namespaces: 3, Libraries: 4, Seed: uint64(it)}
		files := gen.Repo(o)
		for range 1 + r.IntN(3) {
			es[r.IntN(len(es))].apply(files, r, o)
		}
		if err := compileBoth(t, files.MapFS(), compiler.Options{}); err != nil {
			t.Errorf("iteration %d: %v", it, err)
		}
	}
}

// schemaRepo is a repo whose namespace app has the definition #S from the
// given schema source and one config with the given source.
func schemaRepo(schema, config string) fstest.MapFS {
	return fstest.MapFS{
		"cue.mod/module.cue":  {Data: []byte("module: \"test.example/repo\"\nlanguage: version: \"v0.17.0\"\n")},
		"cuecast.cue":         {Data: []byte("package manifest\n\nnamespaces: app: {\n\towners: [\"t\"]\n\tschema: \"test.example/repo/schemas#S\"\n}\n")},
		"schemas/schemas.cue": {Data: []byte("package schemas\n\n" + schema)},
		"app/cfg/cfg.cue":     {Data: []byte("package cfg\n\n" + config)},
	}
}

var schemaPairs = []struct{ name, schema, config string }{
	{"closed ok", `#S: {a: int, b?: string}`, `a: 1`},
	{"closed extra", `#S: {a: int}`, `a: 1, c: 2`},
	{"nested extra", `#S: {a: {x: int}}`, `a: {x: 1, y: 2}`},
	{"nested optional extra", `#S: {a?: {x: int}}`, `a: {x: 1, y: 2}`},
	{"deep extra", `#S: {a: b: c: {d: int}}`, `a: b: c: {d: 1, e: 2}`},
	{"list of closed", `#S: {l: [...{n: int}]}`, `l: [{n: 1}, {n: 2, m: 3}]`},
	{"fixed list", `#S: {l: [{n: int}, {m: int}]}`, `l: [{n: 1}, {m: 2, k: 3}]`},
	{"pattern values closed", `#S: {[string]: {v: int}}`, `a: {v: 1}, b: {v: 2, w: 3}`},
	{"regexp pattern", `#S: {[=~"^x_"]: int}`, `x_a: 1, y: 2`},
	{"open def", `#S: {a: int, ...}`, `a: 1, b: {c: 2}`},
	{"open nested", `#S: {a: {x: int, ...}}`, `a: {x: 1, y: 2}`},
	{"def of defs", `#T: {x: int}` + "\n" + `#S: {t: #T}`, `t: {x: 1, z: 1}`},
	{"embedded def", `#T: {x: int}` + "\n" + `#S: {#T, y: int}`, `x: 1, y: 2, z: 3`},
	{"disjunction of structs ok", `#S: {k: {a: int} | {b: int}}`, `k: {b: 1}`},
	{"disjunction of structs extra", `#S: {k: {a: int} | {b: int}}`, `k: {b: 1, c: 2}`},
	{"top disjunction", `#S: {a: int} | {b: int}`, `b: 1`},
	{"top disjunction extra", `#S: {a: int} | {b: int}`, `b: 1, c: 2`},
	{"default value", `#S: {a: *3 | int, b: int}`, `b: 1`},
	{"default struct", `#S: {a: *{x: 1} | {y: int}}`, `a: {x: 1}`},
	{"hidden and definitions in config", `#S: {a: int}`, `a: 1, _h: 2, #D: {z: 1}`},
	{"hidden used by a field", `#S: {a: int, b: int}`, `_h: 2` + "\n" + `a: _h, b: _h * 2`},
	{"let and comprehension", `#S: {a: int, [=~"^gen_"]: int}`, `let n = 3` + "\n" + `a: n` + "\n" + `for i in [1, 2] {"gen_\(i)": i}`},
	{"comprehension extra", `#S: {a: int}`, `a: 1` + "\n" + `for i in [1] {"x\(i)": i}`},
	{"config embeds the def", `#S: {a: int}`, `import "test.example/repo/schemas"` + "\n" + `schemas.#S` + "\n" + `a: 1, b: 2`},
	{"config refers to a default", `#S: {a: *3 | int, b: int}`, `b: a + 1`},
	{"list config", `#S: {a: int}`, `[1, 2]`},
	{"scalar def", `#S: int`, `a: 1`},
	{"close builtin", `#S: {a: close({x: int})}`, `a: {x: 1, y: 2}`},
	{"struct with pattern and fields", `#S: {a: int, [string]: string}`, `a: 1, b: "x", c: 2`},
	{"optional typo", `#S: {timeout?: string}`, `timout: "1s"`},
	{"bytes and null", `#S: {b: bytes, n: null}`, `b: 'hi', n: null`},
	{"list pattern closed elements", `#S: {l: [...#E]}` + "\n" + `#E: {n: int}`, `l: [{n: 1, x: 2}]`},
	{"nested list of lists", `#S: {m: [...[...{v: int}]]}`, `m: [[{v: 1}], [{v: 2, w: 3}]]`},
	{"incomplete", `#S: {a: int}`, `a: int`},
	{"secret opt-out attribute", `#S: {token: string}`, `token: "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789" @cuecast(allow="secret/github-token", reason="fixture")`},
	{"secret", `#S: {token: string}`, `token: "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"`},
	{"self reference", `#S: {a: int, b: int}`, `a: 1, b: a`},
	{"structural cycle", `#S: {a: _}`, `a: {b: a}`},
}

func TestWrapMatchesUnifyPairs(t *testing.T) {
	for _, p := range schemaPairs {
		t.Run(p.name, func(t *testing.T) {
			if err := compileBoth(t, schemaRepo(p.schema, p.config), compiler.Options{}); err != nil {
				t.Error(err)
			}
		})
	}
}

// FuzzSchemaEnforcement: for any schema and config text, the wrapper and
// Value.Unify agree.
func FuzzSchemaEnforcement(f *testing.F) {
	for _, p := range schemaPairs {
		f.Add(p.schema, p.config)
	}
	f.Fuzz(func(t *testing.T, schema, config string) {
		if err := compileBoth(t, schemaRepo(schema, config), compiler.Options{}); err != nil {
			t.Error(err)
		}
	})
}
