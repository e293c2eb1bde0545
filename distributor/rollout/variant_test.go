package rollout_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
)

// publishAt stores version n of path p with content b.
func (e *env) publishAt(p cuecast.ConfigPath, n uint64, b []byte) cuecast.Version {
	e.t.Helper()
	v := cuecast.Version{Config: p, Version: n, Commit: fmt.Sprintf("c%039d", n), Author: "ann", Message: "change"}
	if err := e.d.Publish(e.t.Context(), v, b); err != nil {
		e.t.Fatalf("Publish %s@%d: %v", p, n, err)
	}
	v.Checksum, v.Size = cuecast.Checksum(b), int64(len(b))
	return v
}

// variantWatcher is an instance declaring dims that watches cfg, so that
// it runs cfg's variant of dims.
func (e *env) variantWatcher(id string, dims map[string]string) *client.Watcher {
	e.t.Helper()
	nc := e.srv.Connect(e.t, client.ConnectOptions()...)
	cl, err := client.New(nc, client.WithInstance(id), client.WithTrustedKeys(e.pub), client.WithHeartbeat(heartbeat), client.WithDimensions(dims))
	if err != nil {
		e.t.Fatalf("client.New: %v", err)
	}
	w, err := cl.Watch(e.t.Context(), cfg)
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	e.t.Cleanup(func() { w.Stop(); cl.Close() })
	return w
}

func (e *env) waitVariantState(p cuecast.ConfigPath, v uint64, s rollout.State, stage int) {
	e.t.Helper()
	poll.Until(e.t, fmt.Sprintf("rollout of %s v%d %s at stage %d", p, v, s, stage), poll.Patience, func() (bool, string) {
		r, err := e.c.Record(e.t.Context(), p)
		if err != nil {
			return false, err.Error()
		}
		cur := r.Current
		if cur == nil {
			return false, "no rollout"
		}
		return cur.Version == v && cur.State == s && (stage < 0 || cur.Stage == stage),
			fmt.Sprintf("v%d %s stage %d reason %q", cur.Version, cur.State, cur.Stage, cur.Reason)
	})
}

// TestVariantRolloutsIndependent: the staged rollouts of two variants of
// one config are independent: halting prod-eu's keeps prod-eu's fleet on
// v1 while staging's completes and its fleet reaches v2.
func TestVariantRolloutsIndependent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, threeStages(300*time.Millisecond), cuecast.Relaxed)
	prod := cuecast.ConfigPath("payments/checkout/env=prod/region=eu")
	staging := cuecast.ConfigPath("payments/checkout/env=staging/region=eu")
	index := []byte(`{"config":"payments/checkout","dimensions":["env","region"],"schema":"cuecast.variants/v1",` +
		`"variants":["payments/checkout/env=prod/region=eu","payments/checkout/env=staging/region=eu"]}`)
	for _, v := range []cuecast.Version{e.publishAt(cfg, 1, index), e.publishAt(prod, 1, content(1)), e.publishAt(staging, 1, content(1))} {
		if err := e.d.Deploy(t.Context(), v); err != nil {
			t.Fatalf("Deploy %s: %v", v.Config, err)
		}
	}
	fleet := map[cuecast.ConfigPath][]*client.Watcher{}
	for _, env := range []string{"prod", "staging"} {
		p := cuecast.VariantPath(cfg, map[string]string{"env": env, "region": "eu"})
		for _, id := range slices.Concat(idIn(env+"-canary", 0, 1, 1), idIn(env+"-early", 1, 10, 1), idIn(env+"-late", 10, 100, 2)) {
			fleet[p] = append(fleet[p], e.variantWatcher(id, map[string]string{"env": env, "region": "eu"}))
		}
	}
	on := func(p cuecast.ConfigPath, v uint64) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("%s's fleet on v%d", p, v), poll.Patience, func() (bool, string) {
			var off []string
			for _, w := range fleet[p] {
				if s := w.Current(); s.Config != p || s.Version != v {
					off = append(off, fmt.Sprintf("%s@%d", s.Config, s.Version))
				}
			}
			return len(off) == 0, fmt.Sprint(off)
		})
	}
	on(prod, 1)
	on(staging, 1)
	poll.Until(t, "eight live instances", poll.Patience, func() (bool, string) {
		n := 0
		for _, p := range []cuecast.ConfigPath{prod, staging} {
			rs, err := e.d.Reports(t.Context(), p)
			if err != nil {
				return false, err.Error()
			}
			n += len(rs)
		}
		return n == 8, fmt.Sprint(n)
	})

	// prod's canary holds for an hour, so that the halt below finds it at
	// stage 0 however slowly this test gets to it: with 300 ms, a loaded
	// machine (load 15) saw prod's whole rollout complete before the wait
	// for its canary stage looked. A rollout keeps the policy it was
	// deployed with, so staging's, deployed next, still takes 300 ms a stage.
	for _, d := range []struct {
		p    cuecast.ConfigPath
		hold time.Duration
	}{{prod, time.Hour}, {staging, 300 * time.Millisecond}} {
		e.pol.set(threeStages(d.hold), cuecast.Relaxed)
		if err := e.c.Deploy(t.Context(), e.publishAt(d.p, 2, content(2))); err != nil {
			t.Fatalf("controller Deploy %s v2: %v", d.p, err)
		}
	}
	e.waitVariantState(prod, 2, rollout.StateHolding, 0)
	if _, err := e.c.Halt(t.Context(), prod, rollout.Action{Actor: "ann", Reason: "hold prod"}); err != nil {
		t.Fatalf("Halt %s: %v", prod, err)
	}
	e.waitVariantState(staging, 2, rollout.StateComplete, 2)
	on(staging, 2)
	on(prod, 1)
	e.waitVariantState(prod, 2, rollout.StateHalted, -1)
	if r, err := e.c.Record(t.Context(), staging); err != nil || r.Current.State != rollout.StateComplete {
		t.Fatalf("staging's rollout after prod's halt: %+v, %v", r.Current, err)
	}
}

