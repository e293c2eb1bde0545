package bindings_test

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/jsonschema"

	"github.com/cuecast/cuecast/bindings"
	"github.com/cuecast/cuecast/flags"
)

// flagOf is the flag key of a growth output decoded as m.
func flagOf(m map[string]any, key string) map[string]any {
	return m["flags"].(map[string]any)[key].(map[string]any)
}

func ruleOf(m map[string]any, key string) map[string]any {
	return flagOf(m, key)["rules"].([]any)[0].(map[string]any)
}

func clauseOf(m map[string]any, key string) map[string]any {
	return ruleOf(m, key)["clauses"].([]any)[0].(map[string]any)
}

func weightOf(m map[string]any) map[string]any {
	ft := flagOf(m, "new-checkout")["fallthrough"].(map[string]any)
	return ft["rollout"].(map[string]any)["weights"].([]any)[0].(map[string]any)
}

// flagMutations break one flag of configs-example's growth output (its
// flags new-checkout, a bool with a staff rule and a rollout, and
// results-per-page, an int) in each way the flag format (schemas/flags.cue
// and flags.Validate) refuses and a JSON Schema can say.
var flagMutations = []mutation{
	mutations["growth"],
	{"a bool flag's variant a string", func(m map[string]any) { flagOf(m, "new-checkout")["variants"].(map[string]any)["on"] = "yes" }},
	{"an int flag's variant not integral", func(m map[string]any) { flagOf(m, "results-per-page")["variants"].(map[string]any)["few"] = 10.5 }},
	{"an int flag's variant an object", func(m map[string]any) {
		flagOf(m, "results-per-page")["variants"].(map[string]any)["few"] = map[string]any{"n": 10}
	}},
	{"an unknown type", func(m map[string]any) { flagOf(m, "new-checkout")["type"] = "enum" }},
	{"no type", func(m map[string]any) { delete(flagOf(m, "new-checkout"), "type") }},
	{"no offVariant", func(m map[string]any) { delete(flagOf(m, "new-checkout"), "offVariant") }},
	{"on a string", func(m map[string]any) { flagOf(m, "new-checkout")["on"] = "true" }},
	{"an empty salt", func(m map[string]any) { flagOf(m, "new-checkout")["salt"] = "" }},
	{"a rule without clauses", func(m map[string]any) { ruleOf(m, "new-checkout")["clauses"] = []any{} }},
	{"a rule serving nothing", func(m map[string]any) { delete(ruleOf(m, "new-checkout"), "variant") }},
	{"a rule serving a variant and a rollout", func(m map[string]any) {
		ruleOf(m, "new-checkout")["rollout"] = map[string]any{"weights": []any{map[string]any{"variant": "on", "weight": 100000}}}
	}},
	{"a field #FlagRule does not have", func(m map[string]any) { ruleOf(m, "new-checkout")["colour"] = "red" }},
	{"a clause without values", func(m map[string]any) { clauseOf(m, "new-checkout")["values"] = []any{} }},
	{"an unknown operator", func(m map[string]any) { clauseOf(m, "new-checkout")["op"] = "matches" }},
	{"endsWith with a number", func(m map[string]any) { clauseOf(m, "new-checkout")["values"] = []any{42} }},
	{"in with an object", func(m map[string]any) { clauseOf(m, "results-per-page")["values"] = []any{map[string]any{}} }},
	{"lt with a string", func(m map[string]any) {
		c := clauseOf(m, "new-checkout")
		c["op"], c["values"] = "lt", []any{"10"}
	}},
	{"semverGt with a value that is no version", func(m map[string]any) {
		c := clauseOf(m, "new-checkout")
		c["op"], c["values"] = "semverGt", []any{"1.2"}
	}},
	{"a clause with an empty attribute", func(m map[string]any) { clauseOf(m, "new-checkout")["attribute"] = "" }},
	{"a field #FlagClause does not have", func(m map[string]any) { clauseOf(m, "new-checkout")["colour"] = "red" }},
	{"a weight above 100000", func(m map[string]any) { weightOf(m)["weight"] = 100001 }},
	{"a negative weight", func(m map[string]any) { weightOf(m)["weight"] = -1 }},
	{"a weight not integral", func(m map[string]any) { weightOf(m)["weight"] = 20000.5 }},
	{"a weight without a variant", func(m map[string]any) { delete(weightOf(m), "variant") }},
	{"a fallthrough serving a variant and a rollout", func(m map[string]any) {
		flagOf(m, "new-checkout")["fallthrough"].(map[string]any)["variant"] = "on"
	}},
	{"a fallthrough serving nothing", func(m map[string]any) { flagOf(m, "new-checkout")["fallthrough"] = map[string]any{} }},
	{"a rollout without weights", func(m map[string]any) {
		flagOf(m, "new-checkout")["fallthrough"] = map[string]any{"rollout": map[string]any{"bucketBy": "id"}}
	}},
	{"a prerequisite without a variant", func(m map[string]any) {
		flagOf(m, "results-per-page")["prerequisites"] = []any{map[string]any{"flag": "new-checkout"}}
	}},
}

