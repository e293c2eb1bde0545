// Package leader elects one active `cuecast serve` among replicas by a lease
// in a JetStream KV bucket.
//
// The lease is one key whose value names the holder. A candidate takes it
// with a create-only write; the holder renews it by compare-and-swap on its
// revision every TTL/3; the bucket's max age expires it TTL after the last
// write, so the lease of a holder that died frees itself. The revision is the
// fencing token: a renewal that finds another revision means the lease was
// lost, and the holder's work context is cancelled at once. A holder that
// cannot reach the server cancels its work TTL×0.9 after its last successful
// renewal was sent, before any other candidate can take the lease.
//
//	l, err := leader.New(ctx, js, leader.Options{ID: "serve-1", TTL: 10 * time.Second})
//	err = l.Run(ctx, func(ctx context.Context, t leader.Term) error {
//		return tailer.Run(ctx) // returns when ctx is cancelled: the lease was lost
//	})
//
// The lease keeps two replicas from working at once; it is not what makes a
// takeover exact, since a holder's last write may land after its lease was
// lost. Work done under it must itself be fenced at the store with the
// term's revision (serve claims the distributor's writer fence with it) or
// be safe to repeat.
//
// Run returns nil when ctx is cancelled and the error of work otherwise;
// New returns errors wrapping ErrInvalidOptions or the NATS error creating
// the bucket.
package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrInvalidOptions is wrapped by New for options that cannot work.
var ErrInvalidOptions = errors.New("invalid lease options")

// Options configures a Lease.
type Options struct {
	// Bucket is the KV bucket; default "cuecast-lease".
	Bucket string
	// Key names the lease; default "serve".
	Key string
	// ID names this candidate (required, unique per process).
	ID string
	// TTL is how long a lease lives without renewal; default 10s. A dead
	// holder's lease is taken over about TTL after its last renewal, so
	// within TTL of its death: a candidate waits for the holder's last write
	// to expire (by the server's timestamp), polling at least every TTL/10.
	TTL time.Duration
	// Replicas of the bucket; default 1 (3 on a cluster).
	Replicas int
	// Reclaim: a lease found held under ID is a dead predecessor's, taken
	// over at once (by compare-and-swap, as a new term) instead of after it
	// expires. Only for an ID no other live process can have: the embedded
	// serve's is its data directory, which a lock keeps to one process.
	Reclaim bool
	// Logger receives elections; default discards.
	Logger *slog.Logger
}

func (o *Options) setDefaults() {
	if o.Bucket == "" {
		o.Bucket = "cuecast-lease"
	}
	if o.Key == "" {
		o.Key = "serve"
	}
	if o.TTL == 0 {
		o.TTL = 10 * time.Second
	}
	if o.Replicas == 0 {
		o.Replicas = 1
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
}

// Validate reports options that cannot work.
func (o Options) Validate() error {
	switch {
	case o.ID == "":
		return fmt.Errorf("%w: a candidate ID is required", ErrInvalidOptions)
	case o.TTL < 0 || (o.TTL > 0 && o.TTL < 100*time.Millisecond):
		return fmt.Errorf("%w: ttl %s: want at least 100ms", ErrInvalidOptions, o.TTL)
	case o.Replicas < 0 || o.Replicas > 5:
		return fmt.Errorf("%w: replicas %d: want 1-5", ErrInvalidOptions, o.Replicas)
	}
	return nil
}

// Term is one tenure of the lease.
type Term struct {
	// ID is the holder.
	ID string
	// Revision is the KV revision that created the lease: the fencing token
	// of this term (later renewals have higher revisions).
	Revision uint64
	// Since is when it was acquired.
	Since time.Time
}

// Lease is one candidate. It is used by one Run at a time.
type Lease struct {
	kv jetstream.KeyValue
	o  Options
}

// New creates the bucket when needed and returns a candidate.
func New(ctx context.Context, js jetstream.JetStream, o Options) (*Lease, error) {
	if err := o.Validate(); err != nil {
		return nil, fmt.Errorf("new lease: %w", err)
	}
	o.setDefaults()
	kv, err := js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      o.Bucket,
		Description: "cuecast serve leader lease",
		History:     1,
		TTL:         o.TTL,
		Storage:     jetstream.FileStorage,
		Replicas:    o.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("new lease: create bucket %s: %w", o.Bucket, err)
	}
	return &Lease{kv: kv, o: o}, nil
}

// Holder returns the current holder's ID and revision; "" when free.
func (l *Lease) Holder(ctx context.Context) (string, uint64, error) {
	e, err := l.kv.Get(ctx, l.o.Key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return "", 0, nil
	}
	if err != nil {
		return "", 0, fmt.Errorf("read lease holder: %w", err)
	}
	return string(e.Value()), e.Revision(), nil
}

