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
var ErrStoreWriteFailed = errors.New("the embedded NATS server's store failed a write and refuses writes until serve starts again")

// storeHeadroom is the free space below which the store counts as full: a
// version with its pointers needs a few kilobytes, a chunked one up to a
// few hundred.
const storeHeadroom = 256 << 10

// spaceLeft is the readiness check on the store: an error naming the fault
// while the embedded server's JetStream is disabled or one of its streams
// latched a failed write (storeFault), or while the store (at its
// max_file_store limit) or the disk under it is full. Publishes fail
// meanwhile and are retried at every poll, and are counted. A full
// max_file_store needs nothing more: publishing resumes by itself once
// space is freed, and /readyz turns 200. A faulty store needs a restart,
// which serve makes its supervisor do once there is space (watchStore).
func (p *Pipeline) spaceLeft(ctx context.Context, js jetstream.JetStream) error {
	if p.Server == nil {
		return nil // an external server: its operators watch its disks
	}
	cfg := p.Server.JetStreamConfig()
	fault := p.storeFault()
	if fault == nil && cfg == nil { // disabled since
		fault = ErrJetStreamDisabled
	}
	if fault != nil {
		return fmt.Errorf("%w; free space in %s: serve then exits for its supervisor to start it again, which reopens the store", fault, p.storeDir)
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
		return ErrJetStreamDisabled
	}
	h := p.Server.Healthz(&server.HealthzOptions{Details: true})
	for _, e := range h.Errors {
		if e.Type == server.HealthzErrorStream && strings.Contains(e.Error, "write error") {
			return fmt.Errorf("%w: %s", ErrStoreWriteFailed, e.Error)
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

// watchStore returns an error once the embedded server's store cannot
// write (storeFault) and the disk under it has space again, for serve to
// exit and its supervisor to start it again: a start reopens every stream
// from its files, and publishing resumes (a write that failed was never
// acknowledged, so nothing acknowledged is lost). The server never
// recovers by itself: a stream's file store latches its first failed
// write and refuses every write after it, and JetStream, once the server
// disabled it, stays off. Until there is space, serve keeps running:
// /readyz answers 503 naming the fault and every failed publish is counted,
// where a restart on a disk still full would only fail again. (Restarting
// JetStream inside the process instead leaves nats-server's first API
// subscription in place beside the new one, so every JetStream API request
// is handled twice, and races with it: go test -race reports it.)
func (p *Pipeline) watchStore(ctx context.Context) error {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	waiting := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		fault := p.storeFault()
		switch {
		case fault == nil:
			waiting = false
		case !p.roomToWrite():
			if !waiting {
				p.log.Error("JetStream store cannot write; serve exits for its supervisor to start it again once there is free space",
					"dir", p.storeDir, "err", fault)
				waiting = true
			}
		case ctx.Err() == nil:
			err := fmt.Errorf("%w; there is free space again in %s: start serve again, which reopens the store", fault, p.storeDir)
			p.log.Error("JetStream store cannot write: stopping serve", "err", err)
			return err
		}
	}
}