// TestJSONSchemaFlagIsClosed: growth's JSON Schema (a flag set's) holds
// cuecast's schema of a flag in place of the encoder's true: each flag
// mutation, which the format refuses (CUE's #FlagSet or flags.Compile),
// its JSON Schema refuses too. #Flag on its own is still incomplete, which
// is why the encoder cannot write it (docs/GETTING-STARTED.md, "Typed
// bindings").
func TestJSONSchemaFlagIsClosed(t *testing.T) {
	t.Parallel()
	ex := loadExample(t)
	inst, path := growthFlagRef(t, ex)
	flag := inst.LookupPath(path)
	if err := flag.Err(); err == nil || !strings.Contains(err.Error(), `unresolved disjunction "bool" | "string"`) {
		t.Errorf("#Flag on its own: err = %v, want it incomplete (its type an unresolved disjunction)", err)
	}
	js, err := bindings.JSONSchema(ex.schemas["growth"].Value)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Defs map[string]map[string]any `json:"$defs"`
	}
	if err := json.Unmarshal(js, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Defs["Flag"]; got["additionalProperties"] != false || got["description"] == nil {
		t.Errorf("growth's $defs.Flag = %v; want #Flag's description and a closed object", got)
	}

	validate := jsonSchemaValidator(t, "growth", ex.schemas["growth"].Value)
	schema := ex.schemas["growth"].Value
	out := ex.outputs["growth"][0].json
	for _, mu := range flagMutations {
		bad := mutateWith(t, mu, out)
		if sameJSON(t, bad, out) {
			t.Errorf("%s changes nothing in %s", mu.desc, ex.outputs["growth"][0].path)
			continue
		}
		cueErr := schema.Unify(cuecontext.New().CompileBytes(bad)).Validate(cue.Concrete(true))
		_, compileErr := flags.Compile(bad)
		if cueErr == nil && compileErr == nil {
			t.Errorf("growth with %s: the flag format accepts it; not a mutation", mu.desc)
		}
		if err := validate(bad); err == nil {
			t.Errorf("growth with %s validates against its JSON Schema", mu.desc)
		}
	}
}

// TestJSONSchemaFlagVectors checks cuecast's schema of a flag against the
// flag sets of the evaluator's vectors (testdata/flags/v1.json), written
// independently of configs-example: every valid set validates; an invalid
// set is refused unless what is wrong is beyond JSON Schema (a reference
// to a variant or flag that does not exist, weights that do not sum to
// 100000, a prerequisite cycle), and then it validates; a set of another
// schema is refused.
func TestJSONSchemaFlagVectors(t *testing.T) {
	t.Parallel()
	ex := loadExample(t)
	validate := jsonSchemaValidator(t, "growth", ex.schemas["growth"].Value)
	b, err := os.ReadFile("../testdata/flags/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var vec struct {
		Sets    map[string]json.RawMessage `json:"sets"`
		Invalid []struct {
			Name string          `json:"name"`
			Set  json.RawMessage `json:"set"`
		} `json:"invalid"`
		Unsupported []struct {
			Name string          `json:"name"`
			Set  json.RawMessage `json:"set"`
		} `json:"unsupported"`
	}
	if err := json.Unmarshal(b, &vec); err != nil {
		t.Fatal(err)
	}
	if len(vec.Sets) == 0 || len(vec.Invalid) == 0 || len(vec.Unsupported) == 0 {
		t.Fatalf("v1.json: %d sets, %d invalid, %d unsupported; the checks below would check nothing", len(vec.Sets), len(vec.Invalid), len(vec.Unsupported))
	}
	for name, set := range vec.Sets {
		if err := validate(set); err != nil {
			t.Errorf("set %s does not validate against growth's JSON Schema: %v", name, err)
		}
	}
	beyond := map[string]bool{
		"weights do not sum":           true,
		"rule weights do not sum":      true,
		"unknown off variant":          true,
		"unknown default variant":      true,
		"unknown rule variant":         true,
		"unknown rollout variant":      true,
		"missing prerequisite flag":    true,
		"missing prerequisite variant": true,
		"self prerequisite":            true,
		"prerequisite cycle":           true,
	}
	for _, c := range vec.Invalid {
		err := validate(c.Set)
		switch {
		case beyond[c.Name] && err != nil:
			t.Errorf("invalid set %q: refused by the JSON Schema (%v), though what is wrong is beyond it", c.Name, err)
		case !beyond[c.Name] && err == nil:
			t.Errorf("invalid set %q validates against the JSON Schema", c.Name)
		}
	}
	for _, c := range vec.Unsupported {
		if err := validate(c.Set); err == nil {
			t.Errorf("unsupported set %q validates against the JSON Schema", c.Name)
		}
	}
}

