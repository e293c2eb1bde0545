package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"strconv"
	"testing"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/cuecontext"
	"github.com/cucumber/godog"
	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/cuecast/cuecast/schemas"
)

// TestSpecEvaluation runs testdata/evaluation.feature, the scenarios of
// the OpenFeature specification's flag evaluation suite, with godog: each
// scenario is a subtest named after it, evaluated through the SDK's client
// and this provider, with the suite's flags in CUE
// (testdata/evaluation-flags.cue) published and deployed like any config.
// A step that is undefined or pending fails its scenario (Strict).
func TestSpecEvaluation(t *testing.T) {
	content := suiteFlags(t)
	e := newEnv(t)
	e.ship(1, content)
	_, api, err := e.start("spec")
	if err != nil {
		t.Fatalf("SetProviderAndWait: %v", err)
	}
	runSpecSuite(t, goClient{api.NewClient()})
}

// suiteFlags is testdata/evaluation-flags.cue unified with #FlagSet, as
// the compiled JSON of a flag set config.
func suiteFlags(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile("testdata/evaluation-flags.cue")
	if err != nil {
		t.Fatal(err)
	}
	ctx := cuecontext.New()
	pkg := ctx.CompileBytes(schemas.Files()["flags.cue"])
	v := pkg.LookupPath(cue.ParsePath("#FlagSet")).Unify(ctx.CompileBytes(src, cue.Filename("evaluation-flags.cue")))
	if err := v.Validate(cue.Concrete(true)); err != nil {
		t.Fatalf("the suite's flags in CUE: %v", err)
	}
	content, err := v.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(content)
}

// runSpecSuite runs testdata/evaluation.feature through ev.
func runSpecSuite(t *testing.T, ev evaluator) {

	var out io.Writer = io.Discard
	if testing.Verbose() {
		out = os.Stdout
	}
	suite := godog.TestSuite{
		Name:                "openfeature-evaluation",
		ScenarioInitializer: func(sc *godog.ScenarioContext) { (&scenario{provided: ev}).steps(sc) },
		Options: &godog.Options{
			Format:   "pretty",
			Output:   out,
			Paths:    []string{"testdata/evaluation.feature"},
			TestingT: t,
			Strict:   true, NoColors: true,
		},
	}
	if suite.Run() != 0 {
		t.Fatal("the evaluation suite failed (the failing scenarios are the subtests above)")
	}
}

// evaluator is what the steps evaluate through: the Go SDK's client with
// cuecast's provider (goClient), or another language's SDK with its OFREP
// provider (ofrep_test.go).
type evaluator interface {
	// ready says why the provider is not ready, nil when it is.
	ready() error
	// evaluate evaluates flag with details as kind (boolean, string,
	// integer, float or object) with default def, and returns the value as
	// the Go SDK's client types it (bool, string, int64, float64, any).
	evaluate(kind, flag string, def any, ec of.EvaluationContext) (any, of.EvaluationDetails, error)
}

// goClient evaluates through the Go SDK's client.
type goClient struct{ c *of.Client }

func (g goClient) ready() error {
	if st := g.c.State(); st != of.ReadyState {
		return fmt.Errorf("provider state %s, want %s", st, of.ReadyState)
	}
	return nil
}

func (g goClient) evaluate(kind, flag string, def any, ec of.EvaluationContext) (any, of.EvaluationDetails, error) {
	ctx := context.Background()
	switch kind {
	case "boolean":
		r, err := g.c.BooleanValueDetails(ctx, flag, def.(bool), ec)
		return r.Value, r.EvaluationDetails, err
	case "string":
		r, err := g.c.StringValueDetails(ctx, flag, def.(string), ec)
		return r.Value, r.EvaluationDetails, err
	case "integer":
		r, err := g.c.IntValueDetails(ctx, flag, def.(int64), ec)
		return r.Value, r.EvaluationDetails, err
	case "float":
		r, err := g.c.FloatValueDetails(ctx, flag, def.(float64), ec)
		return r.Value, r.EvaluationDetails, err
	default:
		r, err := g.c.ObjectValueDetails(ctx, flag, def, ec)
		return r.Value, r.EvaluationDetails, err
	}
}

// scenario is one scenario's state: the client of its Background, the
// context and flag its When steps evaluate, and what they got.
type scenario struct {
	provided evaluator // the suite's, ready
	c        evaluator // set by "a stable provider"
	evalCtx  of.EvaluationContext
	flag     string
	def      any
	value    any
	details  of.EvaluationDetails
	err      error
}

