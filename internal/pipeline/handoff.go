package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/distributor"
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
	// nc, when set, reads a config's newest version from the stream's
	// leader before each deploy: a process that took over from another
	// (a lease changing hands) has not seen its publishes.
	nc *nats.Conn
	// manifests, when set, is told the manifest of each commit the tailer
	// publishes from: the rollout policies, so a deploy costs no second
	// compile of it.
	manifests tailer.ManifestRecorder

	mu     sync.Mutex
	newest map[cuecast.ConfigPath]cuecast.Version
}

func newHandoff(store metrics.Store, dep tailer.Deployer, nc *nats.Conn, manifests tailer.ManifestRecorder) *handoff {
	return &handoff{store: store, dep: dep, nc: nc, manifests: manifests, newest: map[cuecast.ConfigPath]cuecast.Version{}}
}

// RecordManifest implements tailer.ManifestRecorder for the policies.
func (h *handoff) RecordManifest(commit string, m *compiler.Manifest) {
	if h.manifests != nil {
		h.manifests.RecordManifest(commit, m)
	}
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

// DeployedVersions implements tailer.DeployedVersions for the deployer it
// wraps, so the tailer's start-up check still sees the rollout records.
func (h *handoff) DeployedVersions(ctx context.Context) (map[cuecast.ConfigPath]uint64, error) {
	d, ok := h.dep.(tailer.DeployedVersions)
	if !ok {
		return nil, nil
	}
	return d.DeployedVersions(ctx)
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
// of v's config when that is newer: published here, or stored as the
// stream's leader says.
func (h *handoff) Deploy(ctx context.Context, v cuecast.Version) error {
	h.mu.Lock()
	if n := h.newest[v.Config]; n.Version > v.Version {
		v = n
	}
	h.mu.Unlock()
	if h.nc != nil {
		n, ok, err := leaderLatest(ctx, h.nc, v.Config)
		if err != nil {
			return fmt.Errorf("deploy %s: %w", v.Config, err)
		}
		if ok && n.Version > v.Version {
			v = n
		}
	}
	return h.dep.Deploy(ctx, v)
}

// leaderLatest reads cfg's newest stored version from the CUECAST stream's
// leader (a message get, not a direct get: the leader has applied every
// publish it acknowledged); ok is false when there is none. The tailer's
// ctx has no deadline: LeaderLastMsg bounds the wait
// (TestLeaderLatestReturnsWhenItsAnswerIsLost).
func leaderLatest(ctx context.Context, nc *nats.Conn, cfg cuecast.ConfigPath) (cuecast.Version, bool, error) {
	m, err := distributor.LeaderLastMsg(ctx, nc, cuecast.Stream, cuecast.VersionSubject(cfg))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return cuecast.Version{}, false, nil
	}
	if err != nil {
		return cuecast.Version{}, false, fmt.Errorf("read latest version from the stream leader: %w", err)
	}
	var v cuecast.Version
	if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &v); err != nil || v.Config != cfg || v.Version == 0 {
		return cuecast.Version{}, false, fmt.Errorf("read latest version from the stream leader: undecodable %s header", cuecast.HeaderMeta)
	}
	return v, true, nil
}
