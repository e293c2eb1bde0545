package pipeline

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/tailer"
)

// ManifestPolicies reads a version's rollout policy and consistency class
// from the manifest (cuecast.cue) of the version's own commit, so a policy
// change applies to the versions after it, not to older ones still rolling
// out. The tailer hands over the manifest of each commit it publishes from
// (tailer.ManifestRecorder, through the handoff), so a version it just
// published costs no compile. Otherwise (after a restart, or for a version
// another process published) the manifest is compiled alone
// (compiler.Options.ManifestOnly), once per distinct manifest (keyed by the
// hashes of the root's .cue files and cue.mod/), from the repository the
// tailer reads: the work tree's object store for a local repo, the
// tailer's clone for a remote one. A version without a commit (written by a
// tool, not the tailer) gets the policy at the branch tip.
//
// repo, branch and dataDir are Config.Repo, Branch and DataDir.
func ManifestPolicies(repo, branch, dataDir string) rollout.Policies {
	return newManifestPolicies(repo, branch, dataDir)
}

func newManifestPolicies(repo, branch, dataDir string) *manifestPolicies {
	tc := tailer.Config{Repo: repo, Branch: branch, DataDir: dataDir}
	m := &manifestPolicies{dir: tc.GitDir(), ref: plumbing.NewBranchReferenceName(branch),
		byKey: map[string]*compiler.Manifest{}, byCommit: map[string]*compiler.Manifest{}}
	if tc.Remote() {
		m.ref = plumbing.NewRemoteReferenceName("origin", branch)
	}
	return m
}

// maxManifests bounds the cache by manifest; manifests change rarely, so a
// handful of distinct ones cover every version in flight.
const maxManifests = 16

// maxCommits bounds the manifests recorded by commit: the commits of a
// replay's batch whose versions wait for the batch's deploys. A version of
// an older commit costs a manifest-only compile, at most once per distinct
// manifest.
const maxCommits = 4096

type manifestPolicies struct {
	dir string
	ref plumbing.ReferenceName
	// onCompile, when set (by tests), is told of each manifest compile.
	onCompile func(commit string)

	mu    sync.Mutex
	byKey map[string]*compiler.Manifest
	// byCommit holds what the tailer recorded, oldest first in commits.
	byCommit map[string]*compiler.Manifest
	commits  []string
}

var _ tailer.ManifestRecorder = (*manifestPolicies)(nil)

// RecordManifest implements tailer.ManifestRecorder.
func (m *manifestPolicies) RecordManifest(commit string, man *compiler.Manifest) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.byCommit[commit]; ok {
		return
	}
	if len(m.commits) >= maxCommits {
		delete(m.byCommit, m.commits[0])
		m.commits = m.commits[1:]
	}
	if n := len(m.commits); n > 0 {
		// Consecutive commits mostly share a manifest: keep one copy.
		if last := m.byCommit[m.commits[n-1]]; reflect.DeepEqual(last, man) {
			man = last
		}
	}
	m.byCommit[commit] = man
	m.commits = append(m.commits, commit)
}

func (m *manifestPolicies) Policy(ctx context.Context, v cuecast.Version) (cuecast.Policy, cuecast.Consistency, error) {
	man, err := m.manifest(ctx, v.Commit)
	if err != nil {
		return cuecast.Policy{}, "", fmt.Errorf("read rollout policy of %s v%d: %w", v.Config, v.Version, err)
	}
	pol, cons := man.Policy(v.Config)
	return pol, cons, nil
}

// manifest returns the manifest of commit sha (the branch tip when empty):
// the one the tailer recorded, else compiled from Git.
func (m *manifestPolicies) manifest(ctx context.Context, sha string) (*compiler.Manifest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if man, ok := m.byCommit[sha]; ok && sha != "" {
		return man, nil
	}
	r, err := gitfs.Open(m.dir)
	if err != nil {
		return nil, fmt.Errorf("open repository: %w", err)
	}
	h := plumbing.NewHash(sha)
	if sha == "" {
		ref, err := r.Reference(m.ref, true)
		if err != nil {
			return nil, fmt.Errorf("resolve %s in %s: %w", m.ref, m.dir, err)
		}
		h = ref.Hash()
	}
	c, err := r.CommitObject(h)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", h, err)
	}
	var key strings.Builder
	for _, e := range tree.Entries {
		if e.Name == "cue.mod" || strings.HasSuffix(e.Name, ".cue") {
			key.WriteString(e.Name + "=" + e.Hash.String() + ";")
		}
	}
	if man, ok := m.byKey[key.String()]; ok {
		return man, nil
	}
	fsys, err := gitfs.Commit(r, h.String())
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", h, err)
	}
	if m.onCompile != nil {
		m.onCompile(h.String())
	}
	res, err := compiler.Compile(ctx, m.dir, compiler.Options{FS: fsys, ManifestOnly: true})
	if err != nil {
		return nil, fmt.Errorf("compile manifest at %s: %w", h, err)
	}
	if res.Manifest == nil {
		return nil, fmt.Errorf("manifest at %s is invalid: %v", h, res.Errors)
	}
	if len(m.byKey) >= maxManifests {
		clear(m.byKey)
	}
	m.byKey[key.String()] = res.Manifest
	return res.Manifest, nil
}
