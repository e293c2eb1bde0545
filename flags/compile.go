package flags

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
)

// Evaluator is a compiled flag set: build it once per config version with
// Compile and evaluate with Evaluate or the typed methods. It is immutable
// and safe for concurrent use.
type Evaluator struct {
	flags map[string]*flag
	keys  []string // sorted
	set   *Set
}

type flag struct {
	key      string
	typ      Type
	variants []variant
	on       bool
	off, def int    // variant indexes
	prefix   string // salt + "."
	prereqs  []prereq
	rules    []rule
	fall     serve
	static   bool
	// attrs are the distinct attributes the rules' clauses read; with
	// many rules and few attributes, an evaluation looks each up once
	// (attrCache).
	attrs  []string
	cached bool
}

type variant struct {
	name  string
	value any // bool, string, int64, float64 or map[string]any
}

type prereq struct {
	flag    *flag
	variant int
}

type rule struct {
	id      string
	clauses []clause
	serve
}

type serve struct {
	variant  int // -1 when weights is set
	bucketBy string
	weights  []weight
}

type weight struct {
	upTo    int // exclusive running sum
	variant int
}

type clause struct {
	attr   string
	idx    int // in flag.attrs
	op     Op
	negate bool
	values []value
}

type value struct {
	str    string
	num    float64
	b      bool
	kind   byte // 's', 'n', 'b'
	semver version
}

// Compile decodes a flag set's JSON (a config version's content), checks
// it with Validate and builds its Evaluator. Errors: ErrUnsupportedSchema
// (wrapped) for another schema, errors wrapping ErrInvalid (one
// *FieldError each, joined) for a set Validate refuses, a decoding error
// otherwise.
func Compile(content []byte) (*Evaluator, error) {
	var s Set
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.UseNumber()
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("decode flag set: %w", err)
	}
	return CompileSet(&s)
}

// CompileSet is Compile for a decoded Set, which it keeps: do not modify s
// afterwards.
func CompileSet(s *Set) (*Evaluator, error) {
	if s.Schema != Schema {
		return nil, fmt.Errorf("flag set schema %q, this evaluator reads %q: %w", s.Schema, Schema, ErrUnsupportedSchema)
	}
	if err := Validate(s); err != nil {
		return nil, err
	}
	e := &Evaluator{flags: make(map[string]*flag, len(s.Flags)), set: s}
	for k := range s.Flags {
		e.keys = append(e.keys, k)
	}
	sort.Strings(e.keys)
	for _, k := range e.keys {
		e.flags[k] = &flag{key: k}
	}
	for _, k := range e.keys {
		if err := e.build(e.flags[k], s.Flags[k]); err != nil {
			// Validate accepted it, so this is a bug here, not in the set.
			return nil, fmt.Errorf("compile flag %q: %w", k, err)
		}
	}
	return e, nil
}

func (e *Evaluator) build(f *flag, src Flag) error {
	f.typ = src.Type
	names := slices.Sorted(mapKeys(src.Variants))
	idx := make(map[string]int, len(names))
	for i, n := range names {
		v, err := decodeValue(src.Type, src.Variants[n])
		if err != nil {
			return err
		}
		f.variants = append(f.variants, variant{name: n, value: v})
		idx[n] = i
	}
	f.on = src.On != nil && *src.On
	f.off, f.def = idx[src.OffVariant], idx[src.DefaultVariant]
	f.prefix = src.Salt + "."
	for _, p := range src.Prerequisites {
		pf := e.flags[p.Flag]
		pi := slices.Index(slices.Sorted(mapKeys(e.set.Flags[p.Flag].Variants)), p.Variant)
		f.prereqs = append(f.prereqs, prereq{flag: pf, variant: pi})
	}
	for _, r := range src.Rules {
		cr := rule{id: r.ID, serve: buildServe(r.Serve, idx)}
		for _, c := range r.Clauses {
			ai := slices.Index(f.attrs, c.Attribute)
			if ai < 0 {
				ai = len(f.attrs)
				f.attrs = append(f.attrs, c.Attribute)
			}
			cc := clause{attr: c.Attribute, idx: ai, op: c.Op, negate: c.Negate}
			for _, raw := range c.Values {
				v, err := clauseValue(c.Op, raw)
				if err != nil {
					return err
				}
				cc.values = append(cc.values, v)
			}
			cr.clauses = append(cr.clauses, cc)
		}
		f.rules = append(f.rules, cr)
	}
	if src.Fallthrough != nil {
		f.fall = buildServe(*src.Fallthrough, idx)
	} else {
		f.fall = serve{variant: f.def}
	}
	f.cached = len(f.rules) > cacheMinRules && len(f.attrs) <= cacheAttrs
	f.static = len(f.prereqs) == 0 && len(f.rules) == 0 && f.fall.weights == nil
	return nil
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

func buildServe(s Serve, idx map[string]int) serve {
	if s.Rollout == nil {
		return serve{variant: idx[s.Variant]}
	}
	out := serve{variant: -1, bucketBy: s.Rollout.BucketBy}
	if out.bucketBy == "" {
		out.bucketBy = DefaultBucketBy
	}
	sum := 0
	for _, w := range s.Rollout.Weights {
		if w.Weight == 0 {
			continue
		}
		sum += w.Weight
		out.weights = append(out.weights, weight{upTo: sum, variant: idx[w.Variant]})
	}
	return out
}

// decodeValue decodes a variant's JSON as a value of type t.
func decodeValue(t Type, raw RawVariant) (any, error) {
	v, err := decodeRaw(raw)
	if err != nil {
		return nil, err
	}
	switch t {
	case TypeBool:
		if b, ok := v.(bool); ok {
			return b, nil
		}
	case TypeString:
		if s, ok := v.(string); ok {
			return s, nil
		}
	case TypeInt:
		if n, ok := v.(json.Number); ok {
			if i, err := n.Int64(); err == nil {
				// Beyond ±2^53 a double has no such integer: the
				// JavaScript OFREP providers (web, Node) would read
				// another value than Go does.
				if i > 1<<53 || i < -(1<<53) {
					return nil, fmt.Errorf("%s is beyond ±2^53, which every language's numbers hold exactly", raw)
				}
				return i, nil
			}
			// 3.0 is an int too, as CUE writes it "3" anyway.
			if f, err := n.Float64(); err == nil && f == math.Trunc(f) && math.Abs(f) <= 1<<53 {
				return int64(f), nil
			}
		}
	case TypeFloat:
		if n, ok := v.(json.Number); ok {
			if f, err := n.Float64(); err == nil {
				return f, nil
			}
		}
	case TypeObject:
		if m, ok := v.(map[string]any); ok {
			return plain(m).(map[string]any), nil
		}
	default:
		return nil, fmt.Errorf("unknown type %q", t)
	}
	return nil, fmt.Errorf("%s is not a %s", raw, t)
}

// decodeRaw decodes a variant's or a clause value's JSON, numbers as
// json.Number (so that an int keeps all its digits).
func decodeRaw(raw RawVariant) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("not JSON: %w", err)
	}
	return v, nil
}

