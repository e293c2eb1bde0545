package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
)

// Watcher keeps the current version of one config. Current never blocks;
// Updates delivers each newly applied Snapshot. Stop it (or cancel the
// context given to Watch) when done.
type Watcher struct {
	c      *Client
	cfg    cuecast.ConfigPath
	bucket int
	o      watchOptions
	// The subjects this watcher receives on and reports to, spelled once:
	// each message is matched against them.
	stagedSubj, activationSubj, reportSubj string
	// ptrSubjects are the stored pointer subjects this watcher follows:
	// its bucket's, every bucket's, its own. A pointer names the one it
	// was written to (signed), the cutover ones in stagedStored and
	// activationStored.
	ptrSubjects                    [3]string
	stagedStored, activationStored string

	cur     atomic.Pointer[Snapshot]
	updates chan Snapshot

	msgs   chan *nats.Msg
	subs   []*nats.Subscription
	status chan nats.Status

	ctx     context.Context
	cancel  context.CancelFunc
	started chan struct{} // closed after the start read
	// ready is closed at the first verified version or verified
	// last-known-good file (Ready); readyOnce guards it.
	ready     chan struct{}
	readyOnce sync.Once
	done      chan struct{}

	// Owned by the run goroutine.
	// revs is the revision of the last pointer accepted on each pointer
	// subject (ptrSubjects): the highest of the three governs, and a
	// message not above its subject's is a replay. Signed, unlike seen, the
	// last stream sequence on each subject from the unsigned headers, which
	// only detects gaps (a reason to re-read, never to ignore a message).
	// stagedRev and actRev are the same for the cutover subjects.
	revs, seen        [3]uint64
	stagedRev, actRev uint64
	cache             map[uint64]cachedVersion // versions staged for an activation (cutover.go), newer than current
	servingLKG        bool
	lastErr           string
	refused           string          // the last pointer refused (Report.Refused)
	rejected          map[string]bool // version@checksum rejected for good (validation, signature)
	retries           int
	notFoundAt        time.Time // last EventNotFound; zero once a pointer is found
	// held is the applied version as read (with its sequence), prev the one
	// before it: a rollback pointer to the previous version, the common
	// emergency, needs no read.
	held, prev cachedVersion
	staged     uint64 // strict configs: version staged for the activation (cutover.go)

	// The timed work (a retry, a report due soon, the reconcile, the
	// heartbeat) shares one timer, set for the earliest: the run loop's
	// select then waits on four channels instead of seven, which every
	// message pays for, and a process running many watchers keeps one
	// runtime timer per watcher instead of four. Zero: not scheduled.
	retryAt, reportAt, reconcileAt, heartbeatAt time.Time
	timer                                       *time.Timer
	timerAt                                     time.Time // when timer fires; zero when stopped
}

// errInsecure is the error of the event saying a watcher does not verify.
var errInsecure = errors.New("insecure: signature verification disabled")

// errNoRevision rejects a pointer written before pointers were ordered by a
// signed revision (by a serve older than the client).
var errNoRevision = fmt.Errorf("pointer has no revision (written by a serve older than pointer signing v3; upgrade serve): %w", cuecast.ErrBadSignature)

type cachedVersion struct {
	meta cuecast.Version
	seq  uint64
	body []byte
}

// Watch starts watching cfg. It loads the last-known-good file first (when
// LastKnownGood is given), subscribes to its cohort's pointer subject (and
// the cutover subjects), then reads the current pointer; it waits for that first read unless the
// connection is down (the watcher then serves the last-known-good value and
// keeps trying). ctx bounds the watcher's life: cancelling it is the same
// as Stop. Watch returns an error only for invalid arguments or a failed
// subscription.
func (c *Client) Watch(ctx context.Context, cfg cuecast.ConfigPath, opts ...WatchOption) (*Watcher, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("watch: %w", err)
	}
	var wo watchOptions
	for _, opt := range opts {
		if err := opt(&wo); err != nil {
			return nil, fmt.Errorf("watch %s: %w", cfg, err)
		}
	}
	if wo.decode == nil && (wo.strict || wo.validateValue != nil) {
		return nil, fmt.Errorf("watch %s: StrictDecoding and ValidateValue are options of Typed, not Watch", cfg)
	}
	w := newWatcher(c, cfg, wo)
	w.ctx, w.cancel = context.WithCancel(ctx)
	if err := c.track(w); err != nil {
		w.cancel()
		return nil, fmt.Errorf("watch %s: %w", cfg, err)
	}
	w.loadLKG()
	// Not the version subject: a pointer carries small content itself, and
	// every message the server need not send to 10,000 instances shortens
	// the fan-out (docs/PROTOCOL.md §3).
	for _, subj := range append(w.ptrSubjects[:], cutoverSubjects(cfg)...) {
		sub, err := c.nc.ChanSubscribe(cuecast.Republished(subj), w.msgs)
		if err != nil {
			w.unsubscribe()
			w.cancel()
			c.untrack(w)
			return nil, fmt.Errorf("watch %s: subscribe %s: %w", cfg, cuecast.Republished(subj), err)
		}
		w.subs = append(w.subs, sub)
	}
	w.status = c.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	go w.run()
	if c.nc.IsConnected() {
		select {
		case <-w.started:
		case <-w.ctx.Done():
		}
	}
	return w, nil
}

