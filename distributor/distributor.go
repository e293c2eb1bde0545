package distributor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
)

// Options configures a Distributor. The zero value is usable: see the field
// docs for defaults.
type Options struct {
	// Replicas of both streams; default 1. Use 3 on a cluster.
	Replicas int
	// Retain is how many versions per config are kept; default 100.
	Retain int
	// Heartbeat is how often instances report; reports expire after four
	// heartbeats. Default 15s. It must match the clients' WithHeartbeat.
	Heartbeat time.Duration
	// StragglerAfter is how long an instance may stay behind the latest
	// version before Status lists it as a straggler; default 2 × Heartbeat.
	StragglerAfter time.Duration
	// InlineLimit is the largest content carried in every pointer message
	// (docs/PROTOCOL.md §3): an instance then needs one message per change
	// instead of the version's and its pointer's, and the version's own
	// publish fans out to nobody. The price is storage: each pointer
	// subject keeps a copy (the all-buckets one, and up to 100 buckets'
	// where partial stages wrote them). Default 64 KiB, at most
	// ChunkThreshold; negative never inlines.
	InlineLimit int
	// SigningKey signs every version and pointer (ed25519, an nkeys seed);
	// nil publishes them unsigned.
	SigningKey nkeys.KeyPair
	// Logger receives the distributor's logs; default discards them.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Retain == 0 {
		o.Retain = 100
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.StragglerAfter == 0 {
		o.StragglerAfter = 2 * o.Heartbeat
	}
	if o.InlineLimit == 0 {
		o.InlineLimit = DefaultInlineLimit
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.Replicas < 0 || o.Replicas > 5:
		return fmt.Errorf("validate options: replicas %d: want 1-5", o.Replicas)
	case o.Retain < 0:
		return fmt.Errorf("validate options: retain %d: want at least 1", o.Retain)
	case o.Heartbeat < 0:
		return fmt.Errorf("validate options: heartbeat %s: want a positive duration", o.Heartbeat)
	case o.StragglerAfter < 0:
		return fmt.Errorf("validate options: straggler-after %s: want a positive duration", o.StragglerAfter)
	case o.InlineLimit > ChunkThreshold:
		return fmt.Errorf("validate options: inline limit %d: want at most %d (the chunk threshold)", o.InlineLimit, ChunkThreshold)
	}
	return nil
}

// Distributor publishes versions and pointers to JetStream and reads back the
// fleet's reports. It is safe for concurrent use; one Distributor should be
// the only writer of pointers (compare-and-swap makes a second one safe, not
// useful).
type Distributor struct {
	nc *nats.Conn
	js jetstream.JetStream
	// stream and reports are managed through the JetStream API (New);
	// an opened Distributor has read-only stand-ins (Open). Every read goes
	// by direct get, through versions and reportsRd.
	stream    jetstream.Stream
	reports   jetstream.Stream
	versions  DirectStream
	reportsRd DirectStream
	o         Options
	log       *slog.Logger
	signPub   string
	// ptrs caches each pointer subject's last known pointer and sequence
	// (cachedPointer), so a deploy needs no reads; a lost compare-and-swap
	// evicts the entry.
	ptrs sync.Map
	// revs is the last pointer revision this Distributor gave each config
	// (pointers.go, nextRevision).
	revs revisions
	// latestCache holds each config's latest storedVersion as last written
	// or read here (see cachedLatest).
	latestCache sync.Map
	// recent maps versionKey to storedVersion for the last few versions of
	// each config (remember).
	recent sync.Map
	// fence is the writer fence this Distributor claimed (fence.go);
	// fenced is set once it has.
	fence    fence
	fenced   atomic.Bool
	ptrSubs  []*nats.Subscription
	statusCh chan nats.Status
	done     chan struct{}
}

// followPointers keeps the pointer cache in step with every writer: it
// core-subscribes to the RePublished bucket and instance pointer subjects
// (not to versions: a subscriber there would make every publish wait for
// its delivery) and forgets the cache whenever the connection comes back
// (updates may have been missed).
func (d *Distributor) followPointers() error {
	follow := func(m *nats.Msg) {
		seq, err := strconv.ParseUint(m.Header.Get(jetstream.SequenceHeader), 10, 64)
		subj := m.Header.Get(jetstream.SubjectHeader)
		var p cuecast.Pointer
		if err != nil || subj == "" || json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderPointer)), &p) != nil {
			return
		}
		// Anyone able to publish on ccr.> could otherwise set the
		// sequence the next compare-and-swap expects (pointers.go,
		// followable).
		var cur cachedPointer
		if c, ok := d.ptrs.Load(subj); ok {
			cur = c.(cachedPointer)
		}
		if !d.followable(p, subj, seq, cur) {
			return
		}
		d.ptrs.Store(subj, cachedPointer{p: p, seq: seq})
	}
	for _, subj := range []string{cuecast.RepublishPrefix + ".*.p.>", cuecast.RepublishPrefix + ".*.i.>"} {
		sub, err := d.nc.Subscribe(subj, follow)
		if err != nil {
			d.Close()
			return fmt.Errorf("follow pointers: %w", err)
		}
		d.ptrSubs = append(d.ptrSubs, sub)
	}
	d.statusCh = d.nc.StatusChanged(nats.CONNECTED, nats.CLOSED)
	done, status := make(chan struct{}), d.statusCh
	d.done = done
	go func() {
		for {
			select {
			case <-done:
				return
			case st, ok := <-status:
				if !ok || st == nats.CLOSED {
					return // the connection is gone for good
				}
				d.ptrs.Clear()
				d.latestCache.Clear()
			}
		}
	}()
	return nil
}

