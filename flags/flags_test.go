package flags_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/flags"
)

// TestKnownVectors is the four bucketing vectors.
func TestKnownVectors(t *testing.T) {
	for _, c := range []struct {
		value string
		want  int
	}{{"user-1", 64759}, {"user-2", 9543}, {"héllo", 4028}, {"42", 48802}} {
		if got := flags.Position("checkout-v2", c.value); got != c.want {
			t.Errorf("Position(checkout-v2, %q) = %d, want %d", c.value, got, c.want)
		}
	}
	// Past the stack buffer, the same function.
	long := strings.Repeat("x", 500)
	if a, b := flags.Position("s", long), flags.Position("s", long); a != b || a < 0 || a >= flags.Whole {
		t.Errorf("Position of a long value: %d, %d", a, b)
	}
}

var benchSet = `{"schema": "cuecast.flags/v1", "flags": {
 "one-rule": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "one-rule",
  "rules": [{"clauses": [{"attribute": "country", "op": "in", "values": ["NL", "BE"]}], "variant": "on"}], "fallthrough": {"variant": "off"}},
 "rollout": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "checkout-v2",
  "fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 25000}, {"variant": "off", "weight": 75000}]}}},
 "string": {"type": "string", "variants": {"a": "A", "b": "B"}, "on": true, "offVariant": "a", "defaultVariant": "a", "salt": "s",
  "rules": [{"clauses": [{"attribute": "app", "op": "semverGt", "values": ["1.2.3-rc.1"]}, {"attribute": "email", "op": "endsWith", "values": ["@example.com"]}], "variant": "b"}]},
 "hundred": ` + hundred + `}}`

// hundred is a flag with 100 rules none of which match the bench context.
var hundred = func() string {
	var b strings.Builder
	b.WriteString(`{"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "h", "rules": [`)
	ops := []string{`"op": "in", "values": ["x%d", "y%d"]`, `"op": "startsWith", "values": ["p%d-", "q%d-"]`, `"op": "gt", "values": [%d, %d]`, `"op": "semverLt", "values": ["0.0.%d", "0.0.%d"]`}
	attrs := []string{"country", "email", "age", "app"}
	for i := range 100 {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `{"clauses": [{"attribute": %q, `+ops[i%4]+`}], "variant": "on"}`, attrs[i%4], i+1000, i+2000)
	}
	b.WriteString(`], "fallthrough": {"variant": "off"}}`)
	return b.String()
}()

func benchEvaluator(tb testing.TB) *flags.Evaluator {
	tb.Helper()
	e, err := flags.Compile([]byte(benchSet))
	if err != nil {
		tb.Fatal(err)
	}
	return e
}

var benchCtx = flags.Context{"targetingKey": "user-1", "country": "NL", "email": "ann@example.com", "age": 41, "app": "1.4.0"}

// TestZeroAllocs keeps the hot paths allocation-free: CI catches a
// regression here, the benchmarks measure speed.
func TestZeroAllocs(t *testing.T) {
	e := benchEvaluator(t)
	for _, key := range []string{"one-rule", "rollout", "string", "hundred", "missing"} {
		var r flags.Result
		if n := testing.AllocsPerRun(200, func() { r = e.Evaluate(key, benchCtx) }); n != 0 {
			t.Errorf("Evaluate(%s): %v allocations, want 0", key, n)
		}
		_ = r
	}
	if n := testing.AllocsPerRun(200, func() { e.Bool("one-rule", benchCtx, false) }); n != 0 {
		t.Errorf("Bool: %v allocations, want 0", n)
	}
	numCtx := flags.Context{"targetingKey": json.Number("42")}
	if n := testing.AllocsPerRun(200, func() { r := e.Evaluate("rollout", numCtx); _ = r }); n != 0 {
		t.Errorf("Evaluate(rollout) by a json.Number: %v allocations, want 0", n)
	}
	if n := testing.AllocsPerRun(200, func() { flags.Position("checkout-v2", "user-1") }); n != 0 {
		t.Errorf("Position: %v allocations, want 0", n)
	}
	if r := e.Evaluate("one-rule", benchCtx); r.Reason != flags.ReasonTargetingMatch {
		t.Errorf("one-rule: %s, want TARGETING_MATCH", r.Reason)
	}
	if r := e.Evaluate("rollout", benchCtx); r.Reason != flags.ReasonSplit || r.Position != 64759 || r.Variant != "off" {
		t.Errorf("rollout: %+v, want SPLIT at 64759, off", r)
	}
	if r := e.Evaluate("hundred", benchCtx); r.Reason != flags.ReasonDefault {
		t.Errorf("hundred: %+v, want DEFAULT", r)
	}
	if r := e.Evaluate("string", benchCtx); r.Variant != "b" {
		t.Errorf("string: %+v, want b", r)
	}
}

