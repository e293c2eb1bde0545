package bindings_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/jsonschema"

	"github.com/cuecast/cuecast/bindings"
	"github.com/cuecast/cuecast/bindings/testdata/go/growth"
	"github.com/cuecast/cuecast/bindings/testdata/go/payments"
	"github.com/cuecast/cuecast/bindings/testdata/go/search"
	"github.com/cuecast/cuecast/client"
)

// mutation makes an output of a namespace invalid: each checker below
// must refuse it.
type mutation struct {
	desc  string
	apply func(m map[string]any)
}

// mutations are, per namespace, changes that break the schema in a way
// each language's bindings can see: a value outside an enumeration
// (payments), a value of the wrong type (search), a field a closed struct
// does not have (growth).
var mutations = map[string]mutation{
	"payments": {"env outside #Env", func(m map[string]any) { m["env"] = "production" }},
	"search":   {"owner a number", func(m map[string]any) { m["owner"] = 42 }},
	"growth": {"a field #Flag does not have", func(m map[string]any) {
		for _, f := range m["flags"].(map[string]any) {
			f.(map[string]any)["colour"] = "red"
			return
		}
	}},
}

func mutate(t *testing.T, ns string, b []byte) []byte {
	return mutateWith(t, mutations[ns], b)
}

func mutateWith(t *testing.T, mu mutation, b []byte) []byte {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	mu.apply(m)
	out, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeStrict decodes a namespace's config into its generated Go type the
// way client.StrictDecoding does, and encodes it back.
var decodeStrict = map[string]func([]byte) ([]byte, error){
	"payments": roundTrip[payments.Payments],
	"search":   roundTrip[search.Search],
	"growth":   roundTrip[growth.FlagSet],
}

func roundTrip[T any](b []byte) ([]byte, error) {
	v, err := client.DecodeStrict[T](b)
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

// TestGoDecodes: every output of each namespace decodes strictly into the
// generated type and encodes back to the same JSON, so no field was left
// out or mistyped; growth's mutated output (a field a closed struct does
// not have) is refused. The Watch helpers are the generated packages'
// only other code, and compile with them.
func TestGoDecodes(t *testing.T) {
	t.Parallel()
	ex := loadExample(t)
	for ns, outs := range ex.outputs {
		dec := decodeStrict[ns]
		for _, o := range outs {
			back, err := dec(o.json)
			if err != nil {
				t.Errorf("%s: %v", o.path, err)
				continue
			}
			if !sameJSON(t, o.json, back) {
				t.Errorf("%s: decoded and encoded again it is\n%s\nwant\n%s", o.path, back, o.json)
			}
		}
	}
	bad := mutate(t, "growth", ex.outputs["growth"][0].json)
	if _, err := decodeStrict["growth"](bad); err == nil || !strings.Contains(err.Error(), "colour") {
		t.Errorf("growth with %s decoded: err = %v, want the unknown field named", mutations["growth"].desc, err)
	}
	if _, err := decodeStrict["search"](mutate(t, "search", ex.outputs["search"][0].json)); err == nil {
		t.Errorf("search with %s decoded", mutations["search"].desc)
	}
}

// TestJSONSchemaValidates validates every output against its namespace's
// generated JSON Schema with CUE's JSON Schema decoder (the schema becomes
// CUE and the real evaluator checks the JSON), and each namespace's
// mutated output against it: refused. growth's mutation is inside a flag,
// which cuecast's own schema of a flag closes (TestJSONSchemaFlagIsClosed).
func TestJSONSchemaValidates(t *testing.T) {
	t.Parallel()
	ex := loadExample(t)
	for ns, outs := range ex.outputs {
		validate := jsonSchemaValidator(t, ns, ex.schemas[ns].Value)
		for _, o := range outs {
			if err := validate(o.json); err != nil {
				t.Errorf("%s does not validate against its JSON Schema: %v", o.path, err)
			}
		}
		if err := validate(mutate(t, ns, outs[0].json)); err == nil {
			t.Errorf("%s with %s validates against its JSON Schema", outs[0].path, mutations[ns].desc)
		}
	}
}

// jsonSchemaValidator generates schema's JSON Schema and returns a check
// of a JSON document against it with CUE's JSON Schema decoder.
func jsonSchemaValidator(t *testing.T, ns string, schema cue.Value) func([]byte) error {
	t.Helper()
	js, err := bindings.JSONSchema(schema)
	if err != nil {
		t.Fatal(err)
	}
	ctx := cuecontext.New()
	f, err := jsonschema.Extract(ctx.CompileBytes(js, cue.Filename(ns+".schema.json")), &jsonschema.Config{})
	if err != nil {
		t.Fatalf("%s: read the JSON Schema back: %v", ns, err)
	}
	sv := ctx.BuildFile(f)
	if err := sv.Err(); err != nil {
		t.Fatalf("%s: JSON Schema as CUE: %v", ns, err)
	}
	return func(b []byte) error {
		return sv.Unify(ctx.CompileBytes(b)).Validate(cue.Concrete(true))
	}
}

// TestTypeScriptTypeChecks type-checks, with tsc from npm (the version
// pinned in testdata/tsc), every output assigned to its namespace's
// generated type, and each mutated output under @ts-expect-error, which
// tsc refuses unless the assignment is an error. One tsc run checks all.
func TestTypeScriptTypeChecks(t *testing.T) {
	t.Parallel()
	tsc := installTSC(t)
	ex := loadExample(t)
	dir := t.TempDir()
	var files []string
	for ns, outs := range ex.outputs {
		ts, err := bindings.TypeScript(ns, ex.schemas[ns].Ref, ex.schemas[ns].Value)
		if err != nil {
			t.Fatal(err)
		}
		root := rootType(t, ns)
		var sb strings.Builder
		sb.Write(ts)
		for i, o := range outs {
			fmt.Fprintf(&sb, "\n// %s\nexport const config%d: %s = %s;\n", o.path, i, root, o.json)
		}
		fmt.Fprintf(&sb, "\n// %s with %s\n// @ts-expect-error\nexport const mutated: %s = %s;\n",
			outs[0].path, mutations[ns].desc, root, mutate(t, ns, outs[0].json))
		file := filepath.Join(dir, ns+".ts")
		if err := os.WriteFile(file, []byte(sb.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, file)
	}
	cmd := exec.Command(tsc, append([]string{"--noEmit", "--strict", "--target", "es2022", "--lib", "es2022", "--skipLibCheck", "--pretty", "false"}, files...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tsc: %v\n%s", err, out)
	}
}

func rootType(t *testing.T, ns string) string {
	t.Helper()
	switch ns {
	case "payments":
		return "Payments"
	case "search":
		return "Search"
	case "growth":
		return "FlagSet"
	}
	t.Fatalf("no root type known for namespace %s", ns)
	return ""
}

// installTSC installs testdata/tsc's locked TypeScript with npm ci into
// the user's cache, once per lock file, and returns its tsc. It skips the
// test when node or npm is absent.
func installTSC(t *testing.T) string {
	t.Helper()
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("TypeScript bindings not type-checked: %s is not installed (CI has it)", tool)
		}
	}
	lock, err := os.ReadFile(filepath.Join("testdata", "tsc", "package-lock.json"))
	if err != nil {
		t.Fatal(err)
	}
	pkg, err := os.ReadFile(filepath.Join("testdata", "tsc", "package.json"))
	if err != nil {
		t.Fatal(err)
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(append(pkg, lock...))
	dir := filepath.Join(cache, "cuecast", "tsc-"+hex.EncodeToString(sum[:6]))
	tsc := filepath.Join(dir, "node_modules", ".bin", "tsc")
	if _, err := os.Stat(tsc); err == nil {
		return tsc
	}
	// Install beside it and rename into place, so that two test runs at
	// once never see a half-installed tree.
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "tsc-install-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(tmp)
	for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(tmp, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.CommandContext(context.Background(), "npm", "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = tmp
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("npm ci in %s: %v\n%s", tmp, err, out)
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, statErr := os.Stat(tsc); statErr != nil {
			t.Fatalf("install tsc: %v", err)
		}
	}
	return tsc
}
