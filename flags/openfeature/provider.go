// Package openfeature is an OpenFeature provider (github.com/open-feature/go-sdk)
// for cuecast flag sets: it follows one flag set config with client.Typed[*flags.Evaluator]
// and evaluates in-process, so an evaluation makes no network call.
//
//	p, err := openfeature.New(nc, openfeature.Options{
//		Config: "payments/flags",
//		Client: []client.Option{client.WithInstance("checkout-7f9c"), client.WithTrustedKeysFile("/etc/cuecast/trusted-keys")},
//		Watch:  []client.WatchOption{client.LastKnownGood("/var/lib/checkout/flags.lkg")},
//	})
//	err = of.SetProviderWithContextAndWait(ctx, p) // blocks until a verified version
//	on := of.NewDefaultClient().Boolean(ctx, "checkout-v2", false, of.NewEvaluationContext(user, nil))
//
// Lifecycle, as OpenFeature's events:
//   - Init blocks until the first verified version or a verified
//     last-known-good file (or its context ends). A flag set whose schema
//     this build cannot read fails Init with PROVIDER_FATAL.
//   - Each new version applied emits one PROVIDER_CONFIGURATION_CHANGED
//     naming the flags that changed, with metadata "config", "version" and
//     "commit". A version that does not compile is rejected by the client
//     (reported to cuecast, which halts a staged rollout) and changes
//     nothing here.
//   - When the connection to NATS is lost (the subscription with it),
//     PROVIDER_STALE; still lost after Options.Grace, PROVIDER_ERROR; on
//     reconnection, PROVIDER_READY. Evaluation goes on from the current
//     version throughout.
//   - Shutdown stops the watch and closes the provider's client; it is
//     idempotent, and the provider cannot be initialised again.
//
// This package imports the OpenFeature SDK; package client does not, so a
// service that uses only client does not get it.
package openfeature

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	of "github.com/open-feature/go-sdk/openfeature"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/flags"
)

// Name is the provider's name in its metadata and events.
const Name = "cuecast"

// DefaultGrace is Options.Grace when zero.
const DefaultGrace = 30 * time.Second

// ErrShutdown: Init of a provider that was shut down.
var ErrShutdown = errors.New("provider shut down")

// Options configure a Provider.
type Options struct {
	// Config is the flag set config to follow (required).
	Config cuecast.ConfigPath
	// Client are the options of the provider's own client.Client (trusted
	// keys, instance, labels...). The provider sets client.WithEvents;
	// use Events to see them too.
	Client []client.Option
	// Watch are the options of the watch (client.LastKnownGood...).
	Watch []client.WatchOption
	// Grace is how long the connection may be lost (PROVIDER_STALE)
	// before PROVIDER_ERROR; DefaultGrace when zero.
	Grace time.Duration
	// Events, if set, also receives the client's events. It runs on the
	// watcher's goroutine and must not block.
	Events func(client.Event)
}

// Provider is the OpenFeature provider. Make one with New.
type Provider struct {
	nc     *nats.Conn
	c      *client.Client
	o      Options
	events chan of.Event
	// fatal carries a version refused for an unsupported schema to Init.
	fatal chan error

	tw atomic.Pointer[client.TypedWatcher[*flags.Evaluator]]

	mu       sync.Mutex
	started  bool
	shut     bool
	gaveUp   bool // an Init returned before the first version
	hadFirst bool // run saw the first version
	cancel   context.CancelFunc
	done     chan struct{} // closed when run returns
	shutOnce sync.Once
}

var (
	_ of.FeatureProvider          = (*Provider)(nil)
	_ of.ContextAwareStateHandler = (*Provider)(nil)
	_ of.EventHandler             = (*Provider)(nil)
)