// newWatcher is a Watcher of cfg before it subscribes or runs.
func newWatcher(c *Client, cfg cuecast.ConfigPath, wo watchOptions) *Watcher {
	w := &Watcher{
		c:        c,
		cfg:      cfg,
		bucket:   cuecast.Cohort(cfg.Namespace(), c.o.instance),
		o:        wo,
		updates:  make(chan Snapshot, 1),
		msgs:     make(chan *nats.Msg, 256),
		started:  make(chan struct{}),
		ready:    make(chan struct{}),
		done:     make(chan struct{}),
		cache:    map[uint64]cachedVersion{},
		rejected: map[string]bool{},
		timer:    time.NewTimer(time.Hour),
	}
	w.timer.Stop()
	w.stagedStored, w.activationStored = cuecast.StagedSubject(cfg), cuecast.ActivationSubject(cfg)
	w.stagedSubj, w.activationSubj = cuecast.Republished(w.stagedStored), cuecast.Republished(w.activationStored)
	w.reportSubj = cuecast.ReportSubject(cfg, c.o.instance)
	w.ptrSubjects = [3]string{cuecast.PointerSubject(cfg, w.bucket), cuecast.AllPointerSubject(cfg), cuecast.InstancePointerSubject(cfg, c.o.instance)}
	return w
}

// Current returns the applied snapshot, or the zero Snapshot before any
// version is known. It never blocks.
func (w *Watcher) Current() Snapshot {
	if s := w.cur.Load(); s != nil {
		return *s
	}
	return Snapshot{}
}

// Updates delivers each applied Snapshot (the last-known-good one first, when
// loaded). It holds only the newest: a reader that falls behind skips to the
// latest. It is closed when the watcher stops.
func (w *Watcher) Updates() <-chan Snapshot { return w.updates }

// Stop ends the watch and waits for its goroutine. It is safe to call more
// than once and from any goroutine.
func (w *Watcher) Stop() {
	w.cancel()
	<-w.done
}

// ErrNotReady is WaitReady's error when its context ends (or the watcher
// stops) before the watcher has a verified version: the error wraps it and
// the context's error.
var ErrNotReady = errors.New("no verified version yet")

// Ready is closed once the watcher has a verified version to serve: the
// first one applied from the server, or a last-known-good file that
// verified at start, whichever comes first. Until then Current is the zero
// Snapshot. A service that must not run on a zero config waits for it
// (WaitReady) before serving; one that has a default can start at once and
// pick the version up from Updates. It is never closed for a watcher that
// stops before having a version.
func (w *Watcher) Ready() <-chan struct{} { return w.ready }

// WaitReady blocks until Ready is closed, ctx ends or the watcher stops.
// It returns nil when the watcher has a verified version, else an error
// wrapping ErrNotReady (and ctx's error when ctx ended). Watch events
// (WithEvents) say why it is waiting: EventNotFound when no version is
// deployed to this instance, EventError for a failing read, EventRejected.
func (w *Watcher) WaitReady(ctx context.Context) error {
	select {
	case <-w.ready:
		return nil
	default:
	}
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait ready %s: %w: %w", w.cfg, ErrNotReady, ctx.Err())
	case <-w.done:
		select {
		case <-w.ready:
			return nil
		default:
		}
		return fmt.Errorf("wait ready %s: %w: watcher stopped", w.cfg, ErrNotReady)
	}
}