func BenchmarkEvaluate(b *testing.B) {
	e := benchEvaluator(b)
	for _, key := range []string{"one-rule", "rollout", "hundred"} {
		b.Run(key, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				e.Evaluate(key, benchCtx)
			}
		})
	}
}

// TestGoContextTypes: every type flags.Context documents (any Go integer
// or float, json.Number) buckets as the decimal of its integer value,
// exactly as that decimal string does, and a value that is no integer
// (nor an integral float within ±2^53) is not bucketed (DEFAULT). The CLI
// passes every --ctx number as a json.Number.
func TestGoContextTypes(t *testing.T) {
	e := benchEvaluator(t)
	for _, c := range []struct {
		key any
		dec string // "": cannot be bucketed
	}{
		{42, "42"}, {int8(42), "42"}, {int16(42), "42"}, {int32(42), "42"}, {int64(42), "42"},
		{uint(42), "42"}, {uint8(42), "42"}, {uint16(42), "42"}, {uint32(42), "42"}, {uint64(42), "42"},
		{float32(42), "42"}, {float64(42), "42"}, {json.Number("42"), "42"},
		{int8(-128), "-128"}, {uint8(255), "255"}, {int16(-32768), "-32768"}, {uint16(65535), "65535"},
		{json.Number("-7"), "-7"}, {json.Number("0"), "0"}, {json.Number("-0"), "0"}, {float64(math.Copysign(0, -1)), "0"},
		{json.Number("42.0"), "42"}, {json.Number("4.2e1"), "42"}, {json.Number("1E3"), "1000"},
		{uint64(math.MaxUint64), "18446744073709551615"}, {json.Number("18446744073709551615"), "18446744073709551615"},
		{int64(math.MinInt64), "-9223372036854775808"}, {json.Number("-9223372036854775808"), "-9223372036854775808"},
		{json.Number("9007199254740993"), "9007199254740993"}, {float64(1 << 53), "9007199254740992"},
		{json.Number("9007199254740992.0"), "9007199254740992"}, {float32(-(1 << 24)), "-16777216"},
		{float32(42.5), ""}, {json.Number("42.5"), ""}, {json.Number("9007199254740994.0"), ""},
		{json.Number("1e300"), ""}, {json.Number("18446744073709551616"), ""}, {json.Number("x"), ""},
		{json.Number(""), ""}, {float32(math.Inf(1)), ""}, {math.NaN(), ""}, {true, ""}, {nil, ""},
	} {
		r := e.Evaluate("rollout", flags.Context{"targetingKey": c.key})
		want := flags.Result{Reason: flags.ReasonDefault, Position: -1}
		if c.dec != "" {
			want = flags.Result{Reason: flags.ReasonSplit, Position: flags.Position("checkout-v2", c.dec)}
			if s := e.Evaluate("rollout", flags.Context{"targetingKey": c.dec}); s.Position != want.Position {
				t.Errorf("targetingKey %q: position %d, want %d", c.dec, s.Position, want.Position)
			}
		}
		if r.Reason != want.Reason || r.Position != want.Position {
			t.Errorf("targetingKey %T(%v): %s at %d, want %s at %d (as %q)", c.key, c.key, r.Reason, r.Position, want.Reason, want.Position, c.dec)
		}
	}
}

func TestValidateMessages(t *testing.T) {
	_, err := flags.Compile([]byte(`{"schema": "cuecast.flags/v1", "flags": {
	 "f": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "of", "salt": "f",
	  "fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 50}, {"variant": "off", "weight": 50}]}}},
	 "a": {"type": "bool", "variants": {"on": true}, "on": true, "offVariant": "on", "defaultVariant": "on", "salt": "a", "prerequisites": [{"flag": "b", "variant": "on"}]},
	 "b": {"type": "bool", "variants": {"on": true}, "on": true, "offVariant": "on", "defaultVariant": "on", "salt": "b", "prerequisites": [{"flag": "a", "variant": "on"}]}}}`))
	if !errors.Is(err, flags.ErrInvalid) {
		t.Fatalf("Compile: %v, want ErrInvalid", err)
	}
	for _, want := range []string{
		`flag "f": defaultVariant: no variant "of" (variants: off, on)`,
		`flag "f": fallthrough.rollout.weights: sum to 100, not 100000 (100%)`,
		`flag "b": prerequisites[0].flag: cycle: a -> b -> a`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("errors:\n%v\nwant a line %s", err, want)
		}
	}
}