// New makes a provider on nc for o.Config. It builds its client with
// client.New and returns its errors (ErrNoTrustedKeys...), or an error for
// an empty Config or a negative Grace.
func New(nc *nats.Conn, o Options) (*Provider, error) {
	if o.Config == "" {
		return nil, errors.New("openfeature provider: no Config")
	}
	if o.Grace < 0 {
		return nil, fmt.Errorf("openfeature provider: negative grace %v", o.Grace)
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	p := &Provider{nc: nc, o: o, events: make(chan of.Event, 16), fatal: make(chan error, 1)}
	c, err := client.New(nc, append(append([]client.Option(nil), o.Client...), client.WithEvents(p.onEvent))...)
	if err != nil {
		return nil, fmt.Errorf("openfeature provider: %w", err)
	}
	p.c = c
	return p, nil
}

// onEvent runs on the watcher's goroutine.
func (p *Provider) onEvent(e client.Event) {
	if e.Kind == client.EventRejected && errors.Is(e.Err, flags.ErrUnsupportedSchema) {
		select {
		case p.fatal <- fmt.Errorf("%s version %d: %w", e.Config, e.Version, e.Err):
		default:
		}
	}
	if p.o.Events != nil {
		p.o.Events(e)
	}
}

// Metadata names the provider.
func (p *Provider) Metadata() of.Metadata { return of.Metadata{Name: Name} }

// Hooks returns none.
func (p *Provider) Hooks() []of.Hook { return nil }

// EventChannel delivers the provider's events to the SDK.
func (p *Provider) EventChannel() <-chan of.Event { return p.events }

// Init is InitWithContext without a deadline.
func (p *Provider) Init(evalCtx of.EvaluationContext) error {
	return p.InitWithContext(context.Background(), evalCtx)
}

// InitWithContext starts the watch and waits until it has a verified
// version (from the server or the last-known-good file). It returns a
// *of.ProviderInitError with PROVIDER_FATAL when the flag set's schema is
// not one this build reads, ctx's error (wrapping client.ErrNotReady) when
// ctx ends first (the watch goes on, and PROVIDER_READY follows when a
// version arrives), ErrShutdown after Shutdown, and client.Typed's errors.
// A second Init of a started provider waits like the first.
func (p *Provider) InitWithContext(ctx context.Context, _ of.EvaluationContext) error {
	p.mu.Lock()
	if p.shut {
		p.mu.Unlock()
		return ErrShutdown
	}
	if !p.started {
		runCtx, cancel := context.WithCancel(context.Background())
		tw, err := client.Typed[*flags.Evaluator](runCtx, p.c, p.o.Config, p.o.Watch...)
		if err != nil {
			cancel()
			p.mu.Unlock()
			return fmt.Errorf("watch flags %s: %w", p.o.Config, err)
		}
		p.tw.Store(tw)
		p.started, p.cancel, p.done = true, cancel, make(chan struct{})
		go p.run(runCtx, tw)
	}
	tw := p.tw.Load()
	p.mu.Unlock()
	select {
	case <-tw.Ready():
		return nil
	default:
	}
	select {
	case <-tw.Ready():
		return nil
	case err := <-p.fatal:
		p.Shutdown()
		return &of.ProviderInitError{ErrorCode: of.ProviderFatalCode, Message: err.Error()}
	case <-ctx.Done():
		p.mu.Lock()
		defer p.mu.Unlock()
		if p.hadFirst {
			return nil
		}
		p.gaveUp = true
		return tw.WaitReady(ctx)
	}
}

// run turns versions and connection changes into events until ctx ends.
func (p *Provider) run(ctx context.Context, tw *client.TypedWatcher[*flags.Evaluator]) {
	defer close(p.done)
	status := p.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	defer p.nc.RemoveStatusListener(status)
	grace := time.NewTimer(time.Hour)
	grace.Stop()
	defer grace.Stop()

	select {
	case <-tw.Ready():
	case <-ctx.Done():
		return
	}
	cur, snap := tw.Value()
	lost, failed := false, false
	send := func(t of.EventType, d of.ProviderEventDetails) {
		select {
		case p.events <- of.Event{ProviderName: Name, EventType: t, ProviderEventDetails: d}:
		case <-ctx.Done():
		}
	}
	// An Init that gave up waiting left the SDK's state at ERROR: READY
	// is this loop's to send.
	p.mu.Lock()
	p.hadFirst = true
	gaveUp := p.gaveUp
	p.mu.Unlock()
	if gaveUp {
		send(of.ProviderReady, of.ProviderEventDetails{Message: fmt.Sprintf("%s version %d", snap.Config, snap.Version)})
	}
	for {
		select {
		case <-ctx.Done():
			return
		case u, ok := <-tw.Updates():
			if !ok {
				return
			}
			if u.Version == snap.Version && u.Checksum == snap.Checksum {
				continue // the version Init saw
			}
			changed := flags.Changed(cur, u.Value)
			cur, snap = u.Value, u.Snapshot
			send(of.ProviderConfigChange, of.ProviderEventDetails{
				Message:     fmt.Sprintf("%s version %d", snap.Config, snap.Version),
				FlagChanges: changed,
				EventMetadata: map[string]any{
					"config": string(snap.Config), "version": int64(snap.Version), "commit": snap.Commit,
				},
			})
		case s := <-status:
			switch s {
			case nats.DISCONNECTED, nats.RECONNECTING:
				if !lost {
					lost = true
					send(of.ProviderStale, of.ProviderEventDetails{Message: "connection to NATS lost: serving version " + fmt.Sprint(snap.Version)})
					grace.Reset(p.o.Grace)
				}
			case nats.CONNECTED:
				if lost {
					lost, failed = false, false
					grace.Stop()
					send(of.ProviderReady, of.ProviderEventDetails{Message: "connection to NATS restored"})
				}
			case nats.CLOSED:
				if !failed {
					failed = true
					grace.Stop()
					send(of.ProviderError, of.ProviderEventDetails{Message: "NATS connection closed", ErrorCode: of.GeneralCode})
				}
			}
		case <-grace.C:
			if lost && !failed {
				failed = true
				send(of.ProviderError, of.ProviderEventDetails{
					Message:   fmt.Sprintf("connection to NATS lost for over %v: serving version %d", p.o.Grace, snap.Version),
					ErrorCode: of.GeneralCode,
				})
			}
		}
	}
}

// Shutdown stops the watch and closes the provider's client. It is
// idempotent.
func (p *Provider) Shutdown() {
	p.shutOnce.Do(func() {
		p.mu.Lock()
		p.shut = true
		cancel, done := p.cancel, p.done
		p.mu.Unlock()
		if cancel != nil {
			cancel()
			if tw := p.tw.Load(); tw != nil {
				tw.Stop()
			}
			<-done
		}
		p.c.Close()
	})
}

// ShutdownWithContext is Shutdown; it returns nil.
func (p *Provider) ShutdownWithContext(context.Context) error {
	p.Shutdown()
	return nil
}

// Evaluator returns the current compiled flag set and its version (nil and
// the zero Snapshot before Init has one).
func (p *Provider) Evaluator() (*flags.Evaluator, client.Snapshot) {
	tw := p.tw.Load()
	if tw == nil {
		return nil, client.Snapshot{}
	}
	return tw.Value()
}

// evaluator is Evaluator without the Snapshot, which every evaluation
// would otherwise copy (BENCHMARKS.md, "Flags").
func (p *Provider) evaluator() *flags.Evaluator {
	tw := p.tw.Load()
	if tw == nil {
		return nil
	}
	return tw.Load()
}

// BooleanEvaluation evaluates a bool flag.
func (p *Provider) BooleanEvaluation(_ context.Context, flag string, def bool, fc of.FlattenedContext) of.BoolResolutionDetail {
	v, r := p.evaluator().Bool(flag, fc, def)
	return of.BoolResolutionDetail{Value: v, ProviderResolutionDetail: detail(flag, r)}
}

// StringEvaluation evaluates a string flag.
func (p *Provider) StringEvaluation(_ context.Context, flag string, def string, fc of.FlattenedContext) of.StringResolutionDetail {
	v, r := p.evaluator().String(flag, fc, def)
	return of.StringResolutionDetail{Value: v, ProviderResolutionDetail: detail(flag, r)}
}

// FloatEvaluation evaluates a float flag (an int flag is a TYPE_MISMATCH).
func (p *Provider) FloatEvaluation(_ context.Context, flag string, def float64, fc of.FlattenedContext) of.FloatResolutionDetail {
	v, r := p.evaluator().Float(flag, fc, def)
	return of.FloatResolutionDetail{Value: v, ProviderResolutionDetail: detail(flag, r)}
}

// IntEvaluation evaluates an int flag.
func (p *Provider) IntEvaluation(_ context.Context, flag string, def int64, fc of.FlattenedContext) of.IntResolutionDetail {
	v, r := p.evaluator().Int(flag, fc, def)
	return of.IntResolutionDetail{Value: v, ProviderResolutionDetail: detail(flag, r)}
}

// ObjectEvaluation evaluates an object flag; the value is a
// map[string]any shared between evaluations: do not modify it.
func (p *Provider) ObjectEvaluation(_ context.Context, flag string, def any, fc of.FlattenedContext) of.InterfaceResolutionDetail {
	v, r := p.evaluator().Object(flag, fc, nil)
	if r.Reason == flags.ReasonError {
		return of.InterfaceResolutionDetail{Value: def, ProviderResolutionDetail: detail(flag, r)}
	}
	return of.InterfaceResolutionDetail{Value: v, ProviderResolutionDetail: detail(flag, r)}
}

func detail(flag string, r flags.Result) of.ProviderResolutionDetail {
	if r.Reason != flags.ReasonError {
		return of.ProviderResolutionDetail{Reason: of.Reason(r.Reason), Variant: r.Variant}
	}
	d := of.ProviderResolutionDetail{Reason: of.ErrorReason}
	switch r.ErrorCode {
	case flags.ErrorFlagNotFound:
		d.ResolutionError = of.NewFlagNotFoundResolutionError("no flag " + flag)
	case flags.ErrorTypeMismatch:
		d.ResolutionError = of.NewTypeMismatchResolutionError("flag " + flag + " is of another type")
	case flags.ErrorNotReady:
		d.ResolutionError = of.NewProviderNotReadyResolutionError("no flag set yet")
	default:
		d.ResolutionError = of.NewGeneralResolutionError(string(r.ErrorCode))
	}
	return d
}
