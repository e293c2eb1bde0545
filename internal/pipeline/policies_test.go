package pipeline_test

import (
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
)

func TestManifestPolicies(t *testing.T) {
	repo := gittest.New(t)
	repo.CommitFiles("manifest", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue": `package manifest

namespaces: payments: {
	owners: ["team-payments"]
	rollout: stages: [
		{name: "canary", percent: 1, hold: "5m"},
		{name: "all", percent: 100},
	]
	configs: checkout: consistency: "strict"
	configs: "eu/fees": rollout: stages: [{name: "hosts", instances: ["fees-canary-1"], hold: "1m"}, {name: "all", percent: 100}]
}
namespaces: search: owners: ["team-search"]
`,
	})
	pol := pipeline.ManifestPolicies(repo.Dir, "main", t.TempDir())
	for _, tc := range []struct {
		cfg    cuecast.ConfigPath
		stages []string
		cons   string
	}{
		{"payments/checkout", []string{"canary", "all"}, "strict"},
		{"payments/refunds", []string{"canary", "all"}, "relaxed"},
		{"payments/eu/fees", []string{"hosts", "all"}, "relaxed"},
		{"search/ranking", []string{"all"}, "relaxed"},
	} {
		p, cons, err := pol.Policy(t.Context(), tc.cfg)
		if err != nil {
			t.Fatalf("Policy(%s): %v", tc.cfg, err)
		}
		var got []string
		for _, s := range p.Stages {
			got = append(got, s.Name)
		}
		if cons != tc.cons || len(got) != len(tc.stages) || got[0] != tc.stages[0] {
			t.Errorf("%s: got %v %s, want %v %s", tc.cfg, got, cons, tc.stages, tc.cons)
		}
	}

	// A new tip with another policy is read again.
	repo.CommitFiles("faster canary", map[string]string{"cuecast.cue": `package manifest

namespaces: payments: {
	owners: ["team-payments"]
	rollout: stages: [{name: "fast", percent: 100}]
}
namespaces: search: owners: ["team-search"]
`})
	p, cons, err := pol.Policy(t.Context(), "payments/checkout")
	if err != nil {
		t.Fatal(err)
	}
	if cons != "relaxed" || p.Stages[0].Name != "fast" {
		t.Errorf("after the manifest changed: got %v %s, want fast relaxed", p.Stages, cons)
	}
}
