package integration_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
	of "github.com/open-feature/go-sdk/openfeature"
	"github.com/open-feature/go-sdk/openfeature/isolated"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/flags"
	"github.com/cuecast/cuecast/flags/openfeature"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const cfg = cuecast.ConfigPath("payments/flags")

// env is an embedded NATS server with a signing distributor, as in
// client/integration.
type env struct {
	t   testing.TB
	srv *natstest.Server
	d   *distributor.Distributor
	pub string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	e := &env{t: t, srv: natstest.Start(t)}
	dnc := e.srv.Connect(t)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	e.pub, _ = kp.PublicKey()
	e.d, err = distributor.New(t.Context(), dnc, distributor.Options{SigningKey: kp, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("distributor.New: %v", err)
	}
	return e
}

// ship publishes version n of cfg and deploys it to every bucket.
func (e *env) ship(n uint64, content string) {
	e.t.Helper()
	v := cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("c%03d", n), Author: "ann"}
	if err := e.d.Publish(e.t.Context(), v, []byte(content)); err != nil {
		e.t.Fatalf("Publish %d: %v", n, err)
	}
	if err := e.d.Deploy(e.t.Context(), v); err != nil {
		e.t.Fatalf("Deploy %d: %v", n, err)
	}
}

// start builds a provider of cfg, named instance, on a new connection to
// e's server, and sets it in a new isolated SDK API that shuts down with
// the test, waiting at most 10 s; err is SetProviderAndWait's.
func (e *env) start(instance string) (*openfeature.Provider, *of.EvaluationAPI, error) {
	e.t.Helper()
	p, err := openfeature.New(e.srv.Connect(e.t, client.ConnectOptions()...), openfeature.Options{Config: cfg,
		Client: []client.Option{client.WithTrustedKeys(e.pub), client.WithInstance(instance)}})
	if err != nil {
		e.t.Fatal(err)
	}
	api := isolated.NewAPI()
	e.t.Cleanup(func() { _ = api.Shutdown(context.Background()) })
	ctx, cancel := context.WithTimeout(e.t.Context(), 10*time.Second)
	defer cancel()
	return p, api, api.SetProviderAndWait(ctx, p)
}

// set is a flag set with checkout-v2 (a 50/50 rollout, salt checkout-v2)
// and kill (a kill switch, on as told).
func set(killOn bool, color string) string {
	return fmt.Sprintf(`{"schema": "cuecast.flags/v1", "flags": {
	 "checkout-v2": {"type": "bool", "variants": {"on": true, "off": false}, "on": true, "offVariant": "off", "defaultVariant": "off", "salt": "checkout-v2",
	  "fallthrough": {"rollout": {"weights": [{"variant": "on", "weight": 50000}, {"variant": "off", "weight": 50000}]}}},
	 "kill": {"type": "bool", "variants": {"on": true, "off": false}, "on": %t, "offVariant": "off", "defaultVariant": "on", "salt": "kill"},
	 "color": {"type": "string", "variants": {"red": "#f00", "blue": "#00f"}, "on": true, "offVariant": "red", "defaultVariant": "red", "salt": "color",
	  "rules": [{"id": "nl", "clauses": [{"attribute": "country", "op": "in", "values": ["NL"]}], "variant": %q}]}}}`, killOn, color)
}

// recorder keeps the SDK's provider events.
type recorder struct {
	mu  sync.Mutex
	all []of.EventDetails
	typ []of.EventType
}

func record(api interface {
	AddHandler(of.EventType, of.EventCallback)
}) *recorder {
	r := &recorder{}
	for _, t := range []of.EventType{of.ProviderReady, of.ProviderConfigChange, of.ProviderStale, of.ProviderError} {
		f := func(d of.EventDetails) {
			r.mu.Lock()
			r.all = append(r.all, d)
			r.typ = append(r.typ, t)
			r.mu.Unlock()
		}
		api.AddHandler(t, &f)
	}
	return r
}

func (r *recorder) of(t of.EventType) []of.EventDetails {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []of.EventDetails
	for i, d := range r.all {
		if r.typ[i] == t {
			out = append(out, d)
		}
	}
	return out
}

func (r *recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := ""
	for i, d := range r.all {
		s += fmt.Sprintf("\n  %s %s %v %v", r.typ[i], d.Message, d.FlagChanges, d.EventMetadata)
	}
	return s
}

