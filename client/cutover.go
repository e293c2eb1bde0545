package client

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// The two-phase cutover of strict configs (docs/ROLLOUT.md). The controller
// publishes a staged pointer: the watcher fetches, verifies and validates
// that version and keeps it ready, reporting it as Report.Staged, without
// applying it. Then one activation pointer switches every instance at once;
// the cohort pointers follow for instances that missed it. A watcher
// follows both subjects for every config: it does not know which are strict.

func cutoverSubjects(cfg cuecast.ConfigPath) []string {
	return []string{cuecast.StagedSubject(cfg), cuecast.ActivationSubject(cfg)}
}

// handleCutover processes a message on the staged or activation subject and
// reports whether m was one.
func (w *Watcher) handleCutover(m *nats.Msg) bool {
	switch m.Subject {
	case w.stagedSubj:
		// Revisions as on the pointer subjects (watcher_resync.go, handle): a
		// replayed staged or activation pointer changes nothing.
		var p cuecast.Pointer
		if body, ok := w.pointer(&p, m, w.stagedStored, w.stagedRev); ok {
			w.stagedRev = p.Revision
			w.stage(&p, body)
		}
		return true
	case w.activationSubj:
		var p cuecast.Pointer
		if body, ok := w.pointer(&p, m, w.activationStored, w.actRev); ok {
			governs := p.Revision > max(w.revs[0], w.revs[1], w.revs[2], w.actRev)
			w.actRev = p.Revision
			if governs {
				w.apply(&p, body, "activation")
			}
		}
		return true
	}
	return false
}

// stage prepares the version p names: fetched, verified and validated, kept
// in the cache so that the activation applies it without a read.
func (w *Watcher) stage(p *cuecast.Pointer, body []byte) {
	if cur := w.cur.Load(); cur != nil && p.Version <= cur.Version {
		return
	}
	if w.staged == p.Version {
		return
	}
	if w.isRejected(p) {
		return
	}
	// Accepted as apply would (decoded too, for Typed): a version this
	// instance cannot decode must not be staged, or the activation would
	// fail here.
	var a accepted
	if ae := w.accept(&a, p, body, fromServer); ae != nil {
		if ae.checks {
			w.rejectForGood(p, ae)
			return
		}
		if errors.Is(ae.err, cuecast.ErrPurged) {
			// Not in the stream read: purged, or not there yet (a
			// mirror behind the staged pointer CUECAST RePublished).
			// resyncCutover reads it again, backing off, until the
			// stream read has this staged pointer or a newer one.
			w.stageBehind = max(w.stageBehind, p.Revision)
			w.scheduleRetry()
		}
		w.reject(p.Version, "stage", ae.err, false)
		return
	}
	if w.cache == nil {
		w.cache = map[uint64]cachedVersion{}
	}
	w.cache[p.Version] = cachedVersion{meta: a.meta, seq: p.Seq, body: a.content}
	w.staged = p.Version
	if w.stageErr != 0 && w.stageErr <= p.Version {
		// The failure to stage an older (or this) version is over: the
		// instance holds this one ready (docs/PROTOCOL.md §4.3).
		w.lastErr, w.stageErr = "", 0
	}
	w.event(EventResync, p.Version, "staged", nil)
	w.report()
}

// resyncCutover reads the staged pointer, so that a watcher starting or
// reconnecting during a cutover confirms it too.
func (w *Watcher) resyncCutover(ctx context.Context) {
	m, err := getLast(ctx, w.c.nc, w.c.o.directGet, cuecast.StagedSubject(w.cfg))
	if errors.Is(err, cuecast.ErrNotFound) {
		w.catchUp(&w.stageBehind, "staged pointer", 0)
		return
	}
	if err != nil {
		w.event(EventError, 0, "read staged pointer", fmt.Errorf("staged pointer: %w", err))
		return
	}
	// The stored staged pointer is the truth, as the stored cohort
	// pointers are (resync).
	var p cuecast.Pointer
	body, ok := w.pointer(&p, m, w.stagedStored, 0)
	var read uint64
	if ok {
		read = p.Revision
	}
	// Before staging: a failure to stage sets stageBehind again.
	w.catchUp(&w.stageBehind, "staged pointer", read)
	if ok {
		w.stagedRev = p.Revision
		w.stage(&p, body)
	}
}
