package bindings_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/bindings"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// example is configs-example compiled, and its namespaces' schemas.
type example struct {
	schemas map[string]compiler.Schema
	// outputs are every compiled config (variant indexes left out: a
	// client reads those to pick its variant, never as a config), by
	// namespace, in path order.
	outputs map[string][]output
}

type output struct {
	path cuecast.ConfigPath
	json []byte
}

func loadExample(t *testing.T) *example {
	t.Helper()
	ctx := context.Background()
	const repo = "../configs-example"
	s, errs, err := compiler.Schemas(ctx, repo, compiler.Options{})
	if err != nil || len(errs) > 0 {
		t.Fatalf("schemas of %s: %v %v", repo, err, errs)
	}
	res, err := compiler.Compile(ctx, repo, compiler.Options{})
	if err != nil || !res.OK() {
		t.Fatalf("compile %s: %v %v", repo, err, res.Errors)
	}
	ex := &example{schemas: s, outputs: make(map[string][]output)}
	paths := make([]cuecast.ConfigPath, 0, len(res.Outputs))
	for p := range res.Outputs {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		b := res.Outputs[p].JSON
		if _, ok := cuecast.ParseVariantIndex(b); ok {
			continue
		}
		ex.outputs[p.Namespace()] = append(ex.outputs[p.Namespace()], output{path: p, json: b})
	}
	for _, ns := range []string{"payments", "search", "growth"} {
		if len(ex.outputs[ns]) == 0 || ex.schemas[ns].Ref == "" {
			t.Fatalf("configs-example has no outputs or no schema for namespace %s; the tests below would check nothing", ns)
		}
	}
	return ex
}

// generated is each language's bindings of each namespace, by the path
// of its golden file under testdata/.
func generated(t *testing.T, ex *example) map[string][]byte {
	t.Helper()
	out := make(map[string][]byte)
	for ns, s := range ex.schemas {
		g, err := bindings.Go(ns, s.Ref, s.Value, bindings.GoOptions{})
		if err != nil {
			t.Fatalf("Go bindings of %s: %v", ns, err)
		}
		out[filepath.Join("go", ns, ns+".go")] = g
		ts, err := bindings.TypeScript(ns, s.Ref, s.Value)
		if err != nil {
			t.Fatalf("TypeScript bindings of %s: %v", ns, err)
		}
		out[filepath.Join("ts", ns+".ts")] = ts
		js, err := bindings.JSONSchema(s.Value)
		if err != nil {
			t.Fatalf("JSON Schema of %s: %v", ns, err)
		}
		out[filepath.Join("jsonschema", ns+".schema.json")] = js
	}
	return out
}

// TestGolden compares the bindings of configs-example's namespaces with
// testdata/. The Go ones there are packages that TestGoDecodes imports, so
// they are also what proves the generated Go compiles and vets.
func TestGolden(t *testing.T) {
	t.Parallel()
	ex := loadExample(t)
	for name, got := range generated(t, ex) {
		golden.Check(t, filepath.Join("testdata", name), got, *update)
	}
}

// sameJSON reports whether a and b hold the same JSON value.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	var va, vb any
	if err := json.Unmarshal(a, &va); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &vb); err != nil {
		t.Fatal(err)
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}
