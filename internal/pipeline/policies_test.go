package pipeline_test

import (
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
)

func TestManifestPolicies(t *testing.T) {
	repo := gittest.New(t)
	first := repo.CommitFiles("manifest", map[string]string{
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
		p, cons, err := pol.Policy(t.Context(), cuecast.Version{Config: tc.cfg, Version: 1, Commit: first})
		if err != nil {
			t.Fatalf("Policy(%s): %v", tc.cfg, err)
		}
		var got []string
		for _, s := range p.Stages {
			got = append(got, s.Name)
		}
		if string(cons) != tc.cons || len(got) != len(tc.stages) || got[0] != tc.stages[0] {
			t.Errorf("%s: got %v %s, want %v %s", tc.cfg, got, cons, tc.stages, tc.cons)
		}
	}

	// A commit with another policy: its versions roll out under it, older
	// versions keep the policy of their own commit.
	second := repo.CommitFiles("faster canary", map[string]string{"cuecast.cue": `package manifest

namespaces: payments: {
	owners: ["team-payments"]
	rollout: stages: [{name: "fast", percent: 100}]
}
namespaces: search: owners: ["team-search"]
`})
	for _, tc := range []struct {
		name   string
		commit string
		stage  string
		cons   string
	}{
		{"version of the new commit", second, "fast", "relaxed"},
		{"version of the old commit", first, "canary", "strict"},
		{"version without a commit: the tip", "", "fast", "relaxed"},
	} {
		p, cons, err := pol.Policy(t.Context(), cuecast.Version{Config: "payments/checkout", Version: 2, Commit: tc.commit})
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if string(cons) != tc.cons || p.Stages[0].Name != tc.stage {
			t.Errorf("%s: got %v %s, want %s %s", tc.name, p.Stages, cons, tc.stage, tc.cons)
		}
	}
	if _, _, err := pol.Policy(t.Context(), cuecast.Version{Config: "payments/checkout", Commit: "0123456789012345678901234567890123456789"}); err == nil {
		t.Error("a commit the repository does not have: got no error")
	}
}
