package ci

import "testing"

// TestFlagSchemaField: Diff's paths into a flag set, each form of step.
func TestFlagSchemaField(t *testing.T) {
	for path, want := range map[string]bool{
		`flags["checkout-v2"].reshuffle`:                       true,
		`flags.f.fallthrough.rollout.bucketBy`:                 true,
		`flags.f.rules[id="beta"].rollout.bucketBy`:            true,
		`flags.f.rules[id="a]b"].variant`:                      true,
		`flags.f.rules[2].clauses[0].negate`:                   true,
		`flags.f.rules[2].id`:                                  true,
		`flags.f.prerequisites[flag="g"].variant`:              true,
		`flags.f.variants.v2`:                                  true,
		`flags.f.variants["v1.2"]`:                             true,
		`flags.newflag`:                                        true,
		`flags.f.variants.dark.contrast`:                       false,
		`flags.f.rules[0].clauses[0].values[1].x`:              false,
		`flags.f.unknown`:                                      false,
		`flags.f.rules.id`:                                     false,
		`flags.f.fallthrough.rollout.weights[0].variant.extra`: false,
		`flags.f.rules[id="x`:                                  false,
	} {
		if got := flagSchemaField(path); got != want {
			t.Errorf("flagSchemaField(%s) = %v, want %v", path, got, want)
		}
	}
}