// TestJSONSchemaOtherFlagShapes: a schema with the flag format's marker
// but a flag of its own shape (not a reference to one definition), and a
// #FlagSet-like schema with another marker, keep the encoder's JSON Schema:
// gen and check do not fail on them, and cuecast's schema of a flag, which
// describes cuecast.flags/v1's #Flag only, is not put in.
func TestJSONSchemaOtherFlagShapes(t *testing.T) {
	t.Parallel()
	ctx := cuecontext.New()
	for name, src := range map[string]string{
		"inline flag":  `#S: {schema: "cuecast.flags/v1", flags: [string]: {on: bool}}`,
		"other marker": `#S: {schema: "cuecast.flags/v2", flags: [string]: #F}, #F: {type: "bool" | "int", if type == "bool" {v: bool}}`,
	} {
		v := ctx.CompileString(src).LookupPath(cue.ParsePath("#S"))
		js, err := bindings.JSONSchema(v)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if strings.Contains(string(js), "FlagRule") {
			t.Errorf("%s: cuecast's schema of a flag put in:\n%s", name, js)
		}
	}
}

// TestFlagSchemaFields: each definition of cuecast's schema of a flag
// names the fields of the CUE definition of the same name in
// schemas/flags.cue, no more and no fewer, so that a field added to the
// format is added to flag.schema.json too.
func TestFlagSchemaFields(t *testing.T) {
	t.Parallel()
	ex := loadExample(t)
	pkg, _ := growthFlagRef(t, ex)
	b, err := os.ReadFile("flag.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	var hand struct {
		Defs map[string]struct {
			Properties map[string]any `json:"properties"`
		} `json:"$defs"`
	}
	if err := json.Unmarshal(b, &hand); err != nil {
		t.Fatal(err)
	}
	for _, def := range []string{"Flag", "FlagRule", "FlagServe", "FlagRollout", "FlagPrerequisite", "FlagClause"} {
		v := pkg.LookupPath(cue.ParsePath("#" + def))
		if !v.Exists() {
			t.Errorf("schemas has no #%s", def)
			continue
		}
		it, err := v.Fields(cue.Optional(true))
		if err != nil {
			t.Errorf("#%s: %v", def, err)
			continue
		}
		var cueFields, handFields []string
		for it.Next() {
			cueFields = append(cueFields, it.Selector().Unquoted())
		}
		for f := range hand.Defs[def].Properties {
			handFields = append(handFields, f)
		}
		slices.Sort(cueFields)
		slices.Sort(handFields)
		if !slices.Equal(cueFields, handFields) {
			t.Errorf("#%s has fields %v; flag.schema.json's %s has %v", def, cueFields, def, handFields)
		}
	}
}

// growthFlagRef is where CUE's JSON Schema encoder finds growth's #Flag:
// the package that defines it, and its path there.
func growthFlagRef(t *testing.T, ex *example) (cue.Value, cue.Path) {
	t.Helper()
	var inst cue.Value
	var path cue.Path
	if _, err := jsonschema.Generate(ex.schemas["growth"].Value, &jsonschema.GenerateConfig{NamesFunc: func(refs []*jsonschema.CUERef) {
		jsonschema.DefaultNamesFunc(refs)
		for _, r := range refs {
			if r.Name == "Flag" {
				inst, path = r.Inst, r.Path
			}
		}
	}}); err != nil {
		t.Fatal(err)
	}
	return inst, path
}
