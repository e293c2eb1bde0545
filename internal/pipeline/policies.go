package pipeline

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/gitfs"
	"github.com/cuecast/cuecast/tailer"
)

// ManifestPolicies reads each namespace's rollout policy and consistency
// class from the manifest (cuecast.cue) at the tip of the followed branch,
// compiling only the manifest, once per tip commit.
//
// It stands in until the tailer hands the controller the manifest it
// compiled with each version; it reads the same repository the tailer reads
// (the work tree's object store for a local repo, the tailer's clone for a
// remote one).
// repo, branch and dataDir are Config.Repo, Branch and DataDir.
func ManifestPolicies(repo, branch, dataDir string) rollout.Policies {
	tc := tailer.Config{Repo: repo, Branch: branch, DataDir: dataDir}
	m := &manifestPolicies{branch: branch, dir: tc.GitDir(), ref: plumbing.NewBranchReferenceName(branch)}
	if tc.Remote() {
		m.ref = plumbing.NewRemoteReferenceName("origin", branch)
	}
	return m
}

type manifestPolicies struct {
	dir    string
	branch string
	ref    plumbing.ReferenceName

	mu  sync.Mutex
	tip plumbing.Hash
	man *compiler.Manifest
}

func (m *manifestPolicies) Policy(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Policy, string, error) {
	man, err := m.manifest(ctx)
	if err != nil {
		return cuecast.Policy{}, "", fmt.Errorf("read rollout policy of %s: %w", cfg, err)
	}
	ns, ok := man.Namespaces[cfg.Namespace()]
	if !ok {
		return cuecast.DefaultPolicy(), rollout.Relaxed, nil
	}
	pol, cons := ns.Policy, ns.Consistency
	if o, ok := ns.Configs[cfg.Name()]; ok {
		if len(o.Policy.Stages) > 0 {
			pol = o.Policy
		}
		if o.Consistency != "" {
			cons = o.Consistency
		}
	}
	return pol, cons, nil
}

func (m *manifestPolicies) manifest(ctx context.Context) (*compiler.Manifest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, err := git.PlainOpen(m.dir)
	if err != nil {
		return nil, fmt.Errorf("open repository %s: %w", m.dir, err)
	}
	ref, err := r.Reference(m.ref, true)
	if err != nil {
		return nil, fmt.Errorf("resolve %s in %s: %w", m.ref, m.dir, err)
	}
	if ref.Hash() == m.tip && m.man != nil {
		return m.man, nil
	}
	fsys, err := gitfs.Commit(r, ref.Hash().String())
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", ref.Hash(), err)
	}
	// Naming a config that cannot exist makes Compile validate the
	// manifest and compile nothing else.
	res, err := compiler.Compile(ctx, m.dir, compiler.Options{FS: fsys, Configs: []cuecast.ConfigPath{"-/-"}})
	if err != nil {
		return nil, fmt.Errorf("compile manifest at %s: %w", ref.Hash(), err)
	}
	if res.Manifest == nil {
		return nil, fmt.Errorf("manifest at %s is invalid: %v", ref.Hash(), res.Errors)
	}
	m.tip, m.man = ref.Hash(), res.Manifest
	return m.man, nil
}
