package client

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cuecast/cuecast"
)

// The accept step. Every version the watcher holds passed it, whatever
// brought it (a pointer, an activation, a staged pointer, the
// last-known-good file): verify → checksum → validate → decode. Then apply
// swaps it in, saves it as last-known-good and reports it (install), a
// staged pointer keeps it for the activation (stage), and the
// last-known-good file is served until the server's version arrives
// (loadLKG).

// accepted is a version that passed accept: its verified metadata and
// content, and the value decoded from it (Typed; nil otherwise).
type accepted struct {
	meta    cuecast.Version
	content []byte
	value   any
}

// source says where accept's content comes from.
type source uint8

const (
	// fromServer: a verified pointer, with its inline content or none;
	// the content is read (or taken from a kept copy) and verified
	// against the pointer's signed checksum and size.
	fromServer source = iota
	// fromLKG: the last-known-good file, whose content readLKG checked
	// against the pointer's checksum; the pointer's signature and subject
	// are verified here.
	fromLKG
)

// acceptError says which step of accept refused a version, and why.
type acceptError struct {
	// step names it: "fetch" (reading or verifying the content),
	// "verify" (a last-known-good pointer), "validation hook" or
	// "decode".
	step string
	// checks is set when the service's checks (validate, decode) refused
	// the content: the same bytes would fail the same way.
	checks bool
	err    error
}

// accept verifies the version p names into a and runs the service's
// checks on it. body is the pointer's inline content (fromServer; nil when
// it has none) or the last-known-good file's content (fromLKG). A deleted
// version has no content to check. a and p are the caller's, written and
// read through, so that the frames of the apply path stay small
// (stack_test.go).
func (w *Watcher) accept(a *accepted, p *cuecast.Pointer, body []byte, src source) *acceptError {
	var err error
	if src == fromLKG {
		a.meta, a.content = p.Meta(), body
		if err = w.verifyPointer(p, ""); err != nil {
			return &acceptError{step: "verify", err: err}
		}
	} else if a.content, err = w.fetch(&a.meta, p, body); err != nil {
		return &acceptError{step: "fetch", err: err}
	}
	if a.meta.Deleted {
		return nil
	}
	if err := w.acceptIndex(a.content); err != nil {
		return &acceptError{step: "variant index", checks: true, err: err}
	}
	value, what, err := w.check(a.content)
	if err != nil {
		return &acceptError{step: what, checks: true, err: err}
	}
	a.value = value
	return nil
}

func (w *Watcher) loadLKG() {
	if w.o.lkgPath == "" {
		return
	}
	p, content, err := readLKG(w.o.lkgPath, w.cfg)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	var a accepted
	if err == nil {
		if ae := w.accept(&a, &p, content, fromLKG); ae != nil {
			err = ae.err
			if ae.checks {
				err = fmt.Errorf("last-known-good %s: %s: %w", w.o.lkgPath, ae.step, ae.err)
			}
		}
	}
	if err != nil {
		w.event(EventError, p.Version, "ignoring last-known-good file; it will be replaced by the next good version", err)
		return
	}
	w.servingLKG = true
	w.curRev = p.Revision
	w.swap(new(Snapshot), &a, true)
	w.event(EventLoaded, a.meta.Version, "serving last-known-good "+w.o.lkgPath, nil)
}

// apply moves to the version a verified pointer names, if it should; body
// is the pointer's inline content or nil.
func (w *Watcher) apply(p *cuecast.Pointer, body []byte, why string) {
	cur := w.cur.Load()
	if cur != nil {
		switch {
		case p.Version == cur.Version && p.Checksum == cur.Checksum:
			if w.servingLKG {
				w.servingLKG = false
				w.clearLKGFlag()
				w.reportSoon()
			}
			if p.Revision > w.curRev {
				w.repointed(p, cur)
			}
			return
		case p.Version < cur.Version && !p.Rollback:
			// Never backwards without a rollback pointer.
			w.skipOlder(p, cur.Version)
			return
		case p.Version < cur.Version && p.Revision <= w.curRev:
			// Nor for a rollback older than what runs: every genuine
			// write's revision is above every earlier one.
			w.refuseOldRollback(p, cur.Version)
			return
		case p.Version == cur.Version:
			w.refuseOtherChecksum(p, cur.Checksum)
			return
		}
	}
	if w.isRejected(p) {
		return
	}
	var a accepted
	if ae := w.accept(&a, p, body, fromServer); ae != nil {
		w.notApplied(p, ae, why)
		return
	}
	w.install(p, &a, why)
}