func (s *scenario) steps(sc *godog.ScenarioContext) {
	sc.Given(`^a stable provider$`, s.stableProvider)

	// Values.
	sc.When(`^a boolean flag with key "([^"]*)" is evaluated with default value "(true|false)"$`, s.evalBool)
	sc.When(`^a string flag with key "([^"]*)" is evaluated with default value "([^"]*)"$`, s.evalString)
	sc.When(`^an integer flag with key "([^"]*)" is evaluated with default value (-?\d+)$`, s.evalInt)
	sc.When(`^a float flag with key "([^"]*)" is evaluated with default value (-?\d+(?:\.\d+)?)$`, s.evalFloat)
	sc.When(`^an object flag with key "([^"]*)" is evaluated with a null default value$`, s.evalObject)
	sc.Then(`^the resolved boolean value should be "(true|false)"$`, func(want string) error {
		b, err := strconv.ParseBool(want)
		if err != nil {
			return err
		}
		return s.resolved(b)
	})
	sc.Then(`^the resolved string value should be "([^"]*)"$`, func(want string) error { return s.resolved(want) })
	sc.Then(`^the resolved integer value should be (-?\d+)$`, func(want int64) error { return s.resolved(want) })
	sc.Then(`^the resolved float value should be (-?\d+(?:\.\d+)?)$`, func(want float64) error { return s.resolved(want) })
	sc.Then(`^the resolved object value should be contain fields "([^"]*)", "([^"]*)", and "([^"]*)", with values "([^"]*)", "([^"]*)" and (\d+), respectively$`, s.resolvedObject)

	// Details.
	sc.When(`^a boolean flag with key "([^"]*)" is evaluated with details and default value "(true|false)"$`, s.evalBool)
	sc.When(`^a string flag with key "([^"]*)" is evaluated with details and default value "([^"]*)"$`, s.evalString)
	sc.When(`^an integer flag with key "([^"]*)" is evaluated with details and default value (-?\d+)$`, s.evalInt)
	sc.When(`^a float flag with key "([^"]*)" is evaluated with details and default value (-?\d+(?:\.\d+)?)$`, s.evalFloat)
	sc.When(`^an object flag with key "([^"]*)" is evaluated with details and a null default value$`, s.evalObject)
	sc.Then(`^the resolved boolean details value should be "(true|false)", the variant should be "([^"]*)", and the reason should be "([^"]*)"$`, func(want, variant, reason string) error {
		b, err := strconv.ParseBool(want)
		if err != nil {
			return err
		}
		return errors.Join(s.resolved(b), s.variantReason(variant, reason))
	})
	sc.Then(`^the resolved string details value should be "([^"]*)", the variant should be "([^"]*)", and the reason should be "([^"]*)"$`, func(want, variant, reason string) error {
		return errors.Join(s.resolved(want), s.variantReason(variant, reason))
	})
	sc.Then(`^the resolved integer details value should be (-?\d+), the variant should be "([^"]*)", and the reason should be "([^"]*)"$`, func(want int64, variant, reason string) error {
		return errors.Join(s.resolved(want), s.variantReason(variant, reason))
	})
	sc.Then(`^the resolved float details value should be (-?\d+(?:\.\d+)?), the variant should be "([^"]*)", and the reason should be "([^"]*)"$`, func(want float64, variant, reason string) error {
		return errors.Join(s.resolved(want), s.variantReason(variant, reason))
	})
	sc.Then(`^the resolved object details value should be contain fields "([^"]*)", "([^"]*)", and "([^"]*)", with values "([^"]*)", "([^"]*)" and (\d+), respectively$`, s.resolvedObject)
	sc.Then(`^the variant should be "([^"]*)", and the reason should be "([^"]*)"$`, s.variantReason)

	// Targeting.
	sc.When(`^context contains keys "([^"]*)", "([^"]*)", "([^"]*)", "([^"]*)" with values "([^"]*)", "([^"]*)", (\d+), "([^"]*)"$`, func(k1, k2, k3, k4, v1, v2 string, v3 int64, v4 string) {
		s.evalCtx = of.NewTargetlessEvaluationContext(map[string]any{k1: quoted(v1), k2: quoted(v2), k3: v3, k4: quoted(v4)})
	})
	sc.When(`^a flag with key "([^"]*)" is evaluated with default value "([^"]*)"$`, func(flag, def string) {
		s.eval("string", flag, def)
	})
	sc.Then(`^the resolved string response should be "([^"]*)"$`, func(want string) error { return s.resolved(want) })
	sc.Then(`^the resolved flag value is "([^"]*)" when the context is empty$`, func(want string) error {
		got, _, err := s.client().evaluate("string", s.flag, s.def, of.EvaluationContext{})
		if err != nil || got != want {
			return fmt.Errorf("%s with an empty context: %q, %v; want %q", s.flag, got, err, want)
		}
		return nil
	})

	// Errors.
	sc.When(`^a non-existent string flag with key "([^"]*)" is evaluated with details and a default value "([^"]*)"$`, s.evalString)
	sc.When(`^a string flag with key "([^"]*)" is evaluated as an integer, with details and a default value (\d+)$`, s.evalInt)
	sc.Then(`^the default string value should be returned$`, s.defaultReturned)
	sc.Then(`^the default integer value should be returned$`, s.defaultReturned)
	sc.Then(`^the reason should indicate an error and the error code should indicate a missing flag with "([^"]*)"$`, s.errorCode)
	sc.Then(`^the reason should indicate an error and the error code should indicate a type mismatch with "([^"]*)"$`, s.errorCode)
}

