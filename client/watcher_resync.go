package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// Where pointers come from: the reads of the stored pointers (at start, on
// reconnect, at each reconcile and after a gap) and the RePublished
// messages; which one governs is decided by its signed revision.

// errNoRevision rejects a pointer written before pointers were ordered by a
// signed revision (by a serve older than the client).
var errNoRevision = fmt.Errorf("pointer has no revision (written by a serve older than pointer signing v3; upgrade serve): %w", cuecast.ErrBadSignature)

// resync reads the current pointers (its bucket's, every bucket's and its
// own, at once) and applies the newest.
func (w *Watcher) resync(why string) {
	ctx, cancel := context.WithTimeout(w.ctx, w.c.o.timeout)
	defer cancel()
	got := w.readPointers(ctx)
	found := false
	for _, r := range got {
		if errors.Is(r.err, cuecast.ErrNotFound) {
			continue
		}
		if r.err != nil {
			if w.ctx.Err() != nil {
				return
			}
			w.retries++
			d := jittered(backoff(w.retries, 100*time.Millisecond, w.c.o.reconcile))
			w.event(EventError, 0, fmt.Sprintf("read pointer (%s); retrying in %s", why, d.Round(time.Millisecond)), r.err)
			w.after(&w.retryAt, d)
			return
		}
		found = true
	}
	if w.behind == 0 && w.stageBehind == 0 && !w.unsure {
		w.retries = 0 // while behind or unsure, the re-reads back off
	}
	if !found {
		w.warnNotFound(ctx, why)
		// Not deployed to this instance yet, but a strict config's
		// version may be staged already: its cohort pointer follows the
		// flip, which waits for this instance to stage it (issue 15,
		// item 4).
		w.resyncCutover(ctx)
		w.catchUp(&w.behind, "pointer", 0)
		w.unsure = w.unsure || why == "start" || why == "reconnect"
		w.settle()
		return
	}
	w.unsure = false
	w.notFoundAt = time.Time{}
	if why != "start" {
		w.event(EventResync, 0, why, nil)
	}
	p, body, ok := w.governing(got)
	read := max(w.revs[0], w.revs[1], w.revs[2])
	if ok {
		w.apply(&p, body, why)
		w.resyncCutover(ctx)
	}
	w.catchUp(&w.behind, "pointer", read)
}

// settle reads the pointers again while unsure, backing off from a second
// (each wait drawn between its half and it: 1, 2, 4 and 8 s at the default
// reconcile interval, up to a fourth of it), then no more, as the reconcile
// reads them too. A fleet started on a config not deployed yet pays a few
// reads each; one started right after a deploy gets its version in a
// second, not a reconcile interval.
func (w *Watcher) settle() {
	if !w.unsure {
		return
	}
	w.retries++
	d := backoff(w.retries, time.Second, w.c.o.reconcile)
	if d > w.c.o.reconcile/4 {
		w.unsure = false
		return
	}
	w.after(&w.retryAt, jittered(d))
}

// catchUp reads the pointers again, backing off, while the newest what
// (pointer, or staged pointer) the stream read has, of revision read, is
// older than one whose version it did not have (*behind: w.behind or
// w.stageBehind): a mirror that has not caught up yet. Once it has, *behind
// is cleared.
func (w *Watcher) catchUp(behind *uint64, what string, read uint64) {
	if *behind == 0 {
		return
	}
	if read >= *behind {
		*behind = 0
		return
	}
	w.scheduleRetry()
	w.event(EventError, 0, fmt.Sprintf("the stream read is behind a %s already received (revision %d, it has %d): a mirror not caught up yet; reading again in %s",
		what, *behind, read, time.Until(w.retryAt).Round(time.Millisecond)), cuecast.ErrNotFound)
}

// read is one stored pointer as a direct get returned it.
type read struct {
	m   *nats.Msg
	err error
}

// readPointers reads the stored pointers of ptrSubjects at once.
func (w *Watcher) readPointers(ctx context.Context) [3]read {
	var reads [3]chan read
	for i, subj := range w.ptrSubjects {
		reads[i] = make(chan read, 1)
		go func() {
			m, err := getLast(ctx, w.c.nc, w.c.o.directGet, subj)
			reads[i] <- read{m, err}
		}()
	}
	var got [3]read
	for i := range reads {
		got[i] = <-reads[i]
	}
	return got
}

// governing returns the stored pointer that governs and sets the
// revisions and sequences seen from the stored ones. The stored pointers
// are the truth, even below the revisions seen (a stream restored from an
// older backup): the one with the highest revision governs. One that does
// not verify counts as absent; ok is false when none does.
func (w *Watcher) governing(got [3]read) (p cuecast.Pointer, body []byte, ok bool) {
	var revs, seqs [3]uint64
	newest := -1
	for i, r := range got {
		if r.err != nil {
			continue
		}
		var rp cuecast.Pointer
		rbody, ok := w.pointer(&rp, r.m, w.ptrSubjects[i], 0)
		if !ok {
			continue
		}
		revs[i] = rp.Revision
		seqs[i], _, _ = seqHeaders(r.m) // 0 when unreadable: the next message there re-reads
		if newest < 0 || rp.Revision > p.Revision {
			newest, p, body = i, rp, rbody
		}
	}
	w.revs, w.seen, w.actRev = revs, seqs, 0
	return p, body, newest >= 0
}

