package rollout_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

const (
	cfg       = cuecast.ConfigPath("payments/checkout")
	heartbeat = 100 * time.Millisecond
)

// env is an embedded NATS server with a distributor and a running controller.
type env struct {
	t *testing.T
	// hb, when set before the env opens, is the instances', the
	// distributor's and the controller's heartbeat in place of heartbeat.
	hb   time.Duration
	srv  *natstest.Server
	nc   *nats.Conn
	d    *distributor.Distributor
	c    *rollout.Controller
	pol  *policies
	wrap func(rollout.Distributor) rollout.Distributor
	// opts and before, when set, adjust the controller's options and the
	// controller itself before it runs.
	opts   func(*rollout.Options)
	before func(*rollout.Controller)
	stop   func()
	// viaLink, when set, connects the controller and distributor through
	// link, a proxy a test can cut, and has them reconnect for good.
	viaLink bool
	link    *natstest.Link
	// key signs what the distributor writes; instances trust pub.
	key nkeys.KeyPair
	pub string
	// fl is where the instances report: a single server (srv), or in the
	// tree mode (natstest.BothModes) a hub and one summarising region (tr):
	// the distributor and controller on the hub, the instances on the
	// region's server, whose summarizer sends the hub summaries.
	fl *natstest.Fleet
	tr *natstest.Tree
}

// bothModes runs a scenario on a single server, whose instances' reports
// reach the controller one by one, and on a tree whose region summarises
// them (docs/SCALING.md): the same test, the same oracle.
func bothModes(t *testing.T, scenario func(t *testing.T)) { natstest.BothModes(t, scenario) }

// instConn connects an instance: to the server, or on a tree to the
// region's server as the namespace's services.
func (e *env) instConn(opts ...nats.Option) *nats.Conn {
	e.t.Helper()
	if e.tr != nil {
		return e.fl.Instance(e.t, cfg.Namespace(), opts...)
	}
	return e.srv.Connect(e.t, opts...)
}

// policies is a Policies whose answer a test changes.
type policies struct {
	mu   sync.Mutex
	p    cuecast.Policy
	cons cuecast.Consistency
}

func (p *policies) Policy(context.Context, cuecast.Version) (cuecast.Policy, cuecast.Consistency, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p, p.cons, nil
}

func (p *policies) set(pol cuecast.Policy, cons cuecast.Consistency) {
	p.mu.Lock()
	p.p, p.cons = pol, cons
	p.mu.Unlock()
}

func logger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func newEnv(t *testing.T, pol cuecast.Policy, cons cuecast.Consistency) *env {
	t.Helper()
	return newEnvWrapped(t, pol, cons, nil)
}

// newEnvWrapped is newEnv with the controller's distributor wrapped by wrap
// (when not nil), for tests that step in between its calls.
func newEnvWrapped(t *testing.T, pol cuecast.Policy, cons cuecast.Consistency, wrap func(rollout.Distributor) rollout.Distributor) *env {
	t.Helper()
	return newEnvSet(t, pol, cons, func(e *env) { e.wrap = wrap })
}

// heartbeat is the env's heartbeat: hb, or the package's.
func (e *env) heartbeat() time.Duration {
	if e.hb > 0 {
		return e.hb
	}
	return heartbeat
}

// newEnvSet is newEnv with set called on the env before its servers start
// and it opens.
func newEnvSet(t *testing.T, pol cuecast.Policy, cons cuecast.Consistency, set func(*env)) *env {
	t.Helper()
	e := &env{t: t, pol: &policies{p: pol, cons: cons}}
	set(e)
	e.fl = natstest.StartFleet(t, natstest.FleetOptions{Namespaces: []string{cfg.Namespace()}, Heartbeat: e.heartbeat(), Logger: logger(t)})
	e.srv, e.tr = e.fl.Server, e.fl.Tree
	e.open()
	return e
}

// open connects to the server and starts a distributor and a controller.
func (e *env) open() {
	e.t.Helper()
	if e.tr != nil {
		e.nc = e.fl.Hub(e.t)
	} else if e.viaLink {
		e.link = natstest.StartLink(e.t, strings.TrimPrefix(e.srv.ClientURL(), "nats://"))
		var err error
		e.nc, err = nats.Connect("nats://"+e.link.Addr(), nats.Timeout(5*time.Second),
			nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
		if err != nil {
			e.t.Fatalf("connect through link: %v", err)
		}
		e.t.Cleanup(e.nc.Close)
	} else {
		e.nc = e.srv.Connect(e.t)
	}
	var err error
	if e.key == nil {
		if e.key, err = nkeys.CreateAccount(); err != nil {
			e.t.Fatal(err)
		}
		e.pub, _ = e.key.PublicKey()
	}
	e.d, err = distributor.New(e.t.Context(), e.nc, distributor.Options{Heartbeat: e.heartbeat(), Logger: logger(e.t), SigningKey: e.key})
	if err != nil {
		e.t.Fatalf("distributor.New: %v", err)
	}
	if e.tr != nil && e.srv == nil && e.stop == nil {
		e.fl.Summarize(e.t)
	}
	var d rollout.Distributor = e.d
	if e.wrap != nil {
		d = e.wrap(d)
	}
	o := rollout.Options{
		Interval: 20 * time.Millisecond, Heartbeat: e.heartbeat(), ApplyTimeout: 5 * time.Second, Logger: logger(e.t),
	}
	if e.opts != nil {
		e.opts(&o)
	}
	e.c, err = rollout.New(e.t.Context(), e.nc, d, e.pol, o)
	if err != nil {
		e.t.Fatalf("rollout.New: %v", err)
	}
	if e.before != nil {
		e.before(e.c)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- e.c.Run(ctx) }()
	var once sync.Once
	e.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("controller Run: %v", err)
			}
		})
	}
	e.t.Cleanup(e.stop)
}

