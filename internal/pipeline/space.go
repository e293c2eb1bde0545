package pipeline

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrJetStreamDisabled: the embedded server turned JetStream off, which it
// does when writing its store fails for lack of space ("JetStream out of
// resources, will be DISABLED").
var ErrJetStreamDisabled = errors.New("the embedded NATS server disabled JetStream (out of disk space?)")

// storeHeadroom is the free space below which the store counts as full: a
// version with its pointers needs a few kilobytes, a chunked one up to a
// few hundred.
const storeHeadroom = 256 << 10

// spaceLeft is the readiness check on the store's space: an error naming
// the shortage while the embedded server's JetStream store (at its
// max_file_store limit) or the disk under it is full. Publishes fail with
// distributor.ErrNoSpace meanwhile and are retried at every poll, so
// publishing resumes by itself once space is freed, and /readyz turns 200.
func (p *Pipeline) spaceLeft(ctx context.Context, js jetstream.JetStream) error {
	if p.Server == nil {
		return nil // an external server: its operators watch its disks
	}
	cfg := p.Server.JetStreamConfig()
	if cfg == nil {
		return fmt.Errorf("%w: free space in %s, then restart serve", ErrJetStreamDisabled, p.storeDir)
	}
	ai, err := js.AccountInfo(ctx)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	if cfg.MaxStore > 0 && ai.Store+storeHeadroom > uint64(cfg.MaxStore) {
		return fmt.Errorf("JetStream store full: %d of %d bytes used (max_file_store) in %s; publishes are refused until space is freed",
			ai.Store, cfg.MaxStore, p.storeDir)
	}
	if free, ok := diskFree(p.storeDir); ok && free < storeHeadroom {
		return fmt.Errorf("disk full: %d bytes free on the file system of %s; publishes are refused until space is freed", free, p.storeDir)
	}
	return nil
}

// watchJetStream returns an error when the embedded server disables
// JetStream. The server never turns it on again by itself, and the streams
// cannot be reopened under a running pipeline, so serve exits with a clear
// message rather than run on refusing everything: its supervisor restarts
// it, and a start with space to spare finds the store as it was. (Refused
// publishes for a full max_file_store do not disable JetStream and recover
// by themselves; see spaceLeft.)
func (p *Pipeline) watchJetStream(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !p.Server.JetStreamEnabled() && ctx.Err() == nil {
			err := fmt.Errorf("%w: free space in %s, then start serve again", ErrJetStreamDisabled, p.storeDir)
			p.log.Error("JetStream disabled: stopping serve", "err", err)
			return err
		}
	}
}