// repointed takes p, a newer pointer naming the version that runs (a later
// stage reaching this instance, or serve re-signing its pointers after a
// key rotation), as the one it came from, and saves it in the
// last-known-good file: else the file would keep a pointer signed by a key
// that is retired next, and a restart trusting only the new key, with the
// server out of reach, would refuse it. Out of line: every pointer naming
// the current version passes here, and few are newer.
func (w *Watcher) repointed(p *cuecast.Pointer, cur *Snapshot) {
	w.curRev = p.Revision
	if w.o.lkgPath == "" {
		return
	}
	if err := writeLKG(w.o.lkgPath, *p, cur.Content); err != nil {
		w.unsaved = p
		w.event(EventError, cur.Version, "the newer pointer of the version applied was not saved as last-known-good", err)
	}
}

// saveLKG saves the version served in the last-known-good file again when
// it could not be saved at its apply (a full disk), and clears the error
// that failure reported once it is: a file left on the older version is
// what a restart with the server out of reach would start on.
func (w *Watcher) saveLKG() {
	p := w.unsaved
	if p == nil {
		return
	}
	cur := w.Current()
	if cur.Version != p.Version || cur.Checksum != p.Checksum {
		w.unsaved = nil // a newer apply saved (or failed to save) its own
		return
	}
	err := writeLKG(w.o.lkgPath, *p, cur.Content)
	if err != nil {
		return // said at the apply; the next heartbeat tries again
	}
	w.unsaved = nil
	if w.lastErr == w.unsavedErr {
		w.lastErr = ""
	}
}

// notApplied handles a version apply could not accept: a missing one falls
// back to the current pointer (and is read again while the stream read is
// behind it), a failed read is retried, and content the service's checks
// refused stays refused.
func (w *Watcher) notApplied(p *cuecast.Pointer, ae *acceptError, why string) {
	if ae.checks {
		w.rejectForGood(p, ae)
		return
	}
	err := ae.err
	if errors.Is(err, cuecast.ErrPurged) && why != "purged" {
		w.behind = max(w.behind, p.Revision)
		w.event(EventError, p.Version, "version not in the stream read (purged, or a mirror not caught up yet); reading the current pointer", err)
		w.resync("purged")
		return
	}
	permanent := errors.Is(err, cuecast.ErrBadSignature) || errors.Is(err, cuecast.ErrChecksumMismatch)
	if !permanent {
		w.scheduleRetry()
	}
	w.reject(p.Version, ae.step, err, false)
}

// rejectForGood refuses p's version after the service's checks failed on
// it: the same bytes would fail the same way.
func (w *Watcher) rejectForGood(p *cuecast.Pointer, ae *acceptError) {
	if w.rejected == nil {
		w.rejected = map[string]bool{}
	}
	w.rejected[rejectKey(p)] = true
	w.reject(p.Version, ae.step, ae.err, true)
}

// install makes an accepted version the current one (swap), keeps its
// bytes for a rollback, saves it as last-known-good and reports it.
func (w *Watcher) install(p *cuecast.Pointer, a *accepted, why string) {
	av := &appliedVersion{kept: cachedVersion{meta: a.meta, seq: p.Seq, body: a.content}}
	w.swap(&av.snap, a, false)
	if w.held != nil {
		w.prev = w.held
	}
	w.held = &av.kept
	w.curRev = p.Revision
	w.servingLKG = false
	w.lastErr, w.stageErr = "", 0
	if len(w.cache) > 0 { // a range over an empty map still starts an iterator
		for n := range w.cache {
			if n <= a.meta.Version {
				delete(w.cache, n)
			}
		}
	}
	w.unsaved = nil
	if w.o.lkgPath != "" {
		if err := writeLKG(w.o.lkgPath, *p, a.content); err != nil {
			w.lastErr, w.stageErr = err.Error(), 0
			w.unsaved, w.unsavedErr = p, w.lastErr
			w.event(EventError, a.meta.Version, "applied, but not saved as last-known-good", err)
		}
	}
	w.event(EventApplied, a.meta.Version, why, nil)
	if a.meta.Deleted && w.cfg.IsVariant() {
		w.variantRemoved(a.meta.Version)
	}
	w.reportSoon()
}