// rewatcher is a service instance declaring dims that watches cfg by its
// base path, and watches it again when its variants change (a rejected
// variant index), as `cuecast watch` and `cuecast agent` do.
type rewatcher struct {
	w atomic.Pointer[client.Watcher]
}

func (e *env) rewatcher(id string, dims map[string]string) *rewatcher {
	e.t.Helper()
	rw := &rewatcher{}
	again := make(chan struct{}, 1)
	nc := e.srv.Connect(e.t, client.ConnectOptions()...)
	cl, err := client.New(nc, client.WithInstance(id), client.WithTrustedKeys(e.pub), client.WithHeartbeat(heartbeat),
		client.WithDimensions(dims), client.WithEvents(func(ev client.Event) {
			if ev.Kind == client.EventRejected && errors.Is(ev.Err, client.ErrVariant) {
				select {
				case again <- struct{}{}:
				default:
				}
			}
		}))
	if err != nil {
		e.t.Fatalf("client.New: %v", err)
	}
	w, err := cl.Watch(e.t.Context(), cfg)
	if err != nil {
		e.t.Fatalf("Watch: %v", err)
	}
	rw.w.Store(w)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-again:
			}
			rw.w.Load().Stop()
			w, err := cl.Watch(ctx, cfg)
			if err != nil {
				if ctx.Err() == nil {
					e.t.Errorf("watch %s again: %v", cfg, err)
				}
				return
			}
			rw.w.Store(w)
		}
	}()
	e.t.Cleanup(func() { cancel(); <-done; rw.w.Load().Stop(); cl.Close() })
	return rw
}

func (rw *rewatcher) current() client.Snapshot { return rw.w.Load().Current() }

// TestConfigGainingVariantsRollsNoIndexOut: a plain config whose next
// version makes it read a dimension publishes a variant index at its base
// path. No instance ever applies an index (docs/VARIANTS.md, PROTOCOL.md
// §10): its watchers refuse it and move to their variant. The controller
// points every bucket at the index at once and judges nobody on it; staged
// and judged, it halted when the watchers moved away ("stopped reporting
// before it applied v2") and pointed the base path back at the plain v1
// (issue 32, item 4).
func TestConfigGainingVariantsRollsNoIndexOut(t *testing.T) {
	t.Parallel()
	e := newEnvSet(t, threeStages(200*time.Millisecond), cuecast.Relaxed, func(e *env) {
		e.opts = func(o *rollout.Options) { o.ApplyTimeout = time.Second }
	})
	e.baseline()
	prod := map[string]string{"env": "prod"}
	var fleet []*rewatcher
	for _, id := range slices.Concat(idIn("canary", 0, 1, 1), idIn("early", 1, 10, 1), idIn("late", 10, 100, 2)) {
		fleet = append(fleet, e.rewatcher(id, prod))
	}
	on := func(p cuecast.ConfigPath, v uint64) {
		t.Helper()
		poll.Until(t, fmt.Sprintf("fleet on %s@%d", p, v), poll.Patience, func() (bool, string) {
			var off []string
			for _, rw := range fleet {
				if s := rw.current(); s.Config != p || s.Version != v {
					off = append(off, fmt.Sprintf("%s@%d", s.Config, s.Version))
				}
			}
			return len(off) == 0, fmt.Sprint(off)
		})
	}
	on(cfg, 1)
	e.waitLive(len(fleet))

	// The commit that makes the config read env: its variants, then the
	// index at the base path, handed to the controller as the tailer does.
	prodPath := cuecast.VariantPath(cfg, prod)
	stagingPath := cuecast.VariantPath(cfg, map[string]string{"env": "staging"})
	index := []byte(`{"config":"payments/checkout","dimensions":["env"],"schema":"cuecast.variants/v1",` +
		`"variants":["payments/checkout/env=prod","payments/checkout/env=staging"]}`)
	for _, v := range []cuecast.Version{e.publishAt(prodPath, 1, content(10)), e.publishAt(stagingPath, 1, content(20)), e.publishAt(cfg, 2, index)} {
		if err := e.c.Deploy(t.Context(), v); err != nil {
			t.Fatalf("controller Deploy %s@%d: %v", v.Config, v.Version, err)
		}
	}

	var rec rollout.Record
	poll.Until(t, "the index's rollout over", poll.Patience, func() (bool, string) {
		r, err := e.c.Record(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		rec = r
		cur := r.Current
		return cur != nil && cur.Version == 2 && !cur.State.Active(), fmt.Sprintf("%+v", cur)
	})
	if rec.Current.State != rollout.StateComplete {
		t.Fatalf("the index's rollout: %s (%s), want complete: no instance applies an index", rec.Current.State, rec.Current.Reason)
	}
	for _, b := range []int{0, 5, 50, 99} {
		if p := e.pointer(b); p.Version != 2 || p.Rollback {
			t.Errorf("base path's bucket %d: v%d rollback=%t, want the index v2, no rollback", b, p.Version, p.Rollback)
		}
	}
	audit, err := e.c.Audit(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	for _, a := range audit {
		if a.Action == "halt" {
			t.Errorf("audit: %s of v%d: %s, want no halt", a.Action, a.Version, a.Reason)
		}
	}
	on(prodPath, 1)
}
