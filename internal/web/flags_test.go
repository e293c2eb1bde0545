package web

import (
	"reflect"
	"testing"
)

// TestFlagViews: a flag set version is described flag by flag (switch,
// rules in order with their clauses, the fallthrough's rollout as shares);
// any other content is not a flag set.
func TestFlagViews(t *testing.T) {
	got := flagViews([]byte(`{"schema": "cuecast.flags/v1", "flags": {
	 "new-checkout": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "n",
	  "prerequisites": [{"flag": "cart", "variant": "on"}],
	  "rules": [{"id": "staff", "clauses": [{"attribute": "email", "op": "endsWith", "values": ["@example.com"]}, {"attribute": "country", "op": "in", "values": ["NL", "BE"], "negate": true}], "variant": "on"},
	            {"clauses": [{"attribute": "plan", "op": "in", "values": ["pro"]}], "rollout": {"bucketBy": "org", "weights": [{"variant": "on", "weight": 12500}, {"variant": "off", "weight": 87500}]}}],
	  "fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 20000}, {"variant": "off", "weight": 80000}]}}},
	 "cart": {"type": "bool", "variants": {"on": true}, "on": false, "offVariant": "on", "defaultVariant": "on", "salt": "c"}}}`))
	want := []flagView{
		{Key: "cart", Type: "bool", On: false, OffVariant: "on", DefaultVariant: "on"},
		{Key: "new-checkout", Type: "bool", On: true, OffVariant: "off", DefaultVariant: "off",
			Prerequisites: []string{"cart is on"},
			Rules: []ruleView{
				{ID: "staff", When: `email endsWith "@example.com" and country not in "NL", "BE"`, Serves: "on"},
				{When: `plan in "pro"`, Serves: "on 12.5% · off 87.5% by org"},
			},
			Fallthrough: "on 20% · off 80%"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got  %+v\nwant %+v", got, want)
	}
	for _, body := range []string{`{"max_amount_minor": 5}`, `{"schema": "other/v1", "flags": {}}`, ``, `not json`} {
		if v := flagViews([]byte(body)); v != nil {
			t.Errorf("flagViews(%s) = %+v, want nil: not a flag set", body, v)
		}
	}
}
