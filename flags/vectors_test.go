package flags_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"reflect"
	"testing"

	"github.com/cuecast/cuecast/flags"
)

// vectors is testdata/flags/v1.json (its README.md describes it).
type vectors struct {
	Format    string `json:"format"`
	Version   int    `json:"version"`
	Schema    string `json:"schema"`
	Whole     int    `json:"whole"`
	Positions []struct {
		Salt, Value string
		Position    int
	} `json:"positions"`
	Sets  map[string]json.RawMessage `json:"sets"`
	Cases []struct {
		Name    string         `json:"name"`
		Set     string         `json:"set"`
		Flag    string         `json:"flag"`
		Type    flags.Type     `json:"type"`
		Context map[string]any `json:"context"`
		Want    struct {
			Value     any             `json:"value"`
			Variant   string          `json:"variant"`
			Reason    flags.Reason    `json:"reason"`
			ErrorCode flags.ErrorCode `json:"errorCode"`
			Rule      *int            `json:"rule"`
			Position  *int            `json:"position"`
		} `json:"want"`
	} `json:"cases"`
	Invalid []struct {
		Name   string          `json:"name"`
		Set    json.RawMessage `json:"set"`
		Errors []struct{ Flag, Field string }
	} `json:"invalid"`
	Unsupported []struct {
		Name string          `json:"name"`
		Set  json.RawMessage `json:"set"`
	} `json:"unsupported"`
}

func readVectors(t *testing.T) vectors {
	t.Helper()
	b, err := os.ReadFile("../testdata/flags/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("decode vectors: %v", err)
	}
	if v.Format != "cuecast flag vectors" || v.Version != 1 || v.Schema != flags.Schema || v.Whole != flags.Whole {
		t.Fatalf("vectors header: format %q version %d schema %q whole %d", v.Format, v.Version, v.Schema, v.Whole)
	}
	return v
}

// TestVectors runs the language-neutral vectors every SDK runs.
func TestVectors(t *testing.T) {
	runVectors(t, 0, false)
}

// TestVectorsJSONNumber runs them with the contexts' numbers decoded as
// json.Number, as `cuecast flags eval --ctx` and a service decoding with
// UseNumber pass them: the same results.
func TestVectorsJSONNumber(t *testing.T) {
	runVectors(t, 0, true)
}

// TestVectorsCached runs them again with padding rules in front of every
// rule, which never match but read the attributes first: the evaluation
// then caches attribute lookups and parsed versions (more than four rules),
// and must not change any result.
func TestVectorsCached(t *testing.T) {
	runVectors(t, 5, false)
}

