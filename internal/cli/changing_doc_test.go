package cli_test

import (
	"testing"
)

// TestChangingDoc runs docs/CHANGING.md's example as written: its ```sh
// lines, in order, in one bash with this tree's cuecast on PATH. The only
// harness line is the doc's precondition, $CUECAST_SRC naming a clone of
// cuecast (this tree). The checks are what the doc's prose after the
// example promises: the origin of each value, the commits' subjects and
// trailers, and the stale writer's refusal naming the current value.
func TestChangingDoc(t *testing.T) {
	t.Parallel()
	script := guideScript(t, "CHANGING.md")
	script = "set -eu\nset -x\nexport CUECAST_SRC=\"$CUECAST_TREE\"\n" + script
	runDocScript(t, "changing", script,
		"stdout 'new-checkout.*20000 -> 50000  \\(literal at growth/flags/flags.cue:'\n"+
			"stdout 'payments/checkout currency: \"EUR\" -> \"USD\"  \\(literal at payments/checkout/checkout.cue:19:19\\)'\n"+
			"stderr 'currency is \"USD\", not \"EUR\" as expected'\n"+
			"stdout 'refused with exit 5'\n"+
			"stdout '^payments/checkout: set currency to \"USD\"$'\n"+
			"stdout '^growth/flags: new-checkout rollout to 50% of users$'\n"+
			"stdout '^the example configs$'\n"+
			"stdout '^US launch$'\n"+
			"stdout '^Cuecast-Mutator: cuecast set$'\n"+
			"! stdout 'UK launch'\n")
}
