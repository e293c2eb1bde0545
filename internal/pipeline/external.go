package pipeline

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/internal/leader"
	"github.com/cuecast/cuecast/internal/natsserver"
	"github.com/cuecast/cuecast/internal/redact"
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
	// LeaseTTL is the lease's: the tailer and the rollout controller run
	// only while the pipeline holds the lease in JetStream, and a dead
	// holder's work is taken over within about LeaseTTL; default 10s. The
	// embedded serve holds it too (a --nats serve may join its server),
	// and takes its own back at once after a crash.
	LeaseTTL time.Duration
	// ReplicaID names this replica in the lease; default host-pid-random,
	// and for the embedded serve "embedded:<host>:<data directory>".
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
	p.url = redact.URLs(cfg.NATS)
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

// startLease joins the election. Every serve does: the embedded one too,
// since a `serve --nats` pointed at its server is a second writer
// (issue 32). The embedded serve's ID is its data directory, which its
// lock keeps to this process, so after a crash it reclaims its own lease
// at once instead of waiting for it to expire.
func (p *Pipeline) startLease(ctx context.Context, cfg Config, js jetstream.JetStream) error {
	ttl := cmp.Or(cfg.LeaseTTL, 10*time.Second)
	id := cfg.ReplicaID
	var err error
	switch {
	case id != "":
	case cfg.NATS == "":
		if id, err = embeddedID(cfg.DataDir); err != nil {
			return fmt.Errorf("start pipeline: %w", err)
		}
	default:
		if id, err = replicaID(); err != nil {
			return fmt.Errorf("start pipeline: %w", err)
		}
	}
	p.Lease, err = leader.New(ctx, js, leader.Options{ID: id, TTL: ttl, Replicas: cfg.Replicas, Logger: p.log,
		Reclaim: cfg.NATS == ""})
	if err != nil {
		return fmt.Errorf("start pipeline: %w", err)
	}
	p.leaseID = id
	return nil
}

// embeddedID names the embedded serve in the lease: its host and data
// directory.
func embeddedID(dataDir string) (string, error) {
	host, err := os.Hostname()
	if err != nil {
		host = "serve"
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("lease id: %w", err)
	}
	return "embedded:" + host + ":" + abs, nil
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
