package pipeline

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/internal/leader"
	"github.com/cuecast/cuecast/internal/natsserver"
)

// External configures serve against an external NATS server or cluster and
// as one replica among several (docs/SCALING.md).
type External struct {
	// NATS, when set, is the URL of an external NATS server or cluster used
	// instead of the embedded server (Listen is then unused). NATSOptions
	// carry its credentials and TLS.
	NATS        string
	NATSOptions []nats.Option
	// Replicas of the streams and buckets serve creates; default 1, use 3
	// on a cluster.
	Replicas int
	// LeaseTTL makes the pipeline a replica: the tailer and the rollout
	// controller run only while it holds the lease in JetStream, and a dead
	// holder's work is taken over within about LeaseTTL. Default 10s with
	// NATS set; zero without NATS runs no lease (a single embedded serve).
	LeaseTTL time.Duration
	// ReplicaID names this replica in the lease; default host-pid-random.
	ReplicaID string
}

// connect starts the embedded server, or dials the external one.
func (p *Pipeline) connect(ctx context.Context, cfg Config) error {
	if cfg.NATS == "" {
		var err error
		p.storeDir = filepath.Join(cfg.DataDir, "jetstream")
		p.Server, err = natsserver.Start(ctx, natsserver.Options{Dir: p.storeDir, Listen: cfg.Listen,
			Logger: p.log, MaxFileStore: cfg.MaxFileStore, ConfigFile: cfg.EmbeddedConfig})
		if err != nil {
			return err
		}
		p.NC, err = nats.Connect(p.ClientURL(), append([]nats.Option{nats.Name("cuecast serve"), nats.InProcessServer(p.Server)}, cfg.EmbeddedOptions...)...)
		if err != nil {
			return fmt.Errorf("start pipeline: connect: %w", err)
		}
		return nil
	}
	p.url = redact(cfg.NATS)
	opts := append([]nats.Option{
		nats.Name("cuecast serve"),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(250 * time.Millisecond),
		nats.ReconnectJitter(250*time.Millisecond, time.Second),
		nats.Timeout(5 * time.Second),
	}, cfg.NATSOptions...)
	var err error
	p.NC, err = nats.Connect(cfg.NATS, opts...)
	if err != nil {
		return fmt.Errorf("start pipeline: connect %s: %w", p.url, err)
	}
	return nil
}

// startLease joins the election when the pipeline is a replica.
func (p *Pipeline) startLease(ctx context.Context, cfg Config, js jetstream.JetStream) error {
	ttl := cfg.LeaseTTL
	if ttl == 0 && cfg.NATS == "" {
		return nil
	}
	id := cfg.ReplicaID
	if id == "" {
		var err error
		if id, err = replicaID(); err != nil {
			return fmt.Errorf("start pipeline: %w", err)
		}
	}
	var err error
	p.Lease, err = leader.New(ctx, js, leader.Options{ID: id, TTL: ttl, Replicas: cfg.Replicas, Logger: p.log})
	if err != nil {
		return fmt.Errorf("start pipeline: %w", err)
	}
	return nil
}

func replicaID() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "serve"
	}
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("replica id: %w", err)
	}
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b)), nil
}

// redact drops the password from a URL before it is logged.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw
	}
	return u.Redacted()
}
