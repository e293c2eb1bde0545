package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
)

// Distributor is what the controller needs of the distributor: the retained
// versions (and a version's content, to tell a variant index, which no
// instance applies, from a config), the cohort bucket pointers, the
// instance pointers (for stages that name instances or labels) and the
// live reports.
type Distributor interface {
	Versions(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Version, error)
	Version(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (cuecast.Version, []byte, error)
	SetPointers(ctx context.Context, cfg cuecast.ConfigPath, buckets []int, p cuecast.Pointer) error
	SetInstancePointers(ctx context.Context, cfg cuecast.ConfigPath, instances []string, p cuecast.Pointer) error
	Reports(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Report, error)
}

var _ Distributor = (*distributor.Distributor)(nil)

// Options configures a Controller. The zero value is usable.
type Options struct {
	// Interval is how often the controller looks at active rollouts: a
	// hold ends, and a wait times out, within one Interval of its
	// deadline. Default 1s.
	Interval time.Duration
	// Heartbeat is the instances' report interval; a report is live for four
	// of them. Default 15s; it must match the distributor's and clients'.
	Heartbeat time.Duration
	// ApplyTimeout bounds how long a stage waits for its instances to apply
	// the version; an instance still not on it then counts as failing to
	// apply. Default 5m.
	ApplyTimeout time.Duration
	// AwaitTimeout bounds how long an operator action on a controller
	// without Policies waits for the running one to carry it out; default 30s.
	AwaitTimeout time.Duration
	// Replicas of the KV bucket and audit stream; default 1.
	Replicas int
	// Actor names the controller in the audit stream; default
	// "cuecast-controller".
	Actor string
	// Analyzer measures the metrics of stages with an analysis
	// (analysis.Prometheus); without one such a stage cannot pass, and
	// halts after its metrics' MaxErrors evaluations.
	Analyzer Analyzer
	// Now is the clock; default time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

func (o *Options) fill() {
	if o.Interval == 0 {
		o.Interval = time.Second
	}
	if o.Heartbeat == 0 {
		o.Heartbeat = 15 * time.Second
	}
	if o.ApplyTimeout == 0 {
		o.ApplyTimeout = 5 * time.Minute
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.AwaitTimeout == 0 {
		o.AwaitTimeout = 30 * time.Second
	}
	if o.Actor == "" {
		o.Actor = "cuecast-controller"
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.Interval < 0:
		return fmt.Errorf("validate options: interval %s: want a positive duration", o.Interval)
	case o.Heartbeat < 0:
		return fmt.Errorf("validate options: heartbeat %s: want a positive duration", o.Heartbeat)
	case o.ApplyTimeout < 0:
		return fmt.Errorf("validate options: apply timeout %s: want a positive duration", o.ApplyTimeout)
	case o.Replicas < 0 || o.Replicas > 5:
		return fmt.Errorf("validate options: replicas %d: want 1-5", o.Replicas)
	}
	return nil
}

// Controller rolls versions out stage by stage. Deploy starts a rollout; Run
// steps the active ones until its context is cancelled. The operator methods
// (Halt, Resume, Advance, Rollback, Unpin) work on a Controller that is not
// running too: the CLI uses one to change the shared state, and the running
// controller in serve carries on from it. All state is in JetStream, written
// by compare-and-swap, so a restarted controller continues where the last
// one stopped.
type Controller struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	kv  jetstream.KeyValue
	d   Distributor
	pol Policies
	o   Options
	log *slog.Logger

	mu    sync.Mutex // one transition at a time in this process
	fleet *fleet     // set while Run runs
	fmu   sync.Mutex
	ownMu sync.Mutex
	own   map[string]uint64 // last revision this controller wrote, per key
	// ticks counts Run's ticks, each a look at every active rollout, so
	// that a test can say "it stays halted for n ticks" instead of
	// sleeping.
	ticks atomic.Uint64
	// watchFailures counts the times Run could not watch the bucket (and
	// tried again), for the same reason.
	watchFailures atomic.Uint64
	// running is set while Run runs (c.mu): Run's runner measures the
	// analyses then, and a step takes its measurements from measured.
	running  bool
	measured map[cuecast.ConfigPath][]measurement
	// readHook, set by tests only, replaces what a read of the bucket
	// returns (to play a replica that has not seen the last write yet).
	readHook func(ctx context.Context, k string, val []byte, rev uint64) ([]byte, uint64, error)
	// storeWait is storeWait but in tests that wait longer or shorter.
	storeWait time.Duration
}

// New opens (creating when needed) the rollout KV bucket and the audit
// stream. pol may be nil for a controller used only for operator actions and
// status: it then never starts a rollout itself (Deploy returns an error).
func New(ctx context.Context, nc *nats.Conn, d Distributor, pol Policies, o Options) (*Controller, error) {
	return newController(nc, d, pol, o, "new", func(js jetstream.JetStream, o Options) (jetstream.KeyValue, error) {
		return openStore(ctx, js, o.Replicas)
	})
}

// Open opens the existing rollout KV bucket and audit stream without
// creating or updating them, which needs no right to manage streams: the
// operator's credentials can (docs/SECURITY.md). It reads by direct get
// only and writes records by compare-and-swap publishes, never through
// JetStream's management API, so it works from the operator's account,
// which has none; such a controller cannot Run (ErrReadOnly). It returns
// an error wrapping jetstream.ErrBucketNotFound or
// jetstream.ErrStreamNotFound when serve has not created them yet.
func Open(ctx context.Context, nc *nats.Conn, d Distributor, pol Policies, o Options) (*Controller, error) {
	return newController(nc, d, pol, o, "open", func(js jetstream.JetStream, _ Options) (jetstream.KeyValue, error) {
		return openDirect(ctx, nc, js)
	})
}

// newController is New and Open, which differ in how they open the store
// (store, given the filled options); verb names which in an error.
func newController(nc *nats.Conn, d Distributor, pol Policies, o Options, verb string,
	store func(jetstream.JetStream, Options) (jetstream.KeyValue, error)) (*Controller, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("%s rollout controller: %w", verb, err)
	}
	o.fill()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("%s rollout controller: %w", verb, err)
	}
	kv, err := store(js, o)
	if err != nil {
		return nil, fmt.Errorf("%s rollout controller: %w", verb, err)
	}
	return &Controller{nc: nc, js: js, kv: kv, d: d, pol: pol, o: o, log: o.Logger, own: map[string]uint64{}, storeWait: storeWait}, nil
}
