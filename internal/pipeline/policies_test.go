package pipeline_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
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
	// Without the tailer's manifests, each distinct manifest is compiled
	// once, alone.
	compiled := 0
	pol := pipeline.ManifestPoliciesCounting(repo.Dir, "main", t.TempDir(), func(string) { compiled++ })
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
	if compiled != 2 {
		t.Errorf("manifest compiles: got %d, want 2 (one per distinct manifest)", compiled)
	}
}

// TestPolicyTravelsWithTheTailer: serve's rollout policies take the manifest
// the tailer compiled for each commit it publishes from: no commit's
// manifest is compiled a second time to deploy its versions (issue 21).
func TestPolicyTravelsWithTheTailer(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	manifest := `package manifest

namespaces: pay: {
	owners: ["team-pay"]
	rollout: stages: [{name: "canary", percent: 50, hold: "1h"}, {name: "all", percent: 100}]
}
`
	repo.CommitFiles("initial", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        manifest,
		"pay/a/a.cue":        "package a\n\nvalue: 0\n",
	})
	var mu sync.Mutex
	compiles := map[string]int{}
	data := t.TempDir()
	pol := pipeline.ManifestPoliciesCounting(repo.Dir, "main", data, func(commit string) {
		mu.Lock()
		defer mu.Unlock()
		compiles[commit]++
	})
	p := startWith(t, repo, data, pol).p
	for n := 1; n <= 3; n++ {
		if n > 1 {
			repo.CommitFiles(fmt.Sprintf("a to %d", n), map[string]string{"pay/a/a.cue": fmt.Sprintf("package a\n\nvalue: %d\n", n)})
		}
		poll.Until(t, fmt.Sprintf("rollout of pay/a v%d", n), poll.Patience, func() (bool, string) {
			rec, err := p.Rollout.Record(t.Context(), "pay/a")
			if err != nil {
				return false, err.Error()
			}
			if rec.Current == nil {
				return false, "no current rollout"
			}
			return rec.Current.Version == uint64(n) && rec.Current.Policy.Stages[0].Name == "canary",
				fmt.Sprintf("v%d under %v", rec.Current.Version, rec.Current.Policy.Stages)
		})
	}
	mu.Lock()
	defer mu.Unlock()
	if len(compiles) != 0 {
		t.Errorf("manifest compiles by the policies, per commit: %v; want none (the tailer's compile serves)", compiles)
	}
}
