package bindings

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	cuejson "cuelang.org/go/encoding/json"
	"cuelang.org/go/encoding/jsonschema"

	"github.com/cuecast/cuecast/flags"
)

// flagSchema is the JSON Schema of one flag of a flag set (flags.Schema,
// schemas/flags.cue's #Flag), written by hand: its $defs go into a flag
// set's JSON Schema in place of the encoder's open #Flag.
//
//go:embed flag.schema.json
var flagSchema []byte

// JSONSchema writes a JSON Schema (draft 2020-12) for schema, for every
// language neither Go nor TypeScript: CUE's own encoder
// (cuelang.org/go/encoding/jsonschema.Generate) writes it. What it cannot
// express it leaves open rather than guess: a definition typed by
// comprehensions on one of its own fields is incomplete on its own, and the
// encoder writes it as true (any JSON). #FlagSet's #Flag is one (its
// variants typed by its type); as the flag format is cuecast's own, a flag
// set's schema (its schema field flags.Schema) gets cuecast's hand-written
// schema of a flag (flag.schema.json) in place of that true
// (docs/GETTING-STARTED.md, "Typed bindings"; TestJSONSchemaFlagIsClosed).
func JSONSchema(schema cue.Value) ([]byte, error) {
	if err := schema.Err(); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	expr, err := jsonschema.Generate(schema, nil)
	if err != nil {
		return nil, fmt.Errorf("generate JSON Schema: %w", err)
	}
	ctx := cuecontext.New()
	v := ctx.BuildExpr(expr)
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("generate JSON Schema: %w", err)
	}
	if isFlagSet(schema) {
		if err := closeFlag(v, expr); err != nil {
			return nil, fmt.Errorf("JSON Schema of a flag set: %w", err)
		}
		if v = ctx.BuildExpr(expr); v.Err() != nil {
			return nil, fmt.Errorf("JSON Schema of a flag set: %w", v.Err())
		}
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encode JSON Schema: %w", err)
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return nil, fmt.Errorf("indent JSON Schema: %w", err)
	}
	out.WriteByte('\n')
	return out.Bytes(), nil
}

// isFlagSet reports whether schema is the flag format flags evaluates:
// its schema field is flags.Schema, the marker the evaluator checks. A
// future format (another marker) keeps the encoder's schema, as
// flag.schema.json describes this one.
func isFlagSet(schema cue.Value) bool {
	s, err := schema.LookupPath(cue.MakePath(cue.Str("schema"))).String()
	return err == nil && s == flags.Schema
}

// closeFlag puts flag.schema.json's $defs into expr, the encoder's JSON
// Schema (v built), of a flag set: the definition the flags map's values
// refer to ($defs.Flag for #FlagSet) takes its Flag's keywords beside the
// encoder's description, and its other $defs are added. A schema of
// another shape (a flag not a reference, more than one flag schema) or a
// definition the encoder wrote closed is left as the encoder wrote it:
// gen and check must not fail on a repo's own flag set schema.
func closeFlag(v cue.Value, expr ast.Expr) error {
	name, ok := flagDefName(v)
	if !ok || !isOpen(v.LookupPath(cue.MakePath(cue.Str("$defs"), cue.Str(name)))) {
		return nil
	}
	hand, err := cuejson.Extract("flag.schema.json", flagSchema)
	if err != nil {
		return fmt.Errorf("read flag.schema.json: %w", err)
	}
	handDefs, ok := astField(hand, "$defs").(*ast.StructLit)
	if !ok {
		return errors.New("flag.schema.json has no $defs")
	}
	defs, ok := astField(expr, "$defs").(*ast.StructLit)
	if !ok {
		return errors.New("no $defs in the encoder's schema")
	}
	for _, d := range handDefs.Elts {
		f := d.(*ast.Field)
		n, _, _ := ast.LabelName(f.Label)
		if n != "Flag" {
			if astField(defs, n) != nil {
				return fmt.Errorf("$defs.%s: the encoder wrote one already", n)
			}
			defs.Elts = append(defs.Elts, f)
			continue
		}
		for _, e := range defs.Elts {
			g := e.(*ast.Field)
			if m, _, _ := ast.LabelName(g.Label); m != name {
				continue
			}
			keep, _ := g.Value.(*ast.StructLit) // its description; true has none
			if keep == nil {
				keep = &ast.StructLit{}
			}
			keep.Elts = append(keep.Elts, f.Value.(*ast.StructLit).Elts...)
			g.Value = keep
		}
	}
	return nil
}

// flagDefName is the $defs entry the flags map's values refer to, the
// encoder's name for #Flag, and whether there is exactly one.
func flagDefName(v cue.Value) (string, bool) {
	it, err := v.LookupPath(cue.ParsePath(`properties.flags.patternProperties`)).Fields()
	if err != nil {
		return "", false
	}
	var names []string
	for it.Next() {
		ref, err := it.Value().LookupPath(cue.MakePath(cue.Str("$ref"))).String()
		if err != nil {
			return "", false
		}
		name, ok := strings.CutPrefix(ref, "#/$defs/")
		if !ok {
			return "", false
		}
		names = append(names, name)
	}
	if len(names) != 1 {
		return "", false
	}
	return names[0], true
}

// isOpen reports whether a JSON Schema accepts any JSON: true, or an
// object of annotations only.
func isOpen(s cue.Value) bool {
	if b, err := s.Bool(); err == nil {
		return b
	}
	it, err := s.Fields()
	if err != nil {
		return false
	}
	for it.Next() {
		switch it.Selector().Unquoted() {
		case "description", "title", "$comment":
		default:
			return false
		}
	}
	return true
}

// astField is the value of the field named name in x, a struct literal, or
// nil.
func astField(x ast.Expr, name string) ast.Expr {
	s, ok := x.(*ast.StructLit)
	if !ok {
		return nil
	}
	for _, d := range s.Elts {
		if f, ok := d.(*ast.Field); ok {
			if n, _, _ := ast.LabelName(f.Label); n == name {
				return f.Value
			}
		}
	}
	return nil
}
