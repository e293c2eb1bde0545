package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrJetStreamDisabled: the embedded server turned JetStream off, which it
// does when writing its store fails for lack of space ("JetStream out of
// resources, will be DISABLED").
var ErrJetStreamDisabled = errors.New("the embedded NATS server disabled JetStream (out of disk space?)")

// ErrStoreWriteFailed: a stream of the embedded server's store failed a
// write (a full disk: "Critical write error … no space left on device") and
// refuses every write since, even once space is back: the server's file
// store latches the error until the stream is reopened.
var ErrStoreWriteFailed = errors.New("the embedded NATS server's store failed a write and refuses writes until it is reopened")

// storeHeadroom is the free space below which the store counts as full: a
// version with its pointers needs a few kilobytes, a chunked one up to a
// few hundred.
const storeHeadroom = 256 << 10

// spaceLeft is the readiness check on the store: an error naming the fault
// while the embedded server's JetStream is disabled or one of its streams
// latched a failed write (storeFault), or while the store (at its
// max_file_store limit) or the disk under it is full. Publishes fail
// meanwhile and are retried at every poll; healStore reopens a faulty store
// once there is space again, so publishing resumes by itself and /readyz
// turns 200, without a restart.
func (p *Pipeline) spaceLeft(ctx context.Context, js jetstream.JetStream) error {
	if p.Server == nil {
		return nil // an external server: its operators watch its disks
	}
	if err := p.storeFault(); err != nil {
		return err
	}
	cfg := p.Server.JetStreamConfig()
	if cfg == nil { // disabled since storeFault looked
		return fmt.Errorf("%w: it is started again once space is free in %s", ErrJetStreamDisabled, p.storeDir)
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

// storeFault says why the embedded server's store cannot write now: its
// JetStream is disabled (ErrJetStreamDisabled), or a stream latched a
// failed write (ErrStoreWriteFailed, from the server's own health check of
// each stream); nil when neither.
func (p *Pipeline) storeFault() error {
	if !p.Server.JetStreamEnabled() {
		return fmt.Errorf("%w: it is started again once space is free in %s", ErrJetStreamDisabled, p.storeDir)
	}
	h := p.Server.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range h.Errors {
		if e.Type == server.HealthzErrorStream && strings.Contains(e.Error, "write error") {
			return fmt.Errorf("%w: %s; it is reopened once space is free in %s", ErrStoreWriteFailed, e.Error, p.storeDir)
		}
	}
	return nil
}

// roomToWrite says whether the disk under the store has space for writes
// again. (A store at its max_file_store limit refuses writes without
// latching anything: it needs no reopening.)
func (p *Pipeline) roomToWrite() bool {
	free, ok := diskFree(p.storeDir)
	return !ok || free >= storeHeadroom
}

// healStore reopens the embedded server's store, in this process, when a
// full disk left it unable to write and there is space again, until ctx
// is cancelled. The server never recovers by itself: a stream's file store
// latches its first failed write and refuses every write after it, and
// JetStream, once the server disabled it, stays off. Restarting JetStream
// reopens every stream from its files (as a restart of serve would: a write
// that failed was never acknowledged, so nothing acknowledged is lost), and
// the pipeline's connection, which stays up, carries on. Reopening rather
// than exiting keeps /readyz answering 503 with the reason, and the failed
// publishes counted, for as long as writes fail; a supervisor that
// restarted serve on a disk still full would only get a start that fails.
func (p *Pipeline) healStore(ctx context.Context, js server.JetStreamConfig) {
	// EnableJetStream appends the server's own directory to StoreDir, as
	// the first start did from the same parent.
	js.StoreDir = p.storeDir
	t := time.NewTicker(time.Second)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fault := p.storeFault()
		if fault == nil {
			waiting = false
			continue
		}
		if !p.roomToWrite() {
			if !waiting {
				p.log.Error("JetStream store cannot write; waiting for free space to reopen it", "dir", p.storeDir, "err", fault)
				waiting = true
			}
			continue
		}
		if err := p.reopenStore(ctx, js); err != nil {
			p.log.Error("reopen the JetStream store; retrying", "dir", p.storeDir, "err", err)
			continue
		}
		waiting = false
		p.log.Warn("JetStream store reopened after a failed write; publishing resumes", "dir", p.storeDir, "was", fault)
	}
}

// reopenStore restarts the embedded server's JetStream with cfg: shut down
// (when the server has not already, which it does in the background when it
// disables JetStream), then started again from the store's files.
func (p *Pipeline) reopenStore(ctx context.Context, cfg server.JetStreamConfig) error {
	if p.Server.JetStreamEnabled() {
		if err := p.Server.ShutdownJetStream(); err != nil {
			return fmt.Errorf("shut JetStream down: %w", err)
		}
	}
	for p.Server.JetStreamConfig() != nil { // a shutdown still under way
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	if err := p.Server.EnableJetStream(&cfg); err != nil {
		return fmt.Errorf("start JetStream: %w", err)
	}
	return nil
}
