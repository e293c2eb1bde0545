package client

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
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
	// updatesUsed: Updates has been called, so each applied snapshot is
	// offered on updates. Until then nothing is: most services read
	// Current (and a TypedWatcher's reader its own channel), and an offer
	// is three operations on a channel that, in a fleet, is out of cache.
	// updatesMu orders the offers of the run loop and of Updates' first
	// call; updatesLast is the last snapshot offered (no snapshot twice),
	// updatesClosed says the run loop has closed updates.
	updatesUsed   atomic.Bool
	updatesMu     sync.Mutex
	updatesLast   *Snapshot
	updatesClosed bool

	msgs chan *nats.Msg
	subs []*nats.Subscription
	// statusBits are the connection's status changes the Client's
	// forwarder has seen and the run loop has not taken yet
	// (statusReconnected, statusClosed); stopping is set when ctx ends,
	// before stopMsg is queued. Both live here, by the fields every message
	// reads, so that waking for a message touches no other memory.
	statusBits atomic.Uint32
	stopping   atomic.Bool

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
	// curRev is the revision of the pointer the current version came from
	// (applied, named by the last-known-good file, or the newest since that
	// named the same version: repointed). A rollback pointer
	// at or below it is an old one stored again (whoever may write the
	// stream can do that, but cannot sign a new one), and a re-read,
	// which otherwise follows the stream even below the revisions seen,
	// does not move back for it.
	curRev uint64
	// cache and rejected stay nil until first written: every apply asks
	// their length, which a nil map answers without reading memory.
	cache      map[uint64]cachedVersion // versions staged for an activation (cutover.go), newer than current
	servingLKG bool
	lastErr    string
	// stageErr is the version lastErr failed to stage (0: lastErr is no
	// staging error), so that staging a version at or above it clears it.
	stageErr uint64
	// unsaved is the pointer of the version served that the last-known-good
	// file could not take (a full disk); nil when the file is current. The
	// heartbeat saves it again until it can (saveLKG), and then clears
	// lastErr if it is still unsavedErr, the failure's.
	unsaved    *cuecast.Pointer
	unsavedErr string
	refused    string          // the last pointer refused (Report.Refused)
	rejected   map[string]bool // version@checksum rejected for good (validation, signature)
	retries    int
	notFoundAt time.Time // last EventNotFound; zero once a pointer is found
	// behind is the revision of a pointer whose version the stream read
	// did not have (0: none). A mirror copies CUECAST after CUECAST has
	// RePublished the pointer, so on a single server (where the namespace
	// mirror does not RePublish) the pointer can come first; until the
	// stream read has that pointer or a newer one, resync reads again.
	behind uint64
	// stageBehind is the same for the staged pointer of a strict config.
	stageBehind uint64
	// unsure: the read at start (or after a reconnect) found no pointer.
	// A pointer RePublished before this watcher subscribed is not heard,
	// and a mirror may not have copied it yet either, so resync reads
	// again a few times, backing off from a second, before it leaves that
	// to the reconcile.
	unsure bool
	// indexRefused is why Watch refused the variant index it read (empty:
	// it did not), the reason this watcher watches the base path: an index
	// arriving here is then no sign of a watcher started too early.
	indexRefused string
	// held is the applied version as read (with its sequence), prev the one
	// before it (nil: none): a rollback pointer to the previous version, the
	// common emergency, needs no read. Pointers (held into the apply's one
	// allocation, appliedVersion), so that each apply moves one word instead
	// of copying two versions' metadata in a watcher out of cache.
	held, prev *cachedVersion
	staged     uint64 // strict configs: version staged for the activation (cutover.go)

	// The timed work (a retry, a report due soon, the reconcile, the
	// heartbeat) shares one timer, set for the earliest, which wakes the
	// run loop through msgs (fire), so that it waits on that one channel
	// (which every message pays for), and a process running many watchers
	// keeps one runtime timer per watcher instead of four. Zero: not
	// scheduled.
	retryAt, reportAt, reconcileAt, heartbeatAt time.Time
	timer                                       *time.Timer
	timerAt                                     time.Time // when timer fires; zero when stopped
}

// errInsecure is the error of the event saying a watcher does not verify.
var errInsecure = errors.New("insecure: signature verification disabled")

type cachedVersion struct {
	meta cuecast.Version
	seq  uint64
	body []byte
}

