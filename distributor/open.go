package distributor

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// Open returns a Distributor over the CUECAST and CUECAST_REPORTS streams
// that must already exist, without creating or updating them: for readers
// such as `cuecast status`, whose credentials may only read (docs/SCALING.md).
// It returns an error wrapping jetstream.ErrStreamNotFound when serve has not
// created the streams yet. Options.SigningKey is ignored: an opened
// Distributor is not meant to publish. Close it like one from New.
func Open(ctx context.Context, nc *nats.Conn, o Options) (*Distributor, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("open distributor: %w", err)
	}
	o.setDefaults()
	o.SigningKey = nil
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("open distributor: %w", err)
	}
	d := &Distributor{nc: nc, js: js, o: o, log: o.Logger}
	if d.stream, err = js.Stream(ctx, cuecast.Stream); err != nil {
		return nil, fmt.Errorf("open distributor: stream %s: %w", cuecast.Stream, err)
	}
	if d.reports, err = js.Stream(ctx, cuecast.ReportStream); err != nil {
		return nil, fmt.Errorf("open distributor: stream %s: %w", cuecast.ReportStream, err)
	}
	// Like New: the pointer cache follows the RePublished pointers.
	if err := d.followPointers(); err != nil {
		return nil, fmt.Errorf("open distributor: %w", err)
	}
	return d, nil
}
