package integration_test

import (
	"context"
	"reflect"
	"testing"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags/openfeature"
	"github.com/cuecast/cuecast/schemas"
)

// specFlags are the flags of the OpenFeature specification's evaluation
// suite (appendix B, evaluation.feature), written in CUE against
// #FlagSet.
const specFlags = `
flags: {
	"boolean-flag": {type: "bool", variants: {on: true, off: false}, on: true, offVariant: "off", defaultVariant: "on"}
	"string-flag": {type: "string", variants: {greeting: "hi", parting: "bye"}, on: true, offVariant: "parting", defaultVariant: "greeting"}
	"integer-flag": {type: "int", variants: {one: 1, ten: 10}, on: true, offVariant: "one", defaultVariant: "ten"}
	"float-flag": {type: "float", variants: {tenth: 0.1, half: 0.5}, on: true, offVariant: "tenth", defaultVariant: "half"}
	"object-flag": {type: "object", on: true, offVariant: "empty", defaultVariant: "template"
		variants: {empty: {}, template: {showImages: true, title: "Check out these pics!", imagesPerPage: 100}}}
	"context-aware": {type: "string", variants: {internal: "INTERNAL", external: "EXTERNAL"}, on: true, offVariant: "external", defaultVariant: "external"
		rules: [{clauses: [
			{attribute: "fn", op: "in", values: ["Sulisław"]},
			{attribute: "ln", op: "in", values: ["Świętopełk"]},
			{attribute: "age", op: "in", values: [29]},
			{attribute: "customer", op: "in", values: [false]},
		], variant: "internal"}]}
	"wrong-flag": {type: "string", variants: {one: "uno", two: "dos"}, on: true, offVariant: "two", defaultVariant: "one"}
}`

