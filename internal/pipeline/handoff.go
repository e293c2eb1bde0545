package pipeline

import (
	"context"
	"errors"
	"sync"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/tailer"
)

// handoff stands between the tailer and the store and the rollout
// controller: it remembers the newest version of each config that this
// process published, and when the tailer hands the controller an older one
// it deploys the newest instead; its Latest never answers older than
// what this process published.
//
// The tailer deploys what the store's Latest returns. On R3 streams that
// read is a direct get, which any replica may answer, also one that has not
// applied the publish just acknowledged: the tailer then deployed the
// version before it (a no-op for the controller, whose rollout of it was
// under way or done), marked the config deployed, and the new version was
// never rolled out until the next commit (issue 15, item 2).
type handoff struct {
	store metrics.Store
	dep   tailer.Deployer

	mu     sync.Mutex
	newest map[cuecast.ConfigPath]cuecast.Version
}

func newHandoff(store metrics.Store, dep tailer.Deployer) *handoff {
	return &handoff{store: store, dep: dep, newest: map[cuecast.ConfigPath]cuecast.Version{}}
}

// Latest implements tailer.Publisher: the store's latest version, or the
// newest published here when the store's answer is older (or none).
func (h *handoff) Latest(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Version, error) {
	v, err := h.store.Latest(ctx, cfg)
	if err != nil && !errors.Is(err, cuecast.ErrNotFound) {
		return v, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if n, ok := h.newest[cfg]; ok && (err != nil || n.Version > v.Version) {
		return n, nil
	}
	return v, err
}

// Configs implements tailer.Lister.
func (h *handoff) Configs(ctx context.Context) ([]cuecast.ConfigPath, error) {
	return h.store.Configs(ctx)
}

// Publish implements tailer.Publisher, remembering what it published.
func (h *handoff) Publish(ctx context.Context, v cuecast.Version, content []byte) error {
	if err := h.store.Publish(ctx, v, content); err != nil {
		return err
	}
	if v.Checksum == "" {
		v.Checksum = cuecast.Checksum(content)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if v.Version > h.newest[v.Config].Version {
		h.newest[v.Config] = v
	}
	return nil
}

// Deploy implements tailer.Deployer: it deploys v, or the newest version
// of v's config published here when that is newer.
func (h *handoff) Deploy(ctx context.Context, v cuecast.Version) error {
	h.mu.Lock()
	if n := h.newest[v.Config]; n.Version > v.Version {
		v = n
	}
	h.mu.Unlock()
	return h.dep.Deploy(ctx, v)
}