func (w *Watcher) markReady() { w.readyOnce.Do(func() { close(w.ready) }) }

// Bucket is the cohort bucket whose pointer this watcher follows.
func (w *Watcher) Bucket() int { return w.bucket }

func (w *Watcher) unsubscribe() {
	for _, s := range w.subs {
		_ = s.Unsubscribe()
	}
}

func (w *Watcher) run() {
	defer close(w.done)
	defer close(w.updates)
	if w.o.closeSink != nil {
		defer w.o.closeSink()
	}
	defer w.c.untrack(w)
	defer w.c.nc.RemoveStatusListener(w.status)
	defer w.unsubscribe()

	defer w.timer.Stop()
	w.after(&w.reconcileAt, jitter10(w.c.o.reconcile))
	// The first heartbeat is spread over one interval so that a fleet
	// started together does not report in lockstep.
	w.after(&w.heartbeatAt, rand.N(w.c.o.heartbeat)+1)

	if w.c.o.insecure {
		w.event(EventError, 0, "signatures are NOT verified (WithInsecureSkipVerify): anyone who can publish on the server decides what this instance runs", errInsecure)
	}
	w.resync("start")
	close(w.started)
	for {
		select {
		case <-w.ctx.Done():
			return
		case m := <-w.msgs:
			w.handle(m)
		case st := <-w.status:
			if st == nats.CLOSED {
				// nats.go gave up reconnecting (ConnectOptions never does).
				w.event(EventError, 0, "connection closed for good: serving the current version, no further updates; connect with client.ConnectOptions to reconnect forever", nats.ErrConnectionClosed)
				continue
			}
			w.resync("reconnect")
		case <-w.timer.C:
			w.tick()
		}
	}
}

// after schedules timed work d from now: *due is one of the watcher's
// deadlines (retryAt, reportAt, reconcileAt, heartbeatAt).
func (w *Watcher) after(due *time.Time, d time.Duration) {
	t := time.Now().Add(d)
	*due = t
	if w.timerAt.IsZero() || t.Before(w.timerAt) {
		w.timer.Reset(d)
		w.timerAt = t
	}
}

// tick does the timed work that is due and sets the timer for the next.
func (w *Watcher) tick() {
	w.timerAt = time.Time{}
	now := time.Now()
	due := func(t *time.Time) bool {
		if t.IsZero() || t.After(now) {
			return false
		}
		*t = time.Time{}
		return true
	}
	if due(&w.retryAt) {
		w.resync("retry")
	}
	if due(&w.reconcileAt) {
		w.resync("reconcile")
		w.after(&w.reconcileAt, jitter10(w.c.o.reconcile))
	}
	report := false
	if due(&w.heartbeatAt) {
		report = true
		w.after(&w.heartbeatAt, w.c.o.heartbeat)
	}
	if due(&w.reportAt) {
		report = true
	}
	if report {
		w.report()
	}
	var next time.Time
	for _, t := range [...]time.Time{w.retryAt, w.reportAt, w.reconcileAt, w.heartbeatAt} {
		if !t.IsZero() && (next.IsZero() || t.Before(next)) {
			next = t
		}
	}
	if !next.IsZero() && (w.timerAt.IsZero() || next.Before(w.timerAt)) {
		w.timer.Reset(max(time.Until(next), 0))
		w.timerAt = next
	}
}

func jitter10(d time.Duration) time.Duration {
	return d - d/10 + rand.N(d/5+1)
}

func (w *Watcher) event(kind EventKind, version uint64, detail string, err error) {
	w.c.o.events(Event{Kind: kind, Config: w.cfg, Version: version, Detail: detail, Err: err, At: time.Now()})
}