// plain turns json.Numbers into float64s, as encoding/json decodes them
// without UseNumber (what a service reading an object variant expects).
func plain(v any) any {
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = plain(e)
		}
	case []any:
		for i, e := range x {
			x[i] = plain(e)
		}
	}
	return v
}

// clauseValue checks and decodes one clause value for op.
func clauseValue(op Op, raw RawVariant) (value, error) {
	v, err := decodeRaw(raw)
	if err != nil {
		return value{}, err
	}
	var out value
	switch x := v.(type) {
	case string:
		out.kind, out.str = 's', x
	case json.Number:
		f, err := x.Float64()
		if err != nil {
			return value{}, fmt.Errorf("number %s: %w", x, err)
		}
		out.kind, out.num = 'n', f
	case bool:
		out.kind, out.b = 'b', x
	default:
		return value{}, fmt.Errorf("%s is not a string, number or bool", raw)
	}
	switch op {
	case OpIn:
	case OpStartsWith, OpEndsWith, OpContains:
		if out.kind != 's' {
			return value{}, fmt.Errorf("%s takes strings, not %s", op, raw)
		}
	case OpLt, OpLe, OpGt, OpGe:
		if out.kind != 'n' {
			return value{}, fmt.Errorf("%s takes numbers, not %s", op, raw)
		}
	case OpSemverEq, OpSemverLt, OpSemverGt:
		sv, ok := parseVersion(out.str)
		if out.kind != 's' || !ok {
			return value{}, fmt.Errorf("%s takes semantic versions (\"1.2.3\"), not %s", op, raw)
		}
		out.semver = sv
	default:
		return value{}, fmt.Errorf("unknown operator %q", op)
	}
	return out, nil
}

