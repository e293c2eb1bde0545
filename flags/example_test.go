package flags_test

import (
	"fmt"

	"github.com/cuecast/cuecast/flags"
)

func Example() {
	e, err := flags.Compile([]byte(`{"schema": "cuecast.flags/v1", "flags": {
	 "checkout-v2": {"type": "bool", "variants": {"on": true, "off": false}, "on": true,
	  "offVariant": "off", "defaultVariant": "off", "salt": "checkout-v2",
	  "rules": [{"id": "staff", "clauses": [{"attribute": "email", "op": "endsWith", "values": ["@example.com"]}], "variant": "on"}],
	  "fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 25000}, {"variant": "off", "weight": 75000}]}}}}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, ctx := range []flags.Context{
		{"targetingKey": "user-1", "email": "ann@example.com"},
		{"targetingKey": "user-1"},
		{"targetingKey": "user-2"},
		{},
	} {
		on, r := e.Bool("checkout-v2", ctx, false)
		fmt.Println(on, r.Variant, r.Reason, r.RuleID, r.Position)
	}
	// Output:
	// true on TARGETING_MATCH staff -1
	// false off SPLIT  64759
	// true on SPLIT  9543
	// false off DEFAULT  -1
}