func (w *Watcher) loadLKG() {
	if w.o.lkgPath == "" {
		return
	}
	p, content, err := readLKG(w.o.lkgPath, w.cfg)
	if errors.Is(err, os.ErrNotExist) {
		return
	}
	if err == nil {
		err = w.verifyPointer(p, "")
	}
	meta := p.Meta()
	var value any
	if err == nil && !meta.Deleted {
		var what string
		if value, what, err = w.check(content); err != nil {
			err = fmt.Errorf("last-known-good %s: %s: %w", w.o.lkgPath, what, err)
		}
	}
	if err != nil {
		w.event(EventError, meta.Version, "ignoring last-known-good file; it will be replaced by the next good version", err)
		return
	}
	s := &Snapshot{Config: w.cfg, Version: meta.Version, Checksum: meta.Checksum, Commit: meta.Commit, Content: content,
		Deleted: meta.Deleted, FromLastKnownGood: true, AppliedAt: time.Now(), value: value}
	w.cur.Store(s)
	w.servingLKG = true
	w.publish(*s)
	w.markReady()
	w.event(EventLoaded, meta.Version, "serving last-known-good "+w.o.lkgPath, nil)
}

// resync reads the current pointers (its bucket's, every bucket's and its
// own, at once) and applies the newest.
func (w *Watcher) resync(why string) {
	ctx, cancel := context.WithTimeout(w.ctx, w.c.o.timeout)
	defer cancel()
	type read struct {
		m   *nats.Msg
		err error
	}
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
	w.retries = 0
	if !found {
		w.warnNotFound(ctx, why)
		// Not deployed to this instance yet, but a strict config's
		// version may be staged already: its cohort pointer follows the
		// flip, which waits for this instance to stage it (issue 15,
		// item 4).
		w.resyncCutover(ctx)
		return
	}
	w.notFoundAt = time.Time{}
	if why != "start" {
		w.event(EventResync, 0, why, nil)
	}
	// The stored pointers are the truth, even below the revisions seen (a
	// stream restored from an older backup): the one with the highest
	// revision governs. One that does not verify counts as absent.
	var revs, seqs [3]uint64
	newest := -1
	var p cuecast.Pointer
	var body []byte
	for i, r := range got {
		if r.err != nil {
			continue
		}
		rp, rbody, ok := w.pointer(r.m, w.ptrSubjects[i], 0)
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
	if newest < 0 {
		return
	}
	w.apply(p, body, why)
	w.resyncCutover(ctx)
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
	p, body, ok := w.pointer(m, w.ptrSubjects[k], w.revs[k])
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
		w.apply(p, body, "pointer")
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

// pointer decodes and verifies a pointer message stored on subj, rejecting
// bad ones; one whose revision is not above after is dropped unverified and
// silently (the same pointer again, or a replay of an older one). body is
// the inline content when the pointer says so (still to be checked against
// the pointer's checksum), else nil.
func (w *Watcher) pointer(m *nats.Msg, subj string, after uint64) (p cuecast.Pointer, body []byte, ok bool) {
	p, err := decodePointer(m.Header.Get(cuecast.HeaderPointer))
	if err != nil {
		w.reject(0, "undecodable pointer", fmt.Errorf("%s header: %w", cuecast.HeaderPointer, err), false)
		return p, nil, false
	}
	if p.Revision == 0 {
		w.refuse(p.Version, errNoRevision)
		return p, nil, false
	}
	if p.Revision <= after {
		return p, nil, false
	}
	if err := w.verifyPointer(p, subj); err != nil {
		w.refuse(p.Version, err)
		return p, nil, false
	}
	if p.Inline {
		body = m.Data
		if body == nil {
			body = []byte{}
		}
	}
	return p, body, true
}

// apply moves to the version a verified pointer names, if it should; body
// is the pointer's inline content or nil.
func (w *Watcher) apply(p cuecast.Pointer, body []byte, why string) {
	cur := w.cur.Load()
	if cur != nil {
		switch {
		case p.Version == cur.Version && p.Checksum == cur.Checksum:
			if w.servingLKG {
				w.servingLKG = false
				w.clearLKGFlag()
				w.reportSoon()
			}
			return
		case p.Version < cur.Version && !p.Rollback:
			// Never backwards without a rollback pointer.
			w.skipOlder(p, cur.Version)
			return
		case p.Version == cur.Version:
			w.rejectOtherChecksum(p, cur.Checksum)
			return
		}
	}
	if w.isRejected(p) {
		return
	}
	meta, content, err := w.fetch(p, body)
	if errors.Is(err, cuecast.ErrPurged) && why != "purged" {
		w.event(EventError, p.Version, "version purged; falling back to the current pointer", err)
		w.resync("purged")
		return
	}
	if err != nil {
		permanent := errors.Is(err, cuecast.ErrBadSignature) || errors.Is(err, cuecast.ErrChecksumMismatch)
		if !permanent {
			w.scheduleRetry()
		}
		w.reject(p.Version, "fetch", err, false)
		return
	}
	var value any
	if !meta.Deleted {
		var what string
		if value, what, err = w.check(content); err != nil {
			w.rejected[rejectKey(p)] = true
			w.reject(p.Version, what, err, true)
			return
		}
	}
	s := &Snapshot{Config: w.cfg, Version: meta.Version, Checksum: meta.Checksum, Commit: meta.Commit,
		Content: content, Deleted: meta.Deleted, AppliedAt: time.Now(), value: value}
	w.cur.Store(s)
	if w.held.seq != 0 {
		w.prev = w.held
	}
	w.held = cachedVersion{meta: meta, seq: p.Seq, body: content}
	w.servingLKG = false
	w.lastErr = ""
	for n := range w.cache {
		if n <= s.Version {
			delete(w.cache, n)
		}
	}
	w.publish(*s)
	w.markReady()
	if w.o.lkgPath != "" {
		if err := writeLKG(w.o.lkgPath, p, content); err != nil {
			w.lastErr = err.Error()
			w.event(EventError, meta.Version, "applied, but not saved as last-known-good", err)
		}
	}
	w.event(EventApplied, meta.Version, why, nil)
	w.reportSoon()
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

// The messages of apply's refusals are built out of line: every apply's
// stack frame would otherwise hold their formatting, and a frame that
// outgrows an idle watcher's shrunken stack costs a stack copy per apply.

func (w *Watcher) skipOlder(p cuecast.Pointer, cur uint64) {
	w.event(EventSkipped, p.Version, fmt.Sprintf("pointer names version %d, older than %d, without rollback", p.Version, cur), nil)
}

func (w *Watcher) rejectOtherChecksum(p cuecast.Pointer, cur string) {
	w.reject(p.Version, "pointer", fmt.Errorf("names version %d with checksum %s, running %s: %w", p.Version, p.Checksum, cur, cuecast.ErrChecksumMismatch), false)
}

// rejectKey names a version whose content was refused for good (by the
// validation hook or the decoder): the same bytes would fail the same way.
func rejectKey(p cuecast.Pointer) string {
	return strconv.FormatUint(p.Version, 10) + "@" + p.Checksum
}

func (w *Watcher) isRejected(p cuecast.Pointer) bool {
	return len(w.rejected) > 0 && w.rejected[rejectKey(p)]
}

// reportSoon schedules a report after a random delay between a quarter and
// one and a quarter of a spread of a fifteenth of the heartbeat (at most a
// second): a fleet applying the same pointer at the same moment would
// otherwise send its reports in one burst, which the server must store while
// it is still fanning the change out. The quarter keeps reports out of the
// fan-out itself (about 0.2 s for 10,000 instances on the reference box);
// storing them during it made the change reach the last instance about
// 20 % later (BENCHMARKS.md, "Distribution").
func (w *Watcher) reportSoon() {
	if !w.reportAt.IsZero() {
		return // one is due already
	}
	spread := min(w.c.o.heartbeat/15, time.Second)
	w.after(&w.reportAt, spread/4+rand.N(spread+1)+1)
}

func (w *Watcher) scheduleRetry() {
	w.retries++
	w.after(&w.retryAt, jittered(backoff(w.retries, 100*time.Millisecond, w.c.o.reconcile)))
}

// clearLKGFlag republishes the current snapshot as confirmed.
func (w *Watcher) clearLKGFlag() {
	if cur := w.cur.Load(); cur != nil && cur.FromLastKnownGood {
		s := *cur
		s.FromLastKnownGood = false
		w.cur.Store(&s)
	}
}

// publish offers s on Updates, replacing an unread older one.
func (w *Watcher) publish(s Snapshot) {
	if w.o.sink != nil {
		w.o.sink(s)
	}
	for {
		select {
		case w.updates <- s:
			return
		default:
		}
		select {
		case <-w.updates:
		default:
		}
	}
}

// refuse reports a pointer that failed verification apart from last_error:
// a forgery says nothing about this instance's ability to apply the version
// (issue 15, item 5), so the health gate must not count it as a failure.
func (w *Watcher) refuse(version uint64, err error) {
	w.refused = fmt.Sprintf("version %d: pointer: %v", version, err)
	w.event(EventRejected, version, "pointer", err)
	w.reportSoon()
}

func (w *Watcher) reject(version uint64, what string, err error, forGood bool) {
	if forGood {
		// Stays rejected: the same bytes will fail the same way.
		if cur := w.cache[version]; cur.meta.Version == version {
			delete(w.cache, version)
		}
	}
	w.lastErr = fmt.Sprintf("version %d: %s: %v", version, what, err)
	w.event(EventRejected, version, what, err)
	if forGood || errors.Is(err, cuecast.ErrBadSignature) || errors.Is(err, cuecast.ErrChecksumMismatch) {
		w.reportSoon()
	}
}

// fetch returns the verified metadata and content of the version p names:
// the inline body when p has one, else a copy kept here (staged, or the
// version before the current one), else the stored version.
func (w *Watcher) fetch(p cuecast.Pointer, inline []byte) (cuecast.Version, []byte, error) {
	if p.Inline {
		meta, body, err := w.verifyContent(p, p.Meta(), inline)
		if err == nil {
			return meta, body, nil
		}
		// Damaged on the way, or a forgery: the stream's copy decides.
		w.event(EventRejected, p.Version, "inline content does not verify; reading the stored version", err)
	}
	return w.fetchKept(p)
}

// fetchKept is fetch without inline content: a kept copy, else the stored
// version. Apart from fetch so that the common case, inline content, keeps a
// small stack frame.
func (w *Watcher) fetchKept(p cuecast.Pointer) (cuecast.Version, []byte, error) {
	if cv, ok := w.cache[p.Version]; ok && cv.seq == p.Seq {
		meta, body, err := w.verifyContent(p, cv.meta, cv.body)
		if err == nil {
			return meta, body, nil
		}
		delete(w.cache, p.Version)
	}
	if w.prev.seq == p.Seq && w.prev.meta.Version == p.Version {
		if meta, body, err := w.verifyContent(p, w.prev.meta, w.prev.body); err == nil {
			return meta, body, nil
		}
	}
	var meta cuecast.Version
	var body []byte
	{
		ctx, cancel := context.WithTimeout(w.ctx, w.c.o.timeout)
		defer cancel()
		m, err := getBySeq(ctx, w.c.nc, w.c.o.directGet, p.Seq)
		if errors.Is(err, cuecast.ErrNotFound) {
			return meta, nil, fmt.Errorf("read version %d at %d: %w", p.Version, p.Seq, cuecast.ErrPurged)
		}
		if err != nil {
			return meta, nil, fmt.Errorf("read version %d at %d: %w", p.Version, p.Seq, err)
		}
		if s := m.Header.Get(headerSubj); s != cuecast.VersionSubject(w.cfg) {
			return meta, nil, fmt.Errorf("pointer names sequence %d on %s, not a version of %s: %w", p.Seq, s, w.cfg, cuecast.ErrChecksumMismatch)
		}
		if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &meta); err != nil {
			return meta, nil, fmt.Errorf("decode version %d metadata: %w", p.Version, err)
		}
		body = m.Data
	}
	return w.verifyContent(p, meta, body)
}

// verifyContent checks version metadata against the pointer, its signature,
// and the content (reading chunks) against the metadata.
func (w *Watcher) verifyContent(p cuecast.Pointer, meta cuecast.Version, body []byte) (cuecast.Version, []byte, error) {
	if meta.Config != w.cfg || meta.Version != p.Version || meta.Checksum != p.Checksum {
		return meta, nil, fmt.Errorf("pointer names %s@%d %s, stored version is %s@%d %s: %w",
			p.Config, p.Version, p.Checksum, meta.Config, meta.Version, meta.Checksum, cuecast.ErrChecksumMismatch)
	}
	// The version's own signature is not checked here: the pointer's
	// (verified before) covers the checksum and size that the content is
	// checked against below, so it authenticates the content, and one
	// ed25519 verification per apply instead of two halves the cost for a
	// fleet sharing a host. The version signature guards the last-known-good
	// file, which has no pointer.
	if len(meta.Chunks) > 0 && len(body) == 0 {
		// A kept copy holds the whole content; a version message none.
		var err error
		if body, err = w.fetchChunks(meta); err != nil {
			return meta, nil, err
		}
	}
	if int64(len(body)) != meta.Size || !cuecast.ChecksumMatches(body, meta.Checksum) {
		got := cuecast.Checksum(body)
		return meta, nil, fmt.Errorf("version %d content hashes to %s (%d bytes), metadata says %s (%d bytes): %w",
			meta.Version, got, len(body), meta.Checksum, meta.Size, cuecast.ErrChecksumMismatch)
	}
	return meta, body, nil
}

func (w *Watcher) fetchChunks(meta cuecast.Version) ([]byte, error) {
	if meta.Size < 0 || meta.Size > 1<<30 {
		return nil, fmt.Errorf("version %d: size %d out of range: %w", meta.Version, meta.Size, cuecast.ErrChecksumMismatch)
	}
	buf := make([]byte, 0, meta.Size)
	want := strconv.FormatUint(meta.Version, 10)
	for i, seq := range meta.Chunks {
		ctx, cancel := context.WithTimeout(w.ctx, w.c.o.timeout)
		m, err := getBySeq(ctx, w.c.nc, w.c.o.directGet, seq)
		cancel()
		if errors.Is(err, cuecast.ErrNotFound) {
			return nil, fmt.Errorf("read chunk %d/%d of version %d: %w", i+1, len(meta.Chunks), meta.Version, cuecast.ErrPurged)
		}
		if err != nil {
			return nil, fmt.Errorf("read chunk %d/%d of version %d: %w", i+1, len(meta.Chunks), meta.Version, err)
		}
		if m.Header.Get(headerSubj) != cuecast.ChunkSubject(w.cfg) || m.Header.Get(cuecast.HeaderChunkVersion) != want {
			return nil, fmt.Errorf("chunk %d/%d at %d is not part of version %d: %w", i+1, len(meta.Chunks), seq, meta.Version, cuecast.ErrChecksumMismatch)
		}
		buf = append(buf, m.Data...)
	}
	return buf, nil
}

// verifyPointer checks that p is a pointer of this watcher's config written
// to subj (for the last-known-good file, subj is "": any subject it applies
// pointers from), and its signature. The signed subject is what keeps a
// pointer for another bucket or instance, replayed here, from applying.
func (w *Watcher) verifyPointer(p cuecast.Pointer, subj string) error {
	if p.Config != w.cfg {
		return fmt.Errorf("pointer on %s names config %s: %w", cuecast.PointerSubject(w.cfg, w.bucket), p.Config, cuecast.ErrBadSignature)
	}
	if subj == "" && !w.appliesFrom(p.Subject) || subj != "" && p.Subject != subj {
		return w.wrongSubject(p, subj)
	}
	if w.c.o.keyring == nil {
		return nil
	}
	return w.c.o.keyring.Verify(p.SigningBytes(), p.Signature)
}

// appliesFrom reports whether the watcher applies pointers stored on subj.
func (w *Watcher) appliesFrom(subj string) bool {
	return subj != "" && (subj == w.activationStored || subj == w.ptrSubjects[0] || subj == w.ptrSubjects[1] || subj == w.ptrSubjects[2])
}

// wrongSubject is out of line: verifyPointer runs for every message.
func (w *Watcher) wrongSubject(p cuecast.Pointer, subj string) error {
	if subj == "" {
		subj = "this instance's subjects"
	}
	return fmt.Errorf("pointer written to %q arrived on %s: %w", p.Subject, subj, cuecast.ErrBadSignature)
}

// report publishes the instance's state on its report subject (a core
// publish: the report stream stores it, nothing waits for an ack).
func (w *Watcher) report() {
	s := w.Current()
	r := cuecast.Report{
		Instance:      w.c.o.instance,
		Labels:        w.c.o.labels,
		Cohort:        w.bucket,
		Config:        w.cfg,
		Version:       s.Version,
		Checksum:      s.Checksum,
		Healthy:       w.c.o.health().Healthy,
		LastKnownGood: w.servingLKG,
		LastError:     w.lastErr,
		Refused:       w.refused,
		Staged:        w.staged,
		AppliedAt:     s.AppliedAt.UTC(),
		At:            time.Now().UTC(),
	}
	b, err := json.Marshal(r)
	if err == nil {
		err = w.c.nc.Publish(w.reportSubj, b)
	}
	if err != nil && !errors.Is(err, nats.ErrConnectionClosed) {
		w.event(EventError, s.Version, "report", err)
	}
}