func content(n int) []byte { return fmt.Appendf(nil, `{"limit":%d}`, n) }

// publish stores version n with content and returns it.
func (e *env) publish(n uint64, b []byte) cuecast.Version {
	e.t.Helper()
	v := cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("c%039d", n), Author: "ann", Message: "change"}
	if err := e.d.Publish(e.t.Context(), v, b); err != nil {
		e.t.Fatalf("Publish %d: %v", n, err)
	}
	v.Checksum, v.Size = cuecast.Checksum(b), int64(len(b))
	return v
}

// baseline publishes v1 and points every bucket at it, the way a config
// deployed before the controller existed is found.
func (e *env) baseline() cuecast.Version {
	e.t.Helper()
	v := e.publish(1, content(1))
	if err := e.d.Deploy(e.t.Context(), v); err != nil {
		e.t.Fatalf("Deploy v1: %v", err)
	}
	return v
}

func (e *env) deploy(v cuecast.Version) {
	e.t.Helper()
	if err := e.c.Deploy(e.t.Context(), v); err != nil {
		e.t.Fatalf("controller Deploy v%d: %v", v.Version, err)
	}
}

func (e *env) record() rollout.Record {
	e.t.Helper()
	rec, err := e.c.Record(e.t.Context(), cfg)
	if err != nil {
		e.t.Fatalf("Record: %v", err)
	}
	return rec
}

// completeV2 puts v1 on every bucket (baseline), then deploys v2 and
// waits until its rollout is complete.
func (e *env) completeV2() {
	e.t.Helper()
	e.baseline()
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateComplete, 0)
}

// rollback rolls cfg back to version v as the operator ann, for reason.
func (e *env) rollback(v uint64, reason string) {
	e.t.Helper()
	if _, err := e.c.Rollback(e.t.Context(), cfg, v, rollout.Action{Actor: "ann", Reason: reason}); err != nil {
		e.t.Fatalf("Rollback: %v", err)
	}
}

// waitHalted waits until the rollout of v2 is halted at stage (any when
// stage < 0), and fails the test unless the halt's reason names each of why.
func (e *env) waitHalted(stage int, why ...string) rollout.Record {
	e.t.Helper()
	rec := e.waitState(2, rollout.StateHalted, stage)
	for _, w := range why {
		if !strings.Contains(rec.Current.Reason, w) {
			e.t.Errorf("halt reason: got %q, want it to name %q", rec.Current.Reason, w)
		}
	}
	return rec
}