func (s *scenario) stableProvider() error {
	if err := s.provided.ready(); err != nil {
		return err
	}
	s.c = s.provided
	return nil
}

// client is the Background's client; a step before it fails the scenario
// on a nil client rather than evaluating elsewhere.
func (s *scenario) client() evaluator {
	if s.c == nil {
		panic("no provider: the Background did not run")
	}
	return s.c
}

// eval evaluates flag as kind with default def in the scenario's context
// and keeps what it got.
func (s *scenario) eval(kind, flag string, def any) {
	s.flag, s.def = flag, def
	s.value, s.details, s.err = s.client().evaluate(kind, flag, def, s.evalCtx)
}

// evalBool and the others are the evaluation steps of each type, the same
// with and without details (the client returns both every time).
func (s *scenario) evalBool(flag, def string) error {
	d, err := strconv.ParseBool(def)
	if err != nil {
		return err
	}
	s.eval("boolean", flag, d)
	return nil
}

func (s *scenario) evalString(flag, def string) { s.eval("string", flag, def) }

func (s *scenario) evalInt(flag string, def int64) { s.eval("integer", flag, def) }

func (s *scenario) evalFloat(flag string, def float64) { s.eval("float", flag, def) }

func (s *scenario) evalObject(flag string) { s.eval("object", flag, nil) }

// resolved checks the value, of the Go type the client returns, and that
// the evaluation did not fail.
func (s *scenario) resolved(want any) error {
	if s.err != nil {
		return fmt.Errorf("%s: %w", s.flag, s.err)
	}
	if s.value != want {
		return fmt.Errorf("%s: %#v, want %#v", s.flag, s.value, want)
	}
	return nil
}

// resolvedObject checks three fields of an object value: a bool given as
// "true" or "false", a string, a number.
func (s *scenario) resolvedObject(k1, k2, k3, v1, v2 string, v3 int) error {
	if s.err != nil {
		return fmt.Errorf("%s: %w", s.flag, s.err)
	}
	b, err := strconv.ParseBool(v1)
	if err != nil {
		return err
	}
	want := map[string]any{k1: b, k2: v2, k3: float64(v3)}
	if !reflect.DeepEqual(s.value, want) {
		return fmt.Errorf("%s: %#v, want %#v", s.flag, s.value, want)
	}
	return nil
}

func (s *scenario) variantReason(variant, reason string) error {
	if s.details.Variant != variant || string(s.details.Reason) != reason {
		return fmt.Errorf("%s: variant %q reason %s, want %q %s", s.flag, s.details.Variant, s.details.Reason, variant, reason)
	}
	return nil
}

func (s *scenario) defaultReturned() error {
	if s.value != s.def {
		return fmt.Errorf("%s: %#v, want the default %#v", s.flag, s.value, s.def)
	}
	return nil
}

// errorCode checks an evaluation that failed with code: reason ERROR, the
// code in the details and an error from the client.
func (s *scenario) errorCode(code string) error {
	if s.err == nil || s.details.Reason != of.ErrorReason || string(s.details.ErrorCode) != code {
		return fmt.Errorf("%s: reason %s code %s error %v; want ERROR %s and an error", s.flag, s.details.Reason, s.details.ErrorCode, s.err, code)
	}
	return nil
}

// quoted is a context value given quoted in a step: "true" and "false"
// are bools, anything else a string.
func quoted(v string) any {
	if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
		return b
	}
	return v
}
