package bindings

import (
	"bytes"
	"encoding/json"
	"fmt"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/encoding/jsonschema"
)

// JSONSchema writes a JSON Schema (draft 2020-12) for schema, for every
// language neither Go nor TypeScript: CUE's own encoder
// (cuelang.org/go/encoding/jsonschema.Generate) writes it. What it cannot
// express it leaves open rather than guess: a definition typed by
// comprehensions on one of its own fields is incomplete on its own, and the
// encoder writes it as true (any JSON). #FlagSet's #Flag is one (its
// variants typed by its type): every flag accepts any JSON
// (docs/GETTING-STARTED.md, "Typed bindings"; TestJSONSchemaFlagIsOpen).
func JSONSchema(schema cue.Value) ([]byte, error) {
	if err := schema.Err(); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	expr, err := jsonschema.Generate(schema, nil)
	if err != nil {
		return nil, fmt.Errorf("generate JSON Schema: %w", err)
	}
	v := cuecontext.New().BuildExpr(expr)
	if err := v.Err(); err != nil {
		return nil, fmt.Errorf("generate JSON Schema: %w", err)
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
