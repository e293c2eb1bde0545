package flags_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags"
)

// TestDecodeIntoEvaluator: client.Typed decodes a flag set config straight
// into a compiled Evaluator, and refuses one that does not compile. (The
// watch itself, against a server, is tested in flags/openfeature.)
func TestDecodeIntoEvaluator(t *testing.T) {
	e, err := client.Decode[*flags.Evaluator]([]byte(benchSet))
	if err != nil {
		t.Fatal(err)
	}
	if r := e.Evaluate("rollout", flags.Context{"targetingKey": "user-2"}); r.Position != 9543 || r.Variant != "on" {
		t.Errorf("rollout for user-2: %+v, want on at 9543", r)
	}
	if _, err := client.Decode[*flags.Evaluator]([]byte(`{"schema": "cuecast.flags/v9", "flags": {}}`)); !errors.Is(err, flags.ErrUnsupportedSchema) {
		t.Errorf("Decode of schema v9: %v, want ErrUnsupportedSchema", err)
	}
	var nilEval *flags.Evaluator
	if r := nilEval.Evaluate("rollout", nil); r.Reason != flags.ReasonError || r.ErrorCode != flags.ErrorNotReady {
		t.Errorf("nil Evaluator: %+v, want ERROR PROVIDER_NOT_READY", r)
	}
	if on, r := nilEval.Bool("x", nil, true); !on || r.ErrorCode != flags.ErrorNotReady {
		t.Errorf("nil Evaluator Bool: %v %+v, want the default and PROVIDER_NOT_READY", on, r)
	}
}

func TestChanged(t *testing.T) {
	a, err := flags.Compile([]byte(`{"schema": "cuecast.flags/v1", "flags": {
	 "same": {"type": "bool", "variants": {"on": true}, "on": true, "offVariant": "on", "defaultVariant": "on", "salt": "s"},
	 "flip": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "on", "salt": "f"},
	 "gone": {"type": "bool", "variants": {"on": true}, "on": true, "offVariant": "on", "defaultVariant": "on", "salt": "g"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := flags.Compile([]byte(`{"schema": "cuecast.flags/v1", "flags": {
	 "same": {"type": "bool", "variants": {"on": true}, "on": true, "offVariant": "on", "defaultVariant": "on", "salt": "s"},
	 "flip": {"type": "bool", "variants": {"on": true, "off": false}, "on": false, "offVariant": "off", "defaultVariant": "on", "salt": "f"},
	 "new": {"type": "bool", "variants": {"on": true}, "on": true, "offVariant": "on", "defaultVariant": "on", "salt": "n"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := flags.Changed(a, b), []string{"flip", "gone", "new"}; !slices.Equal(got, want) {
		t.Errorf("Changed = %v, want %v", got, want)
	}
	if got, want := flags.Changed(nil, a), []string{"flip", "gone", "same"}; !slices.Equal(got, want) {
		t.Errorf("Changed(nil, a) = %v, want %v", got, want)
	}
}
