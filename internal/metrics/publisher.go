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