// appliedVersion is what an apply allocates, once: the snapshot it makes
// current and the version it keeps for a rollback (held).
type appliedVersion struct {
	snap Snapshot
	kept cachedVersion
}

// swap makes a, written to s, the snapshot Current returns, offers it on
// Updates and marks the watcher ready.
func (w *Watcher) swap(s *Snapshot, a *accepted, fromLKG bool) {
	*s = Snapshot{Config: w.cfg, Version: a.meta.Version, Checksum: a.meta.Checksum, Commit: a.meta.Commit,
		Content: a.content, Deleted: a.meta.Deleted, FromLastKnownGood: fromLKG, AppliedAt: time.Now(), value: a.value}
	w.cur.Store(s)
	w.publish(s)
	w.markReady()
}

// check runs the service's checks on a version's content: the validation
// hook on the bytes, then (Typed) the decoding and the hook on the value.
// what names the check that failed.
func (w *Watcher) check(content []byte) (value any, what string, err error) {
	if w.o.validate != nil {
		if err := w.o.validate(content); err != nil {
			return nil, "validation hook", err
		}
	}
	if w.o.decode == nil {
		return nil, "", nil
	}
	if value, err = w.o.decode(content); err != nil {
		return nil, "decode", err
	}
	if w.o.validateValue != nil {
		if err := w.o.validateValue(value); err != nil {
			return nil, "validation hook", err
		}
	}
	return value, "", nil
}

// skipOlder and refuseOtherChecksum are apply's refusals, built out of
// line: every apply's stack frame would otherwise hold their formatting,
// and a frame that outgrows an idle watcher's shrunken stack costs a stack
// copy per apply.
func (w *Watcher) skipOlder(p *cuecast.Pointer, cur uint64) {
	w.event(EventSkipped, p.Version, fmt.Sprintf("pointer names version %d, older than %d, without rollback", p.Version, cur), nil)
}

// refuseOldRollback refuses a genuine rollback older than what runs, and
// reports it as refused (Report.Refused): only whoever can write the
// stream stores one again, and the operator should see that it happened.
func (w *Watcher) refuseOldRollback(p *cuecast.Pointer, cur uint64) {
	w.refuse(p.Version, fmt.Errorf("rollback at revision %d is not above revision %d of the pointer version %d came from: an old rollback stored again, not followed",
		p.Revision, w.curRev, cur))
}

func (w *Watcher) refuseOtherChecksum(p *cuecast.Pointer, cur string) {
	// A version's content never changes: refused, and reported apart from
	// last_error, as a forgery is; it says nothing of this instance's
	// ability to apply (docs/PROTOCOL.md §4.3, §5.3).
	w.refuse(p.Version, fmt.Errorf("names version %d with checksum %s, running %s: %w", p.Version, p.Checksum, cur, cuecast.ErrChecksumMismatch))
}

// rejectKey names a version whose content was refused for good (by the
// validation hook or the decoder): the same bytes would fail the same way.
func rejectKey(p *cuecast.Pointer) string {
	return strconv.FormatUint(p.Version, 10) + "@" + p.Checksum
}

func (w *Watcher) isRejected(p *cuecast.Pointer) bool {
	return len(w.rejected) > 0 && w.rejected[rejectKey(p)]
}

// clearLKGFlag republishes the current snapshot as confirmed.
func (w *Watcher) clearLKGFlag() {
	if cur := w.cur.Load(); cur != nil && cur.FromLastKnownGood {
		s := *cur
		s.FromLastKnownGood = false
		w.cur.Store(&s)
	}
}

// publish hands s, just made current, to the TypedWatcher's sink and, once
// Updates has been called, offers it there. Without a reader of Updates,
// nothing is offered: Updates' first call offers the newest (offerLocked).
// Seeing updatesUsed false is safe: Updates sets it before reading cur,
// which already holds s.
func (w *Watcher) publish(s *Snapshot) {
	if w.o.sink != nil {
		w.o.sink(*s)
	}
	if !w.updatesUsed.Load() {
		return
	}
	w.updatesMu.Lock()
	w.offerLocked()
	w.updatesMu.Unlock()
}
