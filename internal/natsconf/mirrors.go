package natsconf

import (
	"cmp"
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// MirrorSpec says which mirrors one leaf or node JetStream domain holds.
type MirrorSpec struct {
	// Upstream is the JetStream domain of the level above.
	Upstream string
	// FromHub says Upstream is the hub's domain: the mirrors then read the
	// hub's cuecast.FanoutStream (in the account the links log in to) filtered to
	// their namespace; otherwise they read the upstream level's
	// CUECAST_<ns> mirrors.
	FromHub bool
	// Namespaces get one mirror each.
	Namespaces []string
	// Replicas of each mirror; default 1 (3 in a clustered domain).
	Replicas int
	// Retain is how many messages a mirror keeps per subject: the
	// distributor's Options.Retain (default 100). Mirrors do not replay the
	// hub's retention purges, so this limit is what keeps them from growing
	// with every version; pointers are rolled up either way.
	Retain int
	// NoRePublish is for mirrors in the CUECAST stream's own domain (a
	// Standalone server, Upstream its own domain): they leave out the
	// RePublish onto ccr.<ns>.>, which CUECAST does already. Named by
	// domain, a mirror reads through that domain's API (which the
	// Standalone configuration maps onto the local one) and so does not
	// inherit MirrorDirect: it never joins CUECAST's direct-get queue,
	// where it would answer reads of other namespaces with "not found".
	NoRePublish bool
}

// Mirrors creates or updates the namespace mirrors CUECAST_<ns> of the leaf
// or node domain js talks to (jetstream.NewWithDomain reaches a remote
// domain through the leafnode connections). Each mirrors its namespace from
// the upstream domain and RePublishes cc.<ns>.> onto ccr.<ns>.>, which the
// generated configurations keep from crossing leafnode connections: each
// instance hears only its own level. A mirror keeps the sequence numbers of
// its origin, so the pointers' sequences name the same versions in every
// domain.
//
// The hub holds no namespace mirrors: a mirror of a stream in its own domain
// inherits MirrorDirect, joins CUECAST's direct-get queue and would answer
// reads of other namespaces with "not found". Services connect to a leaf or
// node server (docs/SCALING.md).
func Mirrors(ctx context.Context, js jetstream.JetStream, m MirrorSpec) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("create mirrors: %w", err)
	}
	for _, ns := range m.Namespaces {
		cfg := MirrorConfig(m, ns)
		if _, err := js.CreateOrUpdateStream(ctx, cfg); err != nil {
			return fmt.Errorf("create mirror %s: %w", cfg.Name, err)
		}
	}
	return nil
}

// Validate reports a MirrorSpec that cannot work, wrapping ErrInvalidSpec,
// before anything is created: Mirrors would stop at the first mirror the
// server refuses, some made and some not. Replicas and Retain of 0 take
// the server's defaults.
func (m MirrorSpec) Validate() error {
	if !validName(m.Upstream) {
		return fmt.Errorf("%w: upstream domain %q: want 1-64 of [A-Za-z0-9_-]", ErrInvalidSpec, m.Upstream)
	}
	for _, ns := range m.Namespaces {
		if !cuecast.ValidSegment(ns) {
			return fmt.Errorf("%w: namespace %q: want [a-z0-9][a-z0-9_-]*", ErrInvalidSpec, ns)
		}
	}
	switch {
	case m.Replicas < 0 || m.Replicas > 5:
		return fmt.Errorf("%w: replicas %d: want 1 to 5", ErrInvalidSpec, m.Replicas)
	case m.Retain < 0:
		return fmt.Errorf("%w: retain %d: want 1 or more", ErrInvalidSpec, m.Retain)
	}
	return nil
}

// ValidDomain says whether s can name a JetStream domain (and a server).
func ValidDomain(s string) bool { return validName(s) }

// MirrorConfig is the stream configuration Mirrors creates for ns.
func MirrorConfig(m MirrorSpec, ns string) jetstream.StreamConfig {
	cfg := jetstream.StreamConfig{
		Name:        MirrorStream(ns),
		Description: "cuecast versions and pointers of namespace " + ns + " (docs/SCALING.md)",
		Storage:     jetstream.FileStorage,
		Replicas:    max(m.Replicas, 1),
		AllowDirect: true,
		AllowRollup: true,
		// Per subject, like the distributor's retention: the last Retain
		// versions of a config. A config's chunks share one subject, so a
		// mirror may drop the chunks of its oldest retained versions
		// earlier than the hub (a read of those gives ErrPurged).
		MaxMsgsPerSubject: int64(cmp.Or(m.Retain, 100)),
		RePublish:         &jetstream.RePublish{Source: "cc.>", Destination: "ccr.>"},
		Mirror:            &jetstream.StreamSource{Name: MirrorStream(ns), Domain: m.Upstream},
	}
	if m.FromHub {
		// The hub's fan-out mirror, in the account the links are bound to.
		cfg.Mirror = &jetstream.StreamSource{Name: cuecast.FanoutStream, FilterSubject: "cc." + ns + ".>", Domain: m.Upstream}
	}
	if m.NoRePublish {
		// CUECAST's own domain and account (Standalone): CUECAST itself.
		cfg.Mirror = &jetstream.StreamSource{Name: Stream, FilterSubject: "cc." + ns + ".>", Domain: m.Upstream}
		cfg.RePublish = nil
	}
	return cfg
}