// Close stops following pointer updates. It does not close the connection;
// the Distributor must not be used afterwards.
func (d *Distributor) Close() {
	for _, s := range d.ptrSubs {
		_ = s.Unsubscribe()
	}
	d.ptrSubs = nil
	if d.done == nil {
		return
	}
	d.nc.RemoveStatusListener(d.statusCh)
	close(d.done)
	d.done = nil
}

// pointerAckTimeout bounds the wait for a pointer write's acknowledgement:
// twice jetstream's default for its synchronous calls, as a deploy writes
// up to Buckets pointers at once.
const pointerAckTimeout = 10 * time.Second

// New creates or updates the CUECAST and CUECAST_REPORTS streams and returns a
// Distributor writing to them. The caller owns nc and closes it after the
// Distributor is no longer used.
func New(ctx context.Context, nc *nats.Conn, o Options) (*Distributor, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new distributor: %w", err)
	}
	o.setDefaults()
	// Pointers are written asynchronously, and jetstream waits for an
	// asynchronous acknowledgement without limit unless given one: answers
	// held on a live connection (a one-way partition, noticed only at the
	// ping timeout) kept Deploy, and so the tailer, waiting that long
	// (TestDeployReturnsWhenPointerWriteAcksAreHeld).
	js, err := jetstream.New(nc, jetstream.WithPublishAsyncTimeout(pointerAckTimeout))
	if err != nil {
		return nil, fmt.Errorf("new distributor: %w", err)
	}
	d := &Distributor{nc: nc, js: js, o: o, log: o.Logger, versions: NewDirectStream(nc, cuecast.Stream), reportsRd: NewDirectStream(nc, cuecast.ReportStream)}
	if o.SigningKey != nil {
		pub, err := o.SigningKey.PublicKey()
		if err != nil {
			return nil, fmt.Errorf("new distributor: read signing key: %w", err)
		}
		if _, err := o.SigningKey.Sign([]byte("probe")); err != nil {
			return nil, fmt.Errorf("new distributor: signing key cannot sign (a public key?): %w", err)
		}
		d.signPub = pub
	}
	d.stream, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cuecast.Stream,
		Description: "cuecast versions, chunks and cohort pointers (docs/PROTOCOL.md)",
		Subjects:    []string{cuecast.StoredPrefix + ".>"},
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
		AllowDirect: true,
		AllowRollup: true,
		Duplicates:  2 * time.Minute,
		RePublish:   &jetstream.RePublish{Source: cuecast.StoredPrefix + ".>", Destination: cuecast.RepublishPrefix + ".>"},
	})
	if err != nil {
		return nil, fmt.Errorf("new distributor: create stream %s: %w", cuecast.Stream, err)
	}
	d.reports, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{
		Name:        cuecast.ReportStream,
		Description: "cuecast instance reports and region summaries, keep-last-1 per instance (region) and config",
		Subjects:    []string{cuecast.ReportPrefix + ".>", cuecast.SummaryPrefix + ".>"},
		// File storage: the stream (not only its contents) must survive a
		// server restart, or reports published after it would go nowhere.
		Storage:           jetstream.FileStorage,
		Replicas:          o.Replicas,
		MaxMsgsPerSubject: 1,
		MaxAge:            LiveFor(o.Heartbeat), // the liveness rule (live.go)
		AllowDirect:       true,
		Discard:           jetstream.DiscardOld,
	})
	if err != nil {
		return nil, fmt.Errorf("new distributor: create stream %s: %w", cuecast.ReportStream, err)
	}
	// On the hub of a tree, the mirror of CUECAST in the fan-out account,
	// which the leafnode links are bound to and the regions mirror from
	// (docs/SECURITY.md); elsewhere nothing answers and nothing is made.
	if err := Fanout(ctx, nc, o.Replicas, o.Retain); err != nil {
		return nil, fmt.Errorf("new distributor: %w", err)
	}
	if err := d.followPointers(); err != nil {
		return nil, fmt.Errorf("new distributor: %w", err)
	}
	// Debug: every operator command opens a distributor, and an INFO line
	// first thing garbled what they print (rollout watch redraws a screen).
	d.log.Debug("distributor ready", "stream", cuecast.Stream, "reports", cuecast.ReportStream,
		"replicas", o.Replicas, "retain", o.Retain, "heartbeat", o.Heartbeat, "signing_key", d.signPub)
	return d, nil
}

// PublicKey is the public nkey clients must trust, or "" when unsigned.
func (d *Distributor) PublicKey() string { return d.signPub }

// isWrongLastSeq reports a lost compare-and-swap.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant
	}
	return false
}