// warnNotFound says, in an EventNotFound, that no pointer for this
// instance exists: at the first read that finds none, then at most once per
// reconcile interval while that lasts (the reconcile re-reads the
// pointers). It tells a config that has no version at all (a misspelt path,
// or one not merged yet) from one whose rollout has not reached this
// instance.
func (w *Watcher) warnNotFound(ctx context.Context, why string) {
	if !w.notFoundAt.IsZero() && time.Since(w.notFoundAt) < w.c.o.reconcile*9/10 {
		return
	}
	var detail string
	m, err := getLast(ctx, w.c.nc, w.c.o.directGet, cuecast.VersionSubject(w.cfg))
	var meta cuecast.Version
	switch {
	case errors.Is(err, cuecast.ErrNotFound):
		detail = fmt.Sprintf("config %s does not exist: no version was ever published under this path "+
			"(misspelt? `cuecast log %s` lists its versions); waiting for one", w.cfg, w.cfg)
	case err == nil && json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &meta) == nil && meta.Version != 0:
		detail = fmt.Sprintf("config %s has versions (newest %d) but none is deployed to this instance "+
			"(cohort %d) yet: its rollout has not reached it (`cuecast status %s`); waiting", w.cfg, meta.Version, w.bucket, w.cfg)
	default:
		detail = fmt.Sprintf("no version of config %s is deployed to this instance (cohort %d) yet; waiting", w.cfg, w.bucket)
	}
	if why != "start" {
		detail += " (" + why + ")"
	}
	// Stamped after the read, right before the event: the events are
	// then at least 9/10 of the interval apart, however long reads take.
	w.notFoundAt = time.Now()
	w.event(EventNotFound, 0, detail, cuecast.ErrNotFound)
}

// handle processes one message from the pointer or cutover subjects. Which
// pointer governs and what is a replay is decided by the signed revision
// only: whatever the headers say, an old pointer sent again changes
// nothing, and the next genuine one is applied.
func (w *Watcher) handle(m *nats.Msg) {
	if w.handleCutover(m) {
		return
	}
	k := w.pointerSubject(m.Subject)
	if k < 0 {
		return
	}
	var p cuecast.Pointer
	body, ok := w.pointer(&p, m, w.ptrSubjects[k], w.revs[k])
	if !ok {
		// Seen already (the start read raced the subscription), a replay,
		// or a forgery: nothing moves, so what follows is judged as before.
		return
	}
	governs := p.Revision > max(w.revs[0], w.revs[1], w.revs[2], w.actRev)
	w.revs[k] = p.Revision
	// The unsigned headers only hint at a missed pointer (a predecessor
	// other than the last one seen here, or none readable): a re-read.
	seq, last, err := seqHeaders(m)
	gap := err != nil || last != w.seen[k]
	w.seen[k] = seq
	if governs {
		w.apply(&p, body, "pointer")
	}
	if gap {
		w.resync("gap")
	}
}

// The lengths pointerSubject compares by.
const (
	spLen   = len(cuecast.StoredPrefix)
	rpLen   = len(cuecast.RepublishPrefix)
	rpDelta = rpLen - spLen
)

// pointerSubject returns which of ptrSubjects a RePublished message came
// on, or -1.
func (w *Watcher) pointerSubject(republishedSubj string) int {
	for i, subj := range w.ptrSubjects {
		// cuecast.Republished(subj) without building it.
		if len(republishedSubj) == len(subj)+rpDelta && republishedSubj[rpLen:] == subj[spLen:] {
			return i
		}
	}
	return -1
}

// pointer decodes and verifies a pointer message stored on subj into p,
// rejecting bad ones; one whose revision is not above after is dropped
// unverified and silently (the same pointer again, or a replay of an older
// one). body is the inline content when the pointer says so (still to be
// checked against the pointer's checksum), else nil. The pointer is the
// caller's, written through, and the refusals are out of line, so that
// the frames of the apply path stay small (stack_test.go).
func (w *Watcher) pointer(p *cuecast.Pointer, m *nats.Msg, subj string, after uint64) (body []byte, ok bool) {
	hdr := m.Header.Get(cuecast.HeaderPointer)
	// A header a shared Keyring has seen verified is that pointer again:
	// only what is this watcher's own is left to check.
	known := w.c.o.keyring.verifiedPointer(p, hdr)
	if !known {
		if err := decodePointer(p, hdr); err != nil {
			w.undecodable(err)
			return nil, false
		}
		if p.Revision == 0 {
			w.refuse(p.Version, errNoRevision)
			return nil, false
		}
	}
	if p.Revision <= after {
		return nil, false
	}
	var err error
	if known {
		err = w.checkTarget(p, subj)
	} else if err = w.verifyPointer(p, subj); err == nil {
		w.c.o.keyring.rememberPointer(hdr, p)
	}
	if err != nil {
		w.refuse(p.Version, err)
		return nil, false
	}
	if p.Inline {
		body = m.Data
		if body == nil {
			body = []byte{}
		}
	}
	return body, true
}

// undecodable refuses a pointer header that does not decode. It is a
// refused pointer like a forged one (Report.Refused), not a failure to
// apply: anyone who can publish on the subject can send junk, and that must
// not make an honest instance look failing.
func (w *Watcher) undecodable(err error) {
	w.refuse(0, fmt.Errorf("undecodable %s header: %w", cuecast.HeaderPointer, err))
}
