package flags

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Context is the evaluation context: attribute name to value (string,
// bool, any Go integer or float, json.Number). Rollouts bucket by
// "targetingKey" unless they name another attribute; a number buckets the
// same whatever type carries it (docs/FLAGS.md, "Bucketing"). Evaluation
// only reads it.
type Context = map[string]any

// Result is one evaluation.
type Result struct {
	// Value is the variant's value: bool, string, int64, float64 or
	// map[string]any (shared: do not modify). Nil when Reason is ERROR.
	Value   any
	Variant string
	Reason  Reason
	// ErrorCode says why when Reason is ERROR.
	ErrorCode ErrorCode
	// Rule is the index of the rule that matched, -1 for none; RuleID its id.
	Rule   int
	RuleID string
	// Position is the bucket position a rollout used, -1 when none did.
	Position int
}

// Evaluate evaluates flag key for ctx. It does not allocate. A key that is
// not in the set gives Reason ERROR with ErrorFlagNotFound, a nil
// Evaluator (no version yet) ERROR with ErrorNotReady.
func (e *Evaluator) Evaluate(key string, ctx Context) Result {
	if e == nil {
		return Result{Reason: ReasonError, ErrorCode: ErrorNotReady, Rule: -1, Position: -1}
	}
	f := e.flags[key]
	if f == nil {
		return Result{Reason: ReasonError, ErrorCode: ErrorFlagNotFound, Rule: -1, Position: -1}
	}
	return f.eval(ctx)
}

// Type returns flag key's type and whether the set has it.
func (e *Evaluator) Type(key string) (Type, bool) {
	if e == nil {
		return "", false
	}
	f := e.flags[key]
	if f == nil {
		return "", false
	}
	return f.typ, true
}

func (f *flag) result(v int, reason Reason) Result {
	return Result{Value: f.variants[v].value, Variant: f.variants[v].name, Reason: reason, Rule: -1, Position: -1}
}

func (f *flag) eval(ctx Context) Result {
	if !f.on {
		return f.result(f.off, ReasonDisabled)
	}
	if f.static {
		return f.result(f.fall.variant, ReasonStatic)
	}
	for _, p := range f.prereqs {
		r := p.flag.eval(ctx)
		if r.Reason == ReasonDisabled || r.Reason == ReasonPrerequisiteFailed || r.Reason == ReasonError ||
			r.Variant != p.flag.variants[p.variant].name {
			return f.result(f.off, ReasonPrerequisiteFailed)
		}
	}
	var ac *attrCache
	if f.cached {
		ac = new(attrCache) // on the stack: it does not escape
	}
	for i := range f.rules {
		r := &f.rules[i]
		if !r.matches(ctx, ac) {
			continue
		}
		res := f.serve(&r.serve, ctx, ReasonTargetingMatch)
		res.Rule, res.RuleID = i, r.id
		return res
	}
	return f.serve(&f.fall, ctx, ReasonDefault)
}

// serve resolves s: its variant with reason, or its rollout (SPLIT), or
// the default variant (DEFAULT) when the context cannot be bucketed.
func (f *flag) serve(s *serve, ctx Context, reason Reason) Result {
	if s.weights == nil {
		return f.result(s.variant, reason)
	}
	attr, ok := ctx[s.bucketBy]
	if !ok {
		return f.result(f.def, ReasonDefault)
	}
	pos, ok := positionOf(f.prefix, attr)
	if !ok {
		return f.result(f.def, ReasonDefault)
	}
	v := s.weights[len(s.weights)-1].variant
	for _, w := range s.weights {
		if pos < w.upTo {
			v = w.variant
			break
		}
	}
	res := f.result(v, ReasonSplit)
	res.Position = pos
	return res
}

// cacheMinRules and cacheAttrs bound when an evaluation caches attribute
// lookups: more rules than cacheMinRules reading at most cacheAttrs
// distinct attributes.
const (
	cacheMinRules = 4
	cacheAttrs    = 8
)

// attrCache holds one evaluation's attribute lookups and parsed versions,
// by index in flag.attrs.
type attrCache struct {
	vals     [cacheAttrs]any
	state    [cacheAttrs]uint8 // 0 not looked up, 1 present, 2 missing
	ver      [cacheAttrs]version
	verState [cacheAttrs]uint8 // 0 not parsed, 1 a version, 2 not one
}

// matches reports whether every clause matches; ac may be nil.
func (r *rule) matches(ctx Context, ac *attrCache) bool {
	for i := range r.clauses {
		if !r.clauses[i].matches(ctx, ac) {
			return false
		}
	}
	return true
}

func (c *clause) lookup(ctx Context, ac *attrCache) (any, bool) {
	if ac == nil {
		a, ok := ctx[c.attr]
		return a, ok && a != nil
	}
	switch ac.state[c.idx] {
	case 1:
		return ac.vals[c.idx], true
	case 2:
		return nil, false
	}
	a, ok := ctx[c.attr]
	if !ok || a == nil {
		ac.state[c.idx] = 2
		return nil, false
	}
	ac.vals[c.idx], ac.state[c.idx] = a, 1
	return a, true
}

func (c *clause) matches(ctx Context, ac *attrCache) bool {
	a, ok := c.lookup(ctx, ac)
	if !ok {
		return false // a missing attribute never matches, negated or not
	}
	for i := range c.values {
		if c.match(a, &c.values[i], ac) {
			return !c.negate
		}
	}
	return c.negate
}

// semver parses attribute a (a string) as a version, once per evaluation
// when ac is not nil.
func (c *clause) semver(a any, ac *attrCache) (version, bool) {
	if ac != nil {
		switch ac.verState[c.idx] {
		case 1:
			return ac.ver[c.idx], true
		case 2:
			return version{}, false
		}
	}
	s, ok := a.(string)
	var v version
	if ok {
		v, ok = parseVersion(s)
	}
	if ac != nil {
		ac.ver[c.idx], ac.verState[c.idx] = v, 2
		if ok {
			ac.verState[c.idx] = 1
		}
	}
	return v, ok
}

// match compares attribute a with one value; a type that does not suit the
// operator does not match.
func (c *clause) match(a any, v *value, ac *attrCache) bool {
	switch c.op {
	case OpIn:
		switch v.kind {
		case 's':
			s, ok := a.(string)
			return ok && s == v.str
		case 'b':
			b, ok := a.(bool)
			return ok && b == v.b
		default:
			n, ok := number(a)
			return ok && n == v.num
		}
	case OpStartsWith:
		s, ok := a.(string)
		return ok && strings.HasPrefix(s, v.str)
	case OpEndsWith:
		s, ok := a.(string)
		return ok && strings.HasSuffix(s, v.str)
	case OpContains:
		s, ok := a.(string)
		return ok && strings.Contains(s, v.str)
	case OpLt, OpLe, OpGt, OpGe:
		n, ok := number(a)
		if !ok {
			return false
		}
		switch c.op {
		case OpLt:
			return n < v.num
		case OpLe:
			return n <= v.num
		case OpGt:
			return n > v.num
		default:
			return n >= v.num
		}
	case OpSemverEq, OpSemverLt, OpSemverGt:
		sv, ok := c.semver(a, ac)
		if !ok {
			return false
		}
		cmp := compareVersions(sv, v.semver)
		switch c.op {
		case OpSemverEq:
			return cmp == 0
		case OpSemverLt:
			return cmp < 0
		default:
			return cmp > 0
		}
	}
	return false
}

// number reads a numeric attribute; strings are not numbers.
func number(a any) (float64, bool) {
	switch x := a.(type) {
	case float64:
		return x, true
	case int:
		return float64(x), true
	case int64:
		return float64(x), true
	case int32:
		return float64(x), true
	case int16:
		return float64(x), true
	case int8:
		return float64(x), true
	case uint:
		return float64(x), true
	case uint64:
		return float64(x), true
	case uint32:
		return float64(x), true
	case uint16:
		return float64(x), true
	case uint8:
		return float64(x), true
	case float32:
		return float64(x), true
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		return f, err == nil
	}
	return 0, false
}

// Bool evaluates a bool flag: def and an ERROR result (ErrorTypeMismatch)
// for a flag of another type, def for any other ERROR.
func (e *Evaluator) Bool(key string, ctx Context, def bool) (bool, Result) {
	return typedValue(e, key, ctx, TypeBool, def)
}

// String evaluates a string flag, like Bool.
func (e *Evaluator) String(key string, ctx Context, def string) (string, Result) {
	return typedValue(e, key, ctx, TypeString, def)
}

// Int evaluates an int flag, like Bool.
func (e *Evaluator) Int(key string, ctx Context, def int64) (int64, Result) {
	return typedValue(e, key, ctx, TypeInt, def)
}

// Float evaluates a float flag, like Bool.
func (e *Evaluator) Float(key string, ctx Context, def float64) (float64, Result) {
	return typedValue(e, key, ctx, TypeFloat, def)
}

// Object evaluates an object flag, like Bool. The map is shared: do not
// modify it.
func (e *Evaluator) Object(key string, ctx Context, def map[string]any) (map[string]any, Result) {
	return typedValue(e, key, ctx, TypeObject, def)
}

// typedValue is Bool, String, Int, Float and Object: the flag's value when
// it is a T (a flag of type t), else def.
func typedValue[T any](e *Evaluator, key string, ctx Context, t Type, def T) (T, Result) {
	r := e.typed(key, ctx, t)
	if v, ok := r.Value.(T); ok {
		return v, r
	}
	return def, r
}

func (e *Evaluator) typed(key string, ctx Context, t Type) Result {
	if e == nil {
		return Result{Reason: ReasonError, ErrorCode: ErrorNotReady, Rule: -1, Position: -1}
	}
	f := e.flags[key]
	if f == nil {
		return Result{Reason: ReasonError, ErrorCode: ErrorFlagNotFound, Rule: -1, Position: -1}
	}
	if f.typ != t {
		return Result{Reason: ReasonError, ErrorCode: ErrorTypeMismatch, Rule: -1, Position: -1}
	}
	return f.eval(ctx)
}
