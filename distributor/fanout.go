package distributor

import (
	"cmp"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// FanoutConfig is the configuration of the hub's cuecast.FanoutStream: a mirror of
// the whole CUECAST stream, same sequences, in the fan-out account (internal/natsconf), read through
// the imports the hub's configuration gives that account (cuecast.FanoutAPIPrefix,
// cuecast.FanoutDeliverPrefix). It captures no subject and republishes nothing.
// replicas and retain are the distributor's (retain: versions kept per
// subject, as MirrorSpec.Retain).
func FanoutConfig(replicas, retain int) jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:              cuecast.FanoutStream,
		Description:       "cuecast: the hub's mirror of CUECAST that the leafnode links read (docs/SECURITY.md)",
		Storage:           jetstream.FileStorage,
		Replicas:          max(replicas, 1),
		AllowRollup:       true,
		MaxMsgsPerSubject: int64(cmp.Or(retain, 100)),
		// Filtered, though it takes everything: the filter names the
		// consumer's creation subject that the fan-out account imports.
		Mirror: &jetstream.StreamSource{Name: cuecast.Stream, FilterSubject: cuecast.StoredPrefix + ".>", External: &jetstream.ExternalStream{
			APIPrefix: cuecast.FanoutAPIPrefix, DeliverPrefix: cuecast.FanoutDeliverPrefix,
		}},
	}
}

// Fanout creates or updates the hub's cuecast.FanoutStream, as the CUECAST
// account's distributor (nc) through cuecast.FanoutAdminPrefix. Where no
// fan-out account answers, a server that is no hub of a tree (serve's
// embedded server, a hub configured without one), it does nothing and
// returns nil.
func Fanout(ctx context.Context, nc *nats.Conn, replicas, retain int) error {
	js, err := jetstream.NewWithAPIPrefix(nc, cuecast.FanoutAdminPrefix)
	if err != nil {
		return fmt.Errorf("create %s: %w", cuecast.FanoutStream, err)
	}
	if _, err := js.CreateOrUpdateStream(ctx, FanoutConfig(replicas, retain)); err != nil {
		if errors.Is(err, nats.ErrNoResponders) || errors.Is(err, jetstream.ErrNoStreamResponse) {
			return nil
		}
		return fmt.Errorf("create %s: %w", cuecast.FanoutStream, err)
	}
	return nil
}
