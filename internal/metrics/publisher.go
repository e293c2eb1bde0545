package metrics

import (
	"context"

	"github.com/cuecast/cuecast"
)

// Store is what the tailer publishes through (tailer.Publisher with its
// tailer.Lister capability); the distributor implements it.
type Store interface {
	Latest(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Version, error)
	Publish(ctx context.Context, v cuecast.Version, content []byte) error
	Configs(ctx context.Context) ([]cuecast.ConfigPath, error)
}

// Publisher wraps s so that every successful Publish counts one version in
// cuecast_versions_published_total and starts tracking its propagation. Pass
// the result to tailer.New in place of s.
func (m *Metrics) Publisher(s Store) Store { return &publisher{m: m, s: s} }

type publisher struct {
	m *Metrics
	s Store
}

func (p *publisher) Latest(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Version, error) {
	return p.s.Latest(ctx, cfg)
}

func (p *publisher) Configs(ctx context.Context) ([]cuecast.ConfigPath, error) {
	return p.s.Configs(ctx)
}

func (p *publisher) Publish(ctx context.Context, v cuecast.Version, content []byte) error {
	if err := p.s.Publish(ctx, v, content); err != nil {
		p.m.publishErrors.Inc()
		return err
	}
	p.m.published.WithLabelValues(v.Config.Namespace()).Inc()
	p.m.Published(v)
	return nil
}

// Deployer is what the tailer deploys a published version through (the
// rollout controller's first stage: its pointer writes), with the
// capability of listing what the rollout records say was deployed.
type Deployer interface {
	Deploy(ctx context.Context, v cuecast.Version) error
	DeployedVersions(ctx context.Context) (map[cuecast.ConfigPath]uint64, error)
}

// Deployer wraps d so that every failed Deploy counts in
// cuecast_version_publish_errors_total too: a version reaches nobody until
// its pointers are written, and a store that refuses writes (a full disk)
// may refuse them after it stored the version, when the tailer's retries
// republish nothing and fail only at the deploy.
func (m *Metrics) Deployer(d Deployer) Deployer { return &deployer{m: m, d: d} }

type deployer struct {
	m *Metrics
	d Deployer
}

func (d *deployer) Deploy(ctx context.Context, v cuecast.Version) error {
	if err := d.d.Deploy(ctx, v); err != nil {
		d.m.publishErrors.Inc()
		return err
	}
	return nil
}

func (d *deployer) DeployedVersions(ctx context.Context) (map[cuecast.ConfigPath]uint64, error) {
	return d.d.DeployedVersions(ctx)
}