// TestProvider goes through the provider's life with the SDK's own client:
// Init waiting for the first version, evaluations, one
// CONFIGURATION_CHANGED per version, STALE, ERROR and READY around a lost
// connection, and Shutdown twice.
func TestProvider(t *testing.T) {
	e := newEnv(t)
	link := natstest.StartLink(t, e.srv.Addr().String())
	nc, err := nats.Connect("nats://"+link.Addr(), append(client.ConnectOptions(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	p, err := openfeature.New(nc, openfeature.Options{
		Config: cfg,
		Client: []client.Option{client.WithTrustedKeys(e.pub), client.WithInstance("svc-1")},
		Grace:  300 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	api := isolated.NewAPI()
	rec := record(api)
	c := api.NewClient()

	// Nothing deployed: Init blocks, here until its context ends.
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	err = api.SetProviderAndWait(ctx, p)
	cancel()
	if err == nil {
		t.Fatal("SetProviderAndWait returned before any version was deployed")
	}
	if v := c.Boolean(t.Context(), "kill", false, of.EvaluationContext{}); v {
		t.Errorf("kill before any version: %v, want the default", v)
	}
	e.ship(1, set(true, "blue"))
	poll.Until(t, "provider ready after version 1", 10*time.Second, func() (bool, string) {
		return c.State() == of.ReadyState, fmt.Sprint(c.State(), rec)
	})

	d, err := c.BooleanValueDetails(t.Context(), "checkout-v2", false, of.NewEvaluationContext("user-2", nil))
	if err != nil || !d.Value || d.Reason != of.SplitReason || d.Variant != "on" {
		t.Errorf("checkout-v2 for user-2 (position 9543): %+v, %v; want on by SPLIT", d, err)
	}
	d, err = c.BooleanValueDetails(t.Context(), "checkout-v2", true, of.NewEvaluationContext("user-1", nil))
	if err != nil || d.Value || d.Variant != "off" {
		t.Errorf("checkout-v2 for user-1 (position 64759): %+v, %v; want off", d, err)
	}
	sd, err := c.StringValueDetails(t.Context(), "color", "", of.NewEvaluationContext("u", map[string]any{"country": "NL"}))
	if err != nil || sd.Value != "#00f" || sd.Reason != of.TargetingMatchReason {
		t.Errorf("color for NL: %+v, %v; want #00f by TARGETING_MATCH", sd, err)
	}
	if _, err := c.StringValueDetails(t.Context(), "kill", "x", of.EvaluationContext{}); err == nil {
		t.Error("kill read as a string: no error, want TYPE_MISMATCH")
	}
	if id, err := c.IntValueDetails(t.Context(), "nope", 7, of.EvaluationContext{}); err == nil || id.Value != 7 || id.ErrorCode != of.FlagNotFoundCode {
		t.Errorf("missing flag: %+v, %v; want the default with FLAG_NOT_FOUND", id, err)
	}

	// Each version: one CONFIGURATION_CHANGED naming the flags changed.
	e.ship(2, set(false, "blue"))
	poll.Until(t, "configuration changed for version 2", 10*time.Second, func() (bool, string) {
		return len(rec.of(of.ProviderConfigChange)) >= 1, rec.String()
	})
	e.ship(3, set(false, "red"))
	poll.Until(t, "configuration changed for version 3", 10*time.Second, func() (bool, string) {
		return len(rec.of(of.ProviderConfigChange)) >= 2, rec.String()
	})
	changes := rec.of(of.ProviderConfigChange)
	if len(changes) != 2 {
		t.Fatalf("%d CONFIGURATION_CHANGED events for versions 2 and 3, want 2:%s", len(changes), rec)
	}
	for i, want := range []struct {
		keys    []string
		version int64
		commit  string
	}{{[]string{"kill"}, 2, "c002"}, {[]string{"color"}, 3, "c003"}} {
		got := changes[i]
		if !slices.Equal(got.FlagChanges, want.keys) || got.EventMetadata["version"] != want.version || got.EventMetadata["commit"] != want.commit {
			t.Errorf("change %d: flags %v metadata %v, want %v version %d commit %s", i, got.FlagChanges, got.EventMetadata, want.keys, want.version, want.commit)
		}
	}
	if d, _ := c.BooleanValueDetails(t.Context(), "kill", true, of.EvaluationContext{}); d.Value || d.Reason != of.DisabledReason {
		t.Errorf("kill after version 2: %+v, want off by DISABLED", d)
	}

	// The connection lost: STALE, ERROR after the grace, READY back.
	errorsBefore := len(rec.of(of.ProviderError)) // the Init that gave up
	link.Cut()
	poll.Until(t, "stale", 10*time.Second, func() (bool, string) {
		return len(rec.of(of.ProviderStale)) == 1, fmt.Sprint(c.State(), rec)
	})
	poll.Until(t, "error after the grace", 10*time.Second, func() (bool, string) {
		return len(rec.of(of.ProviderError)) == errorsBefore+1 && c.State() == of.ErrorState, fmt.Sprint(c.State(), rec)
	})
	if d, _ := c.BooleanValueDetails(t.Context(), "kill", true, of.EvaluationContext{}); d.Value || d.Variant != "off" {
		t.Errorf("kill while disconnected: %+v, want the current version's off", d)
	}
	link.Heal()
	poll.Until(t, "ready after reconnecting", 10*time.Second, func() (bool, string) {
		return c.State() == of.ReadyState && len(rec.of(of.ProviderReady)) >= 2, fmt.Sprint(c.State(), rec)
	})

	if err := api.Shutdown(t.Context()); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	p.Shutdown()
	if err := p.Init(of.EvaluationContext{}); !errors.Is(err, openfeature.ErrShutdown) {
		t.Errorf("Init after Shutdown: %v, want ErrShutdown", err)
	}
}

// TestProviderFatal: a flag set of a schema this build cannot read fails
// Init with PROVIDER_FATAL.
func TestProviderFatal(t *testing.T) {
	e := newEnv(t)
	e.ship(1, `{"schema": "cuecast.flags/v2", "flags": {}}`)
	_, api, err := e.start("svc-1")
	var ie *of.ProviderInitError
	if !errors.As(err, &ie) || ie.ErrorCode != of.ProviderFatalCode {
		t.Fatalf("SetProviderAndWait: %v, want a PROVIDER_FATAL init error", err)
	}
	if s := api.NewClient().State(); s != of.FatalState {
		t.Errorf("state %s, want FATAL", s)
	}
}

// TestProviderLastKnownGood: Init returns from the last-known-good file
// with no server to read from.
func TestProviderLastKnownGood(t *testing.T) {
	e := newEnv(t)
	e.ship(1, set(true, "blue"))
	lkg := t.TempDir() + "/flags.lkg"
	start := func(nc *nats.Conn) (*openfeature.Provider, of.IClient) {
		p, err := openfeature.New(nc, openfeature.Options{Config: cfg, Client: []client.Option{client.WithTrustedKeys(e.pub), client.WithInstance("svc-1")},
			Watch: []client.WatchOption{client.LastKnownGood(lkg)}})
		if err != nil {
			t.Fatal(err)
		}
		api := isolated.NewAPI()
		ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
		defer cancel()
		if err := api.SetProviderAndWait(ctx, p); err != nil {
			t.Fatalf("SetProviderAndWait: %v", err)
		}
		t.Cleanup(func() { _ = api.Shutdown(context.Background()) })
		return p, api.NewClient()
	}
	p, _ := start(e.srv.Connect(t, client.ConnectOptions()...))
	p.Shutdown() // the file is written
	// A server with nothing: only the file can make Init return.
	empty := natstest.Start(t)
	_, c := start(empty.Connect(t, client.ConnectOptions()...))
	if d, err := c.BooleanValueDetails(t.Context(), "kill", false, of.EvaluationContext{}); err != nil || !d.Value {
		t.Errorf("kill from the last-known-good file: %+v, %v; want true", d, err)
	}
}

// TestProviderEmptyTargetingKey: the SDK leaves an empty targeting key out
// of the context it hands the provider, so a rollout by targetingKey
// serves the default variant (DEFAULT), where flags.Evaluate and the
// vectors bucket "" like any string (checkout-v2: position 33805, on). An
// empty key given as an attribute reaches the provider and is bucketed
// (docs/FLAGS.md, "OpenFeature").
func TestProviderEmptyTargetingKey(t *testing.T) {
	e := newEnv(t)
	e.ship(1, set(true, "blue"))
	p, api, err := e.start("svc-1")
	if err != nil {
		t.Fatalf("SetProviderAndWait: %v", err)
	}
	c := api.NewClient()
	ev, _ := p.Evaluator()
	if r := ev.Evaluate("checkout-v2", flags.Context{"targetingKey": ""}); r.Reason != flags.ReasonSplit || r.Position != 33805 || r.Variant != "on" {
		t.Errorf(`flags.Evaluate with targetingKey "": %+v, want on by SPLIT at 33805`, r)
	}
	d, err := c.BooleanValueDetails(t.Context(), "checkout-v2", true, of.NewEvaluationContext("", nil))
	if err != nil || d.Value || d.Variant != "off" || d.Reason != of.DefaultReason {
		t.Errorf(`SDK with targeting key "": %+v, %v; want off (the default variant) by DEFAULT`, d, err)
	}
	d, err = c.BooleanValueDetails(t.Context(), "checkout-v2", false, of.NewEvaluationContext("", map[string]any{of.TargetingKey: ""}))
	if err != nil || !d.Value || d.Variant != "on" || d.Reason != of.SplitReason {
		t.Errorf(`SDK with the attribute targetingKey "": %+v, %v; want on by SPLIT (position 33805)`, d, err)
	}
}