func runVectors(t *testing.T, pad int, useNumber bool) {
	v := readVectors(t)
	if useNumber {
		numberContexts(t, &v)
	}
	if len(v.Cases) < 200 {
		t.Errorf("%d cases, the issue asks for at least 200", len(v.Cases))
	}
	for _, p := range v.Positions {
		if got := flags.Position(p.Salt, p.Value); got != p.Position {
			t.Errorf("Position(%q, %q) = %d, want %d", p.Salt, p.Value, got, p.Position)
		}
	}
	sets := map[string]*flags.Evaluator{}
	for name, raw := range v.Sets {
		if pad > 0 {
			raw = padRules(t, raw, pad)
		}
		e, err := flags.Compile(raw)
		if err != nil {
			t.Fatalf("set %s: %v", name, err)
		}
		sets[name] = e
	}
	reasons := map[flags.Reason]int{}
	for _, c := range v.Cases {
		e := sets[c.Set]
		if e == nil {
			t.Fatalf("%s: no set %q", c.Name, c.Set)
		}
		var r flags.Result
		switch c.Type {
		case "":
			r = e.Evaluate(c.Flag, c.Context)
		case flags.TypeBool:
			_, r = e.Bool(c.Flag, c.Context, false)
		case flags.TypeString:
			_, r = e.String(c.Flag, c.Context, "")
		case flags.TypeInt:
			_, r = e.Int(c.Flag, c.Context, 0)
		case flags.TypeFloat:
			_, r = e.Float(c.Flag, c.Context, 0)
		case flags.TypeObject:
			_, r = e.Object(c.Flag, c.Context, nil)
		default:
			t.Fatalf("%s: type %q", c.Name, c.Type)
		}
		reasons[r.Reason]++
		w := c.Want
		if r.Reason != w.Reason || r.ErrorCode != w.ErrorCode || r.Variant != w.Variant {
			t.Errorf("%s: got %s/%s variant %q, want %s/%s variant %q", c.Name, r.Reason, r.ErrorCode, r.Variant, w.Reason, w.ErrorCode, w.Variant)
			continue
		}
		if got := normalize(t, r.Value); !reflect.DeepEqual(got, w.Value) {
			t.Errorf("%s: value %#v, want %#v", c.Name, got, w.Value)
		}
		wantRule := -1
		if w.Rule != nil {
			wantRule = *w.Rule + pad
		}
		if r.Rule != wantRule {
			t.Errorf("%s: rule %d, want %d", c.Name, r.Rule, wantRule)
		}
		if w.Position != nil && r.Position != *w.Position {
			t.Errorf("%s: position %d, want %d", c.Name, r.Position, *w.Position)
		}
	}
	for _, reason := range []flags.Reason{flags.ReasonStatic, flags.ReasonDefault, flags.ReasonTargetingMatch, flags.ReasonSplit,
		flags.ReasonDisabled, flags.ReasonPrerequisiteFailed, flags.ReasonError} {
		if reasons[reason] == 0 {
			t.Errorf("no case gives %s", reason)
		}
	}
	for _, c := range v.Invalid {
		_, err := flags.Compile(c.Set)
		if !errors.Is(err, flags.ErrInvalid) {
			t.Errorf("%s: Compile: %v, want ErrInvalid", c.Name, err)
			continue
		}
		for _, want := range c.Errors {
			if !hasFieldError(err, want.Flag, want.Field) {
				t.Errorf("%s: %v\nwant an error for flag %q field %s", c.Name, err, want.Flag, want.Field)
			}
		}
	}
	for _, c := range v.Unsupported {
		if _, err := flags.Compile(c.Set); !errors.Is(err, flags.ErrUnsupportedSchema) {
			t.Errorf("%s: Compile: %v, want ErrUnsupportedSchema", c.Name, err)
		}
	}
}

// numberContexts decodes the cases' contexts again, numbers as
// json.Number.
func numberContexts(t *testing.T, v *vectors) {
	t.Helper()
	b, err := os.ReadFile("../testdata/flags/v1.json")
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Cases []struct {
			Context map[string]any `json:"context"`
		} `json:"cases"`
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		t.Fatalf("decode vectors: %v", err)
	}
	numbers := 0
	for i, c := range raw.Cases {
		for _, a := range c.Context {
			if _, ok := a.(json.Number); ok {
				numbers++
			}
		}
		v.Cases[i].Context = c.Context
	}
	if numbers == 0 {
		t.Fatal("no case has a number in its context")
	}
}

// padRules puts n rules that never match in front of each flag's rules
// (of a flag that has some), reading the attributes its rules read.
func padRules(t *testing.T, raw []byte, n int) []byte {
	t.Helper()
	var s flags.Set
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	for k, f := range s.Flags {
		if len(f.Rules) == 0 {
			continue
		}
		var pad []flags.Rule
		// Pad with rules on the first rule's first attribute.
		cs := f.Rules[0].Clauses
		for i := range n {
			if len(cs) == 0 {
				break
			}
			c := cs[0]
			never := []flags.Clause{
				{Attribute: c.Attribute, Op: flags.OpSemverGt, Values: []flags.RawVariant{flags.RawVariant(`"999.0.0"`)}},
				{Attribute: c.Attribute, Op: flags.OpIn, Values: []flags.RawVariant{flags.RawVariant(`"\u0000never"`)}},
				{Attribute: c.Attribute, Op: flags.OpGt, Values: []flags.RawVariant{flags.RawVariant(`1e300`)}},
			}[i%3]
			pad = append(pad, flags.Rule{Clauses: []flags.Clause{never}, Serve: flags.Serve{Variant: f.OffVariant}})
		}
		f.Rules = append(pad, f.Rules...)
		s.Flags[k] = f
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func hasFieldError(err error, flag, field string) bool {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	for _, e := range errs {
		var fe *flags.FieldError
		if errors.As(e, &fe) && fe.Flag == flag && fe.Field == field {
			return true
		}
	}
	return false
}

// normalize makes a Go value comparable with one decoded from the vectors'
// JSON (int64 becomes float64).
func normalize(t *testing.T, v any) any {
	t.Helper()
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