// Watch starts watching cfg. When connected it reads cfg's newest version
// once, to pick a variant if cfg has variants; then it loads the
// last-known-good file (when LastKnownGood is given), subscribes to its
// cohort's pointer subjects (and the cutover subjects), then reads the
// current pointer; it waits for that first read unless the
// connection is down (the watcher then serves the last-known-good value and
// keeps trying). ctx bounds the watcher's life: cancelling it is the same
// as Stop. Watch returns an error only for invalid arguments, a failed
// subscription, a Client already closed, or a config with variants that
// has none for this instance (wrapping ErrVariant).
//
// A config with variants (docs/VARIANTS.md) has a variant index at cfg:
// Watch reads it once, picks the variant of the instance's dimensions
// (WithDimensions) and watches that variant path instead, exactly like a
// config (Snapshot.Config, events, reports and the last-known-good file
// name it). The choice is made at Watch: a later change of the index that
// removes the variant tombstones it (the watcher holds the tombstone and
// says, in an EventError wrapping ErrVariant, to Watch again), and a
// plain config's watcher never applies a variant index published at its
// path later (EventRejected wrapping ErrVariant). When the server is
// unreachable at Watch, or its newest version is an index that fails
// verification (refused: an EventRejected, and Report.Refused of the
// watcher), the variant named by the last-known-good file is watched if it
// matches the declared dimensions. An index signed by a key no longer
// trusted (published before a key rotation) verifies by the trusted
// all-buckets pointer of cfg that names it.
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
	target, refused, err := c.resolveVariant(ctx, cfg, wo)
	if err != nil {
		return nil, fmt.Errorf("watch %s: %w", cfg, err)
	}
	cfg = target
	w := newWatcher(c, cfg, wo)
	w.refused, w.indexRefused = refused, refused
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
		c:       c,
		cfg:     cfg,
		bucket:  cuecast.Cohort(cfg.Namespace(), c.o.instance),
		o:       wo,
		updates: make(chan Snapshot, 1),
		msgs:    make(chan *nats.Msg, 256),
		started: make(chan struct{}),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	w.timer = time.AfterFunc(time.Hour, w.fire)
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
func (w *Watcher) Updates() <-chan Snapshot {
	if !w.updatesUsed.Load() {
		w.updatesMu.Lock()
		w.updatesUsed.Store(true)
		w.offerLocked() // the newest so far, as if it had been offered all along
		w.updatesMu.Unlock()
	}
	return w.updates
}

// offerLocked offers the current snapshot on updates, replacing an unread
// older one, unless it was offered already. updatesMu must be held.
func (w *Watcher) offerLocked() {
	s := w.cur.Load()
	if s == nil || s == w.updatesLast || w.updatesClosed {
		return
	}
	w.updatesLast = s
	for {
		select {
		case w.updates <- *s:
			return
		default:
		}
		select {
		case <-w.updates:
		default:
		}
	}
}

// closeUpdates is the run loop's last word on updates.
func (w *Watcher) closeUpdates() {
	w.updatesMu.Lock()
	w.updatesClosed = true
	close(w.updates)
	w.updatesMu.Unlock()
}

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
	defer w.closeUpdates()
	if w.o.closeSink != nil {
		defer w.o.closeSink()
	}
	defer w.c.untrack(w)
	defer w.unsubscribe()

	defer w.timer.Stop()
	defer context.AfterFunc(w.ctx, func() {
		w.stopping.Store(true)
		w.wake(stopMsg)
	})()
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
		// One channel: the end of ctx, the timer and the connection's
		// status changes come as sentinel messages (wake), so each message
		// wakes a plain receive, not a select over several channels.
		m := <-w.msgs
		switch {
		case w.stopping.Load():
			return
		case m == tickMsg:
			w.tick()
		case m == statusMsg:
			w.statusChanged()
		case m != stopMsg:
			w.handle(m)
		}
	}
}

// statusChanged acts on the status changes the Client's forwarder has
// queued since the last: a reconnect re-reads the pointers; a connection
// closed for good is said once.
func (w *Watcher) statusChanged() {
	bits := w.statusBits.Swap(0)
	if bits&statusClosed != 0 {
		// nats.go gave up reconnecting (ConnectOptions never does).
		w.event(EventError, 0, "connection closed for good: serving the current version, no further updates; connect with client.ConnectOptions to reconnect forever", nats.ErrConnectionClosed)
		return
	}
	if bits&statusReconnected != 0 {
		w.resync("reconnect")
	}
}

// The status changes a watcher is told of (statusBits).
const (
	statusReconnected uint32 = 1 << iota
	statusClosed
)

// notifyStatus is the Client forwarder's: it records st for the run loop
// and wakes it, without waiting on a watcher whose queue is full (a
// goroutine waits for it instead), so one busy watcher holds up no other.
func (w *Watcher) notifyStatus(st nats.Status) {
	switch st {
	case nats.CONNECTED:
		w.statusBits.Or(statusReconnected)
	case nats.CLOSED:
		w.statusBits.Or(statusClosed)
	default:
		return
	}
	select {
	case w.msgs <- statusMsg:
	case <-w.done:
	default:
		go w.wake(statusMsg)
	}
}

// The sentinels wake puts on a watcher's message channel: its timer fired
// (tickMsg), its context ended (stopMsg), the connection's status changed
// (statusMsg, statusBits says how). Never handled as messages.
var tickMsg, stopMsg, statusMsg = new(nats.Msg), new(nats.Msg), new(nats.Msg)

// fire is the timer's function.
func (w *Watcher) fire() { w.wake(tickMsg) }

// wake hands a sentinel to the run loop, unless it has ended.
func (w *Watcher) wake(sentinel *nats.Msg) {
	select {
	case w.msgs <- sentinel:
	case <-w.done:
	}
}

func (w *Watcher) event(kind EventKind, version uint64, detail string, err error) {
	w.c.o.events(Event{Kind: kind, Config: w.cfg, Version: version, Detail: detail, Err: err, At: time.Now()})
}