// Validate checks what the CUE schema cannot say readably: every variant
// named exists and every variant matches the flag's type, a rollout's
// weights sum to Whole, clause values suit their operator, prerequisites
// name existing flags and variants and form no cycle. It returns nil or
// the failures, each a *FieldError wrapping ErrInvalid, joined
// (errors.Join), in flag-key order. The compiler runs it on every flag
// set and reports each FieldError at its field's position.
func Validate(s *Set) error {
	var errs []error
	fail := func(key, field, format string, args ...any) {
		errs = append(errs, &FieldError{Flag: key, Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	keys := slices.Sorted(mapKeys(s.Flags))
	for _, key := range keys {
		f := s.Flags[key]
		if key == "" {
			fail(key, "key", "empty")
		}
		if strings.Contains(key, "/") {
			// OFREP addresses a flag as <config path>/<flag>: the last
			// segment is the flag, so a key with a slash could be
			// evaluated in-process but never by a single OFREP request.
			fail(key, "key", "has a /: a flag key has none, so that OFREP's <config>/<flag> names it")
		}
		switch f.Type {
		case TypeBool, TypeString, TypeInt, TypeFloat, TypeObject:
		default:
			fail(key, "type", "%q is not bool, string, int, float or object", f.Type)
			continue
		}
		if len(f.Variants) == 0 {
			fail(key, "variants", "none: a flag needs at least one")
		}
		for _, n := range slices.Sorted(mapKeys(f.Variants)) {
			if _, err := decodeValue(f.Type, f.Variants[n]); err != nil {
				fail(key, "variants."+label(n), "%v", err)
			}
		}
		if f.On == nil {
			fail(key, "on", "missing: say true or false")
		}
		has := func(field, v string) {
			if _, ok := f.Variants[v]; !ok {
				fail(key, field, "no variant %q (variants: %s)", v, strings.Join(slices.Sorted(mapKeys(f.Variants)), ", "))
			}
		}
		has("offVariant", f.OffVariant)
		has("defaultVariant", f.DefaultVariant)
		checkServe := func(field string, sv Serve) {
			switch {
			case sv.Rollout != nil && sv.Variant != "":
				fail(key, field, "both a variant and a rollout: serve one")
			case sv.Rollout == nil && sv.Variant == "":
				fail(key, field, "neither a variant nor a rollout: serve one")
			case sv.Rollout == nil:
				has(field+".variant", sv.Variant)
			default:
				sum := 0
				for i, w := range sv.Rollout.Weights {
					has(fmt.Sprintf("%s.rollout.weights[%d].variant", field, i), w.Variant)
					if w.Weight < 0 || w.Weight > Whole {
						fail(key, fmt.Sprintf("%s.rollout.weights[%d].weight", field, i), "%d is outside 0..%d", w.Weight, Whole)
					}
					sum += w.Weight
				}
				if sum != Whole {
					fail(key, field+".rollout.weights", "sum to %d, not %d (100%%)", sum, Whole)
				}
			}
		}
		for i, r := range f.Rules {
			field := fmt.Sprintf("rules[%d]", i)
			if len(r.Clauses) == 0 {
				fail(key, field+".clauses", "none: a rule needs at least one clause (use fallthrough to serve everyone)")
			}
			for j, c := range r.Clauses {
				cf := fmt.Sprintf("%s.clauses[%d]", field, j)
				if c.Attribute == "" {
					fail(key, cf+".attribute", "empty")
				}
				if len(c.Values) == 0 {
					fail(key, cf+".values", "none: a clause needs at least one value")
				}
				for k, raw := range c.Values {
					if _, err := clauseValue(c.Op, raw); err != nil {
						fail(key, fmt.Sprintf("%s.values[%d]", cf, k), "%v", err)
					}
				}
			}
			checkServe(field, r.Serve)
		}
		if f.Fallthrough != nil {
			checkServe("fallthrough", *f.Fallthrough)
		}
		for i, p := range f.Prerequisites {
			field := fmt.Sprintf("prerequisites[%d]", i)
			pf, ok := s.Flags[p.Flag]
			switch {
			case !ok:
				fail(key, field+".flag", "no flag %q in this set", p.Flag)
			case p.Flag == key:
				fail(key, field+".flag", "a flag cannot require itself")
			default:
				if _, ok := pf.Variants[p.Variant]; !ok {
					fail(key, field+".variant", "flag %q has no variant %q", p.Flag, p.Variant)
				}
			}
		}
	}
	// Cycles: depth-first over prerequisites, reporting each cycle once,
	// at its smallest key.
	const (
		unseen = iota
		active
		done
	)
	state := make(map[string]int, len(keys))
	var path []string
	var visit func(k string)
	visit = func(k string) {
		state[k] = active
		path = append(path, k)
		for i, p := range s.Flags[k].Prerequisites {
			if _, ok := s.Flags[p.Flag]; !ok || p.Flag == k {
				continue
			}
			switch state[p.Flag] {
			case active:
				start := slices.Index(path, p.Flag)
				cycle := append(slices.Clone(path[start:]), p.Flag)
				fail(k, fmt.Sprintf("prerequisites[%d].flag", i), "cycle: %s", strings.Join(cycle, " -> "))
			case unseen:
				visit(p.Flag)
			}
		}
		path = path[:len(path)-1]
		state[k] = done
	}
	for _, k := range keys {
		if state[k] == unseen {
			visit(k)
		}
	}
	return errors.Join(errs...)
}

// Keys returns the flag keys, sorted (none for a nil Evaluator).
func (e *Evaluator) Keys() []string {
	if e == nil {
		return nil
	}
	return slices.Clone(e.keys)
}

// Set returns the flag set the evaluator was compiled from (nil for a nil
// Evaluator). Do not modify it.
func (e *Evaluator) Set() *Set {
	if e == nil {
		return nil
	}
	return e.set
}

// Changed lists the keys of the flags that differ between old and new
// (added, removed or changed in any field), sorted: what an OpenFeature
// PROVIDER_CONFIGURATION_CHANGED event names. Either may be nil.
func Changed(old, new *Evaluator) []string {
	var out []string
	o, n := old.Set(), new.Set()
	var of, nf map[string]Flag
	if o != nil {
		of = o.Flags
	}
	if n != nil {
		nf = n.Flags
	}
	for k, f := range nf {
		if g, ok := of[k]; !ok || !sameFlag(f, g) {
			out = append(out, k)
		}
	}
	for k := range of {
		if _, ok := nf[k]; !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

func sameFlag(a, b Flag) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
