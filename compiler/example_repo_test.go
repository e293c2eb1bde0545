package compiler_test

import (
	"context"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// TestExampleRepoCompiles: the example repo shipped with cuecast (and used
// by `make demo`) compiles cleanly, every config produces valid JSON, and the
// manifest decodes into the policy the rollout controller will use.
func TestExampleRepoCompiles(t *testing.T) {
	res, err := compiler.Compile(context.Background(), "../configs-example", compiler.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range res.Errors {
		t.Errorf("%v", e)
	}
	want := []cuecast.ConfigPath{"growth/flags", "payments/checkout", "payments/fraud-rules", "payments/refunds", "search/indexer", "search/new-ui-flag", "search/ranking", "search/suggest"}
	if !reflect.DeepEqual(res.Configs, want) {
		t.Errorf("configs %v, want %v", res.Configs, want)
	}
	var outputs []cuecast.ConfigPath
	for _, cp := range want {
		o, ok := res.Outputs[cp]
		if !ok {
			t.Errorf("%s: no output", cp)
			continue
		}
		if ix, ok := cuecast.ParseVariantIndex(o.JSON); ok {
			outputs = append(outputs, ix.Variants...)
		} else {
			outputs = append(outputs, cp)
		}
	}
	// search/suggest reads env and region: four variants, the
	// layering idiom of docs/VARIANTS.md.
	ix, ok := cuecast.ParseVariantIndex(res.Outputs["search/suggest"].JSON)
	wantVariants := []cuecast.ConfigPath{"search/suggest/env=prod/region=eu", "search/suggest/env=prod/region=us",
		"search/suggest/env=staging/region=eu", "search/suggest/env=staging/region=us"}
	if !ok || !reflect.DeepEqual(ix.Variants, wantVariants) || !reflect.DeepEqual(ix.Dimensions, []string{"env", "region"}) {
		t.Errorf("variant index of search/suggest: %s", res.Outputs["search/suggest"].JSON)
	}
	for vp, want := range map[cuecast.ConfigPath]string{
		"search/suggest/env=prod/region=eu":    `"owner":"team-search","region":"eu","settings":{"data_residency":"eu-only","env":"prod","max_suggestions":8,"read_timeout":"1s","replicas":6,"shards":["eu-1","eu-2"]}}`,
		"search/suggest/env=staging/region=us": `"owner":"team-search","region":"us","settings":{"data_residency":"none","env":"staging","max_suggestions":10,"read_timeout":"5s","replicas":1,"shards":["default"]}}`,
	} {
		if got := string(res.Outputs[vp].JSON); !strings.HasSuffix(got, want) {
			t.Errorf("%s:\n got %s\nwant …%s", vp, got, want)
		}
	}
	for _, cp := range outputs {
		o := res.Outputs[cp]
		var doc map[string]any
		if err := json.Unmarshal(o.JSON, &doc); err != nil {
			t.Errorf("%s: %v", cp, err)
		}
		if cp.Namespace() != "growth" && (doc["owner"] == nil || doc["env"] == nil) { // growth holds flag sets (#FlagSet)
			t.Errorf("%s: owner or env missing from %s", cp, o.JSON)
		}
	}
	pay := res.Manifest.Namespaces["payments"]
	wantPolicy := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, MinInstances: 2, Hold: cuecast.Duration(5 * time.Minute)},
		{Name: "early", Percent: 10, Hold: cuecast.Duration(10 * time.Minute), MaxUnhealthy: 0.05, MaxApplyFailures: 0.01},
		{Name: "all", Percent: 100},
	}}
	if !reflect.DeepEqual(pay.Policy, wantPolicy) {
		t.Errorf("payments policy %+v, want %+v", pay.Policy, wantPolicy)
	}
	if pay.Consistency != cuecast.Strict || pay.MaxSize != 262144 || pay.Schema != "example.com/configs/schemas#Payments" || len(pay.Owners) != 2 {
		t.Errorf("payments namespace %+v", pay)
	}
	if s := res.Manifest.Namespaces["search"]; s.Consistency != cuecast.Relaxed || s.MaxSize != compiler.DefaultMaxSize || s.Policy.Stages[0].Instances[0] != "search-canary-1" {
		t.Errorf("search namespace %+v", s)
	}
}

// TestPlanOnly: a plan finds every config and the same dependency index as a
// full compile, and evaluates nothing.
func TestPlanOnly(t *testing.T) {
	ctx := context.Background()
	full, err := compiler.Compile(ctx, "../configs-example", compiler.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	plan, err := compiler.Compile(ctx, "../configs-example", compiler.Options{Logger: testLogger(t), PlanOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Outputs) != 0 || len(plan.Errors) != 0 || plan.Manifest == nil {
		t.Fatalf("plan: %d outputs, errors %v, manifest %v; want no outputs, no errors, the manifest", len(plan.Outputs), plan.Errors, plan.Manifest != nil)
	}
	if !reflect.DeepEqual(plan.Configs, full.Configs) {
		t.Errorf("plan configs %v, want %v", plan.Configs, full.Configs)
	}
	for _, changed := range [][]string{
		{"lib/service/service.cue"},
		{"lib/net/net.cue"},
		{"schemas/payments.cue"},
		{"payments/checkout/checkout.cue"},
		{"search/ranking/new.cue"},
		{"cuecast.cue"},
		{"README.md"},
	} {
		if got, want := plan.Index.Affected(changed), full.Index.Affected(changed); !reflect.DeepEqual(got, want) {
			t.Errorf("Affected(%v): plan %v, full compile %v", changed, got, want)
		}
	}
}