// waitState polls until the current rollout of version v is in state s at
// stage (or any stage when stage < 0).
func (e *env) waitState(v uint64, s rollout.State, stage int) rollout.Record {
	e.t.Helper()
	var rec rollout.Record
	poll.Until(e.t, fmt.Sprintf("rollout of v%d %s at stage %d", v, s, stage), poll.Patience, func() (bool, string) {
		r, err := e.c.Record(e.t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		rec = r
		cur := r.Current
		if cur == nil {
			return false, "no rollout"
		}
		return cur.Version == v && cur.State == s && (stage < 0 || cur.Stage == stage),
			fmt.Sprintf("v%d %s stage %d note %q reason %q", cur.Version, cur.State, cur.Stage, cur.Note, cur.Reason)
	})
	return rec
}

func (e *env) pointer(bucket int) cuecast.Pointer {
	e.t.Helper()
	p, err := e.d.Pointer(e.t.Context(), cfg, bucket)
	if err != nil {
		e.t.Fatalf("Pointer %d: %v", bucket, err)
	}
	return p
}

// instancePointer reads the pointer of one instance (ok false when it has
// none).
func (e *env) instancePointer(id string) (cuecast.Pointer, bool) {
	e.t.Helper()
	p, err := e.d.InstancePointer(e.t.Context(), cfg, id)
	if errors.Is(err, cuecast.ErrNotFound) {
		return cuecast.Pointer{}, false
	}
	if err != nil {
		e.t.Fatalf("InstancePointer %s: %v", id, err)
	}
	return p, true
}

// instance is a service instance running the real client library, with a
// health and a validation hook the test controls.
type instance struct {
	id     string
	cl     *client.Client
	w      *client.Watcher
	sick   atomic.Uint64 // unhealthy while running this version
	reject atomic.Uint64 // the validation hook rejects this version

	mu     sync.Mutex
	events []client.Event // the watcher's, in order
}

// eventsOn is the watcher's events so far on version v, each as
// "kind detail" (client.Event's Kind and Detail).
func (in *instance) eventsOn(v uint64) []string {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []string
	for _, e := range in.events {
		if e.Version == v {
			out = append(out, e.Kind.String()+" "+e.Detail)
		}
	}
	return out
}

// appliedAt is when the instance first applied version v, by its
// watcher's clock, which is the controller's: the applied event comes
// before the report that tells the controller so. ok is false when it
// never applied v.
func (in *instance) appliedAt(v uint64) (at time.Time, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, e := range in.events {
		if e.Version == v && e.Kind == client.EventApplied {
			return e.At, true
		}
	}
	return time.Time{}, false
}

func (e *env) instance(id string) *instance {
	e.t.Helper()
	return e.instanceWith(id, nil)
}

// instanceWith starts an instance reporting labels.
func (e *env) instanceWith(id string, labels map[string]string) *instance {
	e.t.Helper()
	in := &instance{id: id}
	nc := e.instConn(client.ConnectOptions()...)
	var wp atomic.Pointer[client.Watcher]
	opts := []client.Option{client.WithInstance(id), client.WithTrustedKeys(e.pub), client.WithHeartbeat(e.heartbeat()), client.WithLabels(labels)}
	opts = append(opts, e.fl.ClientOptions(cfg.Namespace())...)
	cl, err := client.New(nc, append(opts,
		client.WithEvents(func(ev client.Event) {
			in.mu.Lock()
			in.events = append(in.events, ev)
			in.mu.Unlock()
		}),
		client.WithHealth(func() cuecast.Health {
			w := wp.Load()
			if w != nil && in.sick.Load() != 0 && w.Current().Version == in.sick.Load() {
				return cuecast.Health{Healthy: false, Detail: "error rate up"}
			}
			return cuecast.Health{Healthy: true}
		}))...)
	if err != nil {
		e.t.Fatalf("client.New: %v", err)
	}
	w, err := cl.Watch(e.t.Context(), cfg, client.Validate(func(b []byte) error {
		var v struct{ Limit int }
		if err := json.Unmarshal(b, &v); err != nil {
			return err
		}
		if uint64(v.Limit) == in.reject.Load() {
			return fmt.Errorf("limit %d breaks the service", v.Limit)
		}
		return nil
	}))
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	wp.Store(w)
	in.w, in.cl = w, cl
	e.t.Cleanup(func() { w.Stop(); cl.Close() })
	return in
}

func (in *instance) version() uint64 { return in.w.Current().Version }

// waitOn polls until every instance runs version v.
func waitOn(t *testing.T, v uint64, ins ...*instance) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("instances on v%d", v), poll.Patience, func() (bool, string) {
		var off []string
		for _, in := range ins {
			if in.version() != v {
				off = append(off, fmt.Sprintf("%s on v%d", in.id, in.version()))
			}
		}
		return len(off) == 0, strings.Join(off, ", ")
	})
}

// waitLive polls until the controller's view (the report stream) holds n
// live instances.
func (e *env) waitLive(n int) {
	e.t.Helper()
	poll.Until(e.t, fmt.Sprintf("%d live instances", n), poll.Patience, func() (bool, string) {
		rs, err := e.d.Reports(e.t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		return distributor.Weigh(rs) >= n, fmt.Sprintf("%d", distributor.Weigh(rs))
	})
}

// idIn returns n instance IDs whose cohort bucket in namespace "payments"
// is in [lo, hi).
func idIn(prefix string, lo, hi, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if b := cuecast.Cohort(cfg.Namespace(), id); b >= lo && b < hi {
			out = append(out, id)
		}
	}
	return out
}

// eventually polls cond until it holds or 15s pass.
// ticks waits for the running controller to finish n more ticks, each a
// look at every active rollout, then steps cfg once more itself: what
// holds after it holds whatever the controller's timing.
func (e *env) ticks(n uint64) {
	e.t.Helper()
	from := rollout.Ticks(e.c)
	poll.Until(e.t, fmt.Sprintf("%d controller ticks", n), poll.Patience, func() (bool, string) {
		got := rollout.Ticks(e.c) - from
		return got >= n, fmt.Sprintf("%d ticks", got)
	})
	if err := rollout.StepNow(e.t.Context(), e.c, cfg); err != nil {
		e.t.Fatalf("step %s: %v", cfg, err)
	}
}

// threeStages is canary 1%, early 10%, all: holds of hold each.
func threeStages(hold time.Duration) cuecast.Policy {
	return cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, MinInstances: 1, Hold: cuecast.Duration(hold)},
		{Name: "early", Percent: 10, Hold: cuecast.Duration(hold)},
		{Name: "all", Percent: 100},
	}}
}