// Run campaigns until ctx is cancelled. Each time it wins the lease it calls
// work with a context cancelled when the lease is lost or ctx is; when work
// returns, the lease is released (deleted) so another candidate takes over at
// once. Run returns nil after ctx is cancelled, or work's error when work
// fails while holding the lease.
func (l *Lease) Run(ctx context.Context, work func(ctx context.Context, t Term) error) error {
	poll := l.o.TTL / 10
	for {
		rev, err := l.kv.Create(ctx, l.o.Key, []byte(l.o.ID))
		if errors.Is(err, jetstream.ErrKeyExists) && l.o.Reclaim {
			rev, err = l.reclaim(ctx)
		}
		switch {
		case err == nil:
			if err := l.hold(ctx, rev, work); err != nil {
				return err
			}
		case ctx.Err() != nil:
			return nil
		case !errors.Is(err, jetstream.ErrKeyExists):
			l.o.Logger.Warn("lease campaign failed", "id", l.o.ID, "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.untilExpiry(ctx, poll)):
		}
	}
}

// reclaim takes over a lease held under this candidate's own ID; it
// returns ErrKeyExists when another holds it.
func (l *Lease) reclaim(ctx context.Context) (uint64, error) {
	e, err := l.kv.Get(ctx, l.o.Key)
	if err != nil {
		return 0, err
	}
	if string(e.Value()) != l.o.ID {
		return 0, jetstream.ErrKeyExists
	}
	rev, err := l.kv.Update(ctx, l.o.Key, []byte(l.o.ID), e.Revision())
	if err == nil {
		l.o.Logger.Info("lease reclaimed from a previous run", "id", l.o.ID, "revision", e.Revision())
	} else if isWrongRevision(err) {
		err = jetstream.ErrKeyExists
	}
	return rev, err
}

// hold runs work while renewing the lease created at revision rev.
func (l *Lease) hold(ctx context.Context, rev uint64, work func(context.Context, Term) error) error {
	term := Term{ID: l.o.ID, Revision: rev, Since: time.Now()}
	log := l.o.Logger.With("id", l.o.ID, "revision", rev)
	log.Info("lease acquired")
	wctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	done := make(chan error, 1)
	go func() { done <- work(wctx, term) }()

	renewed := time.Now() // when the last successful renewal was sent
	tick := time.NewTicker(l.o.TTL / 3)
	defer tick.Stop()
	expired := time.NewTimer(l.o.TTL * 9 / 10)
	defer expired.Stop()
	// A renewal runs beside this loop, one at a time: its write can block
	// past its context (a server that stopped reading the connection), and
	// the expiry must end the term all the same.
	type renewal struct {
		sent time.Time
		next uint64
		err  error
	}
	renewals := make(chan renewal, 1)
	renewing := false
	var lost error
	for lost == nil {
		select {
		case err := <-done:
			l.release(rev)
			log.Info("lease released")
			if ctx.Err() != nil {
				return nil
			}
			if err != nil {
				return fmt.Errorf("leader work: %w", err)
			}
			return nil
		case <-ctx.Done():
			lost = ctx.Err()
		case <-expired.C:
			lost = fmt.Errorf("lease not renewed for %s", time.Since(renewed).Round(time.Millisecond))
		case <-tick.C:
			if renewing {
				continue
			}
			renewing = true
			go func(rev uint64) {
				sent := time.Now()
				rctx, rcancel := context.WithTimeout(ctx, l.o.TTL/3)
				defer rcancel()
				next, err := l.kv.Update(rctx, l.o.Key, []byte(l.o.ID), rev)
				renewals <- renewal{sent: sent, next: next, err: err}
			}(rev)
		case r := <-renewals:
			renewing = false
			switch {
			case r.err == nil:
				rev, renewed = r.next, r.sent
				expired.Reset(time.Until(r.sent.Add(l.o.TTL * 9 / 10)))
			case isWrongRevision(r.err):
				lost = fmt.Errorf("lease taken over: %w", r.err)
			default:
				log.Warn("lease renewal failed", "err", r.err)
			}
		}
	}
	cancel(lost)
	<-done
	if ctx.Err() != nil {
		l.release(rev)
		return nil
	}
	log.Warn("lease lost", "err", lost)
	return nil
}

// untilExpiry is how long to wait before the next campaign: until the
// holder's last write expires when that is sooner than poll.
func (l *Lease) untilExpiry(ctx context.Context, poll time.Duration) time.Duration {
	e, err := l.kv.Get(ctx, l.o.Key)
	if err != nil {
		return poll
	}
	// A few milliseconds past the expiry, for the server's expiry timer.
	d := time.Until(e.Created().Add(l.o.TTL)) + 5*time.Millisecond
	return min(max(d, time.Millisecond), poll)
}

// release deletes the lease if this candidate still holds it at rev.
func (l *Lease) release(rev uint64) {
	ctx, cancel := context.WithTimeout(context.Background(), l.o.TTL/3)
	defer cancel()
	_ = l.kv.Delete(ctx, l.o.Key, jetstream.LastRevision(rev))
}

func isWrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
	}
	return errors.Is(err, jetstream.ErrKeyExists)
}