// TestSpecEvaluation runs the scenarios of the OpenFeature specification's
// evaluation suite (evaluation.feature) through the SDK's client, with the
// suite's flags in CUE, published and deployed like any config. The
// scenarios are written as Go here; running the .feature file itself with
// godog is not done (docs/FLAGS.md).
func TestSpecEvaluation(t *testing.T) {
	ctx := cuecontext.New()
	pkg := ctx.CompileBytes(schemas.Files()["flags.cue"])
	v := pkg.LookupPath(cue.ParsePath("#FlagSet")).Unify(ctx.CompileString(specFlags))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		t.Fatalf("the suite's flags in CUE: %v", err)
	}
	content, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.ship(1, string(content))
	p, err := openfeature.New(e.srv.Connect(t, client.ConnectOptions()...), openfeature.Options{Config: cfg,
		Client: []client.Option{client.WithTrustedKeys(e.pub), client.WithInstance("spec")}})
	if err != nil {
		t.Fatal(err)
	}
	api := isolated.NewAPI()
	t.Cleanup(func() { _ = api.Shutdown(context.Background()) })
	sctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	// Background: a stable provider.
	if err := api.SetProviderAndWait(sctx, p); err != nil {
		t.Fatalf("SetProviderAndWait: %v", err)
	}
	c := api.NewClient()
	bg := t.Context()
	none := of.EvaluationContext{}
	object := map[string]any{"showImages": true, "title": "Check out these pics!", "imagesPerPage": float64(100)}

	t.Run("Resolves boolean value", func(t *testing.T) {
		if v, err := c.BooleanValue(bg, "boolean-flag", false, none); err != nil || !v {
			t.Errorf("got %v, %v; want true", v, err)
		}
	})
	t.Run("Resolves string value", func(t *testing.T) {
		if v, err := c.StringValue(bg, "string-flag", "bye", none); err != nil || v != "hi" {
			t.Errorf("got %q, %v; want hi", v, err)
		}
	})
	t.Run("Resolves integer value", func(t *testing.T) {
		if v, err := c.IntValue(bg, "integer-flag", 1, none); err != nil || v != 10 {
			t.Errorf("got %d, %v; want 10", v, err)
		}
	})
	t.Run("Resolves float value", func(t *testing.T) {
		if v, err := c.FloatValue(bg, "float-flag", 0.1, none); err != nil || v != 0.5 {
			t.Errorf("got %v, %v; want 0.5", v, err)
		}
	})
	t.Run("Resolves object value", func(t *testing.T) {
		if v, err := c.ObjectValue(bg, "object-flag", nil, none); err != nil || !reflect.DeepEqual(v, object) {
			t.Errorf("got %v, %v; want %v", v, err, object)
		}
	})
	details := func(t *testing.T, d of.EvaluationDetails, variant string, reason of.Reason) {
		t.Helper()
		if d.Variant != variant || d.Reason != reason {
			t.Errorf("variant %q reason %s, want %q %s", d.Variant, d.Reason, variant, reason)
		}
	}
	t.Run("Resolves boolean details", func(t *testing.T) {
		d, err := c.BooleanValueDetails(bg, "boolean-flag", false, none)
		if err != nil || !d.Value {
			t.Errorf("got %v, %v; want true", d.Value, err)
		}
		details(t, d.EvaluationDetails, "on", of.StaticReason)
	})
	t.Run("Resolves string details", func(t *testing.T) {
		d, err := c.StringValueDetails(bg, "string-flag", "bye", none)
		if err != nil || d.Value != "hi" {
			t.Errorf("got %q, %v; want hi", d.Value, err)
		}
		details(t, d.EvaluationDetails, "greeting", of.StaticReason)
	})
	t.Run("Resolves integer details", func(t *testing.T) {
		d, err := c.IntValueDetails(bg, "integer-flag", 1, none)
		if err != nil || d.Value != 10 {
			t.Errorf("got %d, %v; want 10", d.Value, err)
		}
		details(t, d.EvaluationDetails, "ten", of.StaticReason)
	})
	t.Run("Resolves float details", func(t *testing.T) {
		d, err := c.FloatValueDetails(bg, "float-flag", 0.1, none)
		if err != nil || d.Value != 0.5 {
			t.Errorf("got %v, %v; want 0.5", d.Value, err)
		}
		details(t, d.EvaluationDetails, "half", of.StaticReason)
	})
	t.Run("Resolves object details", func(t *testing.T) {
		d, err := c.ObjectValueDetails(bg, "object-flag", nil, none)
		if err != nil || !reflect.DeepEqual(d.Value, object) {
			t.Errorf("got %v, %v; want %v", d.Value, err, object)
		}
		details(t, d.EvaluationDetails, "template", of.StaticReason)
	})
	t.Run("Resolves based on context", func(t *testing.T) {
		ec := of.NewTargetlessEvaluationContext(map[string]any{"fn": "Sulisław", "ln": "Świętopełk", "age": int64(29), "customer": false})
		if v, err := c.StringValue(bg, "context-aware", "EXTERNAL", ec); err != nil || v != "INTERNAL" {
			t.Errorf("got %q, %v; want INTERNAL", v, err)
		}
		if v, err := c.StringValue(bg, "context-aware", "EXTERNAL", none); err != nil || v != "EXTERNAL" {
			t.Errorf("empty context: got %q, %v; want EXTERNAL", v, err)
		}
	})
	t.Run("Flag not found", func(t *testing.T) {
		d, err := c.StringValueDetails(bg, "missing-flag", "uh-oh", none)
		if err == nil || d.Value != "uh-oh" || d.Reason != of.ErrorReason || d.ErrorCode != of.FlagNotFoundCode {
			t.Errorf("got %+v, %v; want the default, ERROR, FLAG_NOT_FOUND", d, err)
		}
	})
	t.Run("Type error", func(t *testing.T) {
		d, err := c.IntValueDetails(bg, "wrong-flag", 13, none)
		if err == nil || d.Value != 13 || d.Reason != of.ErrorReason || d.ErrorCode != of.TypeMismatchCode {
			t.Errorf("got %+v, %v; want the default, ERROR, TYPE_MISMATCH", d, err)
		}
	})
}