// TestVariantAtAgreesWithEvaluate: the exported position rule is the one
// Evaluate applies, at every boundary of a three-way rollout.
func TestVariantAtAgreesWithEvaluate(t *testing.T) {
	w := []flags.Weight{{Variant: "a", Weight: 20000}, {Variant: "b", Weight: 30000}, {Variant: "c", Weight: 50000}}
	for pos, want := range map[int]string{0: "a", 19999: "a", 20000: "b", 49999: "b", 50000: "c", 99999: "c"} {
		if got := flags.VariantAt(w, pos); got != want {
			t.Errorf("VariantAt(%d) = %q, want %q", pos, got, want)
		}
	}
	e, err := flags.Compile([]byte(`{"schema": "cuecast.flags/v1", "flags": {"f": {"type": "string",
	 "variants": {"a": "a", "b": "b", "c": "c"}, "on": true, "offVariant": "a", "defaultVariant": "a", "salt": "f",
	 "fallthrough": {"rollout": {"weights": [{"variant": "a", "weight": 20000}, {"variant": "b", "weight": 30000}, {"variant": "c", "weight": 50000}]}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		r := e.Evaluate("f", flags.Context{"targetingKey": fmt.Sprintf("user-%d", i)})
		if got := flags.VariantAt(w, r.Position); got != r.Variant {
			t.Fatalf("user-%d at %d: Evaluate %q, VariantAt %q", i, r.Position, r.Variant, got)
		}
	}
}

// TestLongInputsDoNotAllocate: a salt and a targeting key of any length
// bucket without allocating and hash exactly salt + "." + value (one that
// did not fit a 128-byte buffer used to allocate its concatenation).
func TestLongInputsDoNotAllocate(t *testing.T) {
	salt := strings.Repeat("s", 150)
	e, err := flags.Compile([]byte(`{"schema": "cuecast.flags/v1", "flags": {
	 "long": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "` + salt + `",
	  "fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 50000}, {"variant": "off", "weight": 50000}]}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, 1, 55, 56, 63, 64, 115, 116, 117, 127, 128, 129, 300, 1000} {
		key := strings.Repeat("k", n)
		ctx := flags.Context{"targetingKey": key}
		want := referencePosition(salt + "." + key)
		if r := e.Evaluate("long", ctx); r.Position != want {
			t.Errorf("key of %d bytes: position %d, want %d", n, r.Position, want)
		}
		if got := flags.Position("checkout-v2", key); got != referencePosition("checkout-v2."+key) {
			t.Errorf("Position(checkout-v2, %d bytes) = %d, want %d", n, got, referencePosition("checkout-v2."+key))
		}
		if a := testing.AllocsPerRun(50, func() { e.Evaluate("long", ctx) }); a != 0 {
			t.Errorf("Evaluate with a %d-byte key and a 150-byte salt: %v allocations, want 0", n, a)
		}
		if a := testing.AllocsPerRun(50, func() { flags.Position(salt, key) }); a != 0 {
			t.Errorf("Position with a %d-byte key and a 150-byte salt: %v allocations, want 0", n, a)
		}
	}
	// Every length around a single padded SHA-256 block (55 bytes) and the
	// stack buffer (128), byte values of every kind.
	for n := 0; n <= 140; n++ {
		v := make([]byte, n)
		for i := range v {
			v[i] = byte(i*37 + n)
		}
		if got, want := flags.Position("s", string(v)), referencePosition("s."+string(v)); got != want {
			t.Errorf("Position(s, %d bytes) = %d, want %d", n, got, want)
		}
	}
	if r := e.Evaluate("long", flags.Context{"targetingKey": int64(-1234567890123)}); r.Position != referencePosition(salt+".-1234567890123") {
		t.Errorf("an integer key under a long salt: position %d, want %d", r.Position, referencePosition(salt+".-1234567890123"))
	}
}

// referencePosition is the bucketing rule written out plainly.
func referencePosition(s string) int {
	sum := sha256.Sum256([]byte(s))
	return int(uint64(binary.BigEndian.Uint32(sum[:4])) * flags.Whole >> 32)
}
