package pipeline

import "github.com/cuecast/cuecast/distributor/rollout"

// ManifestPoliciesCounting is ManifestPolicies telling onCompile of each
// manifest it compiles itself (rather than taking the tailer's).
func ManifestPoliciesCounting(repo, branch, dataDir string, onCompile func(commit string)) rollout.Policies {
	m := newManifestPolicies(repo, branch, dataDir)
	m.onCompile = onCompile
	return m
}
