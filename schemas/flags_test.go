package schemas_test

import (
	"cmp"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"

	"github.com/cuecast/cuecast/flags"
	"github.com/cuecast/cuecast/schemas"
)

// TestFlagSetSchema unifies configs with #FlagSet: valid ones export JSON
// that flags.Compile accepts, invalid ones fail on the field named.
func importLines(b []byte) int {
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "import ") {
			n++
		}
	}
	return n
}

func TestFlagSetSchema(t *testing.T) {
	ctx := cuecontext.New()
	pkg := ctx.CompileBytes(schemas.Files()["flags.cue"], cue.Filename("flags.cue"))
	if err := pkg.Err(); err != nil {
		t.Fatalf("flags.cue does not compile: %v", err)
	}
	const good = `
	flags: {
		"checkout-v2": {
			type: "bool"
			variants: {on: true, off: false}
			on: true, offVariant: "off", defaultVariant: "off"
			prerequisites: [{flag: "color", variant: "blue"}]
			rules: [
				{id: "nl", clauses: [{attribute: "country", op: "in", values: ["NL", "BE"]}, {attribute: "app", op: "semverGt", values: ["1.2.0"]}], variant: "on"},
				{clauses: [{attribute: "email", op: "endsWith", values: ["@example.com"], negate: true}], rollout: {bucketBy: "account", weights: [{variant: "on", weight: 10000}, {variant: "off", weight: 90000}]}},
			]
			fallthrough: rollout: weights: [{variant: "on", weight: 25000}, {variant: "off", weight: 75000}]
		}
		color: {type: "string", variants: {red: "#f00", blue: "#00f"}, on: true, offVariant: "red", defaultVariant: "blue", salt: "colour", fallthrough: variant: "blue"}
		limits: {type: "object", variants: {small: {rps: 10}, big: {rps: 1000}}, on: false, offVariant: "small", defaultVariant: "small"}
		ratio: {type: "float", variants: {a: 0.5, b: 1}, on: true, offVariant: "a", defaultVariant: "a", rules: [{clauses: [{attribute: "load", op: "lt", values: [0.3]}], variant: "b"}]}
	}`
	tests := []struct {
		name, input, wantErr string
	}{
		{"good", good, ""},
		{"bool variant not bool", `flags: f: {type: "bool", variants: {on: "yes"}, on: true, offVariant: "on", defaultVariant: "on"}`, "variants.on"},
		{"int variant float", `flags: f: {type: "int", variants: {a: 1.5}, on: true, offVariant: "a", defaultVariant: "a"}`, "variants.a"},
		{"unknown type", `flags: f: {type: "date", variants: {a: 1}, on: true, offVariant: "a", defaultVariant: "a"}`, "type"},
		{"no on", `flags: f: {type: "bool", variants: {a: true}, offVariant: "a", defaultVariant: "a"}`, "on"},
		{"unknown operator", `flags: f: {type: "bool", variants: {a: true}, on: true, offVariant: "a", defaultVariant: "a", rules: [{clauses: [{attribute: "x", op: "regex", values: ["."]}], variant: "a"}]}`, "op"},
		{"numeric operator string value", `flags: f: {type: "bool", variants: {a: true}, on: true, offVariant: "a", defaultVariant: "a", rules: [{clauses: [{attribute: "x", op: "lt", values: ["10"]}], variant: "a"}]}`, "values"},
		{"rule without clauses", `flags: f: {type: "bool", variants: {a: true}, on: true, offVariant: "a", defaultVariant: "a", rules: [{clauses: [], variant: "a"}]}`, "clauses"},
		{"weight over whole", `flags: f: {type: "bool", variants: {a: true}, on: true, offVariant: "a", defaultVariant: "a", fallthrough: rollout: weights: [{variant: "a", weight: 100001}]}`, "weight"},
		{"unknown field", `flags: f: {type: "bool", variants: {a: true}, on: true, offVariant: "a", defaultVariant: "a", enabled: true}`, "enabled"},
		{"bad key", `flags: "-f": {type: "bool", variants: {a: true}, on: true, offVariant: "a", defaultVariant: "a"}`, "-f"},
		{"other schema", `schema: "cuecast.flags/v2", flags: {}`, "schema"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := ctx.CompileString(tt.input)
			if err := in.Err(); err != nil {
				t.Fatalf("test input does not compile: %v", err)
			}
			v := pkg.LookupPath(cue.ParsePath("#FlagSet")).Unify(in)
			err := v.Validate(cue.Concrete(true))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("got error %v, want one mentioning %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("got error %v, want none", err)
			}
			b, err := v.MarshalJSON()
			if err != nil {
				t.Fatalf("export: %v", err)
			}
			e, err := flags.Compile(b)
			if err != nil {
				t.Fatalf("flags.Compile of the export: %v\n%s", err, b)
			}
			if r := e.Evaluate("checkout-v2", flags.Context{"targetingKey": "user-1"}); r.Reason != flags.ReasonSplit || r.Position != 64759 {
				t.Errorf("checkout-v2 for user-1: %+v, want SPLIT at 64759 (salt defaults to the key)", r)
			}
			if r := e.Evaluate("checkout-v2", flags.Context{"targetingKey": "user-1", "country": "NL", "app": "1.3.0"}); r.Reason != flags.ReasonTargetingMatch || r.RuleID != "nl" {
				t.Errorf("checkout-v2 for NL: %+v, want TARGETING_MATCH by rule nl", r)
			}
			if r := e.Evaluate("limits", nil); r.Reason != flags.ReasonDisabled {
				t.Errorf("limits: %+v, want DISABLED", r)
			}
		})
	}
	// Every shipped file is one package, as a repo vendors it: flags.cue
	// must not collide with the others.
	files := schemas.Files()
	names := slices.Sorted(maps.Keys(files))
	// The file with imports goes first, keeping its clauses; the others
	// lose their package clause and may import only what it does.
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(importLines(files[b]), importLines(files[a]))
	})
	var all strings.Builder
	for i, name := range names {
		src := string(files[name])
		if i > 0 {
			src = strings.Replace(src, "package schemas", "", 1)
			src = strings.Replace(src, `import "list"`, "", 1)
			if importLines([]byte(src)) > 0 {
				t.Fatalf("%s imports a package the first file does not", name)
			}
		}
		all.WriteString(src + "\n")
	}
	if err := ctx.CompileString(all.String()).Err(); err != nil {
		t.Fatalf("the shipped schemas do not compile as one package: %v", err)
	}

	// What CUE lets through, Validate catches.
	in := ctx.CompileString(`flags: f: {type: "bool", variants: {a: true}, on: true, offVariant: "b", defaultVariant: "a"}`)
	b, err := pkg.LookupPath(cue.ParsePath("#FlagSet")).Unify(in).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := flags.Compile(b); !errors.Is(err, flags.ErrInvalid) || !strings.Contains(err.Error(), "offVariant") {
		t.Errorf("Compile of an unknown offVariant: %v, want ErrInvalid naming offVariant", err)
	}
}
