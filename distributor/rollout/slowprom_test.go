package rollout_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
)

// silentPrometheus is a Prometheus that does not answer: it accepts
// connections and never replies, as a paused or overloaded one does. It
// counts the connections it accepted.
func silentPrometheus(t *testing.T) (url string, accepted *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + l.Addr().String(), accepted
}

// TestHaltDuringSlowAnalysis: an operator's halt is carried out while the
// stage's analysis waits on a Prometheus that does not answer. The
// controller asked its metrics one after another inside its command loop,
// so six metrics at a 20 s query timeout held a halt for two minutes (the
// CLI gives up after 30 s: "recorded but not carried out").
func TestHaltDuringSlowAnalysis(t *testing.T) {
	t.Parallel()
	const (
		metrics      = 6
		queryTimeout = 20 * time.Second
	)
	url, accepted := silentPrometheus(t)
	pa, err := analysis.New(url, analysis.Options{Timeout: queryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var ms []cuecast.Metric
	for i := range metrics {
		ms = append(ms, cuecast.Metric{Name: fmt.Sprintf("m%d", i), Query: `sum(svc_errors_total * on(instance) group_left cuecast_config_info{$selector})`,
			Compare: cuecast.CompareThreshold, Max: 1, Interval: cuecast.Duration(100 * time.Millisecond), MaxErrors: 3})
	}
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"svc-0"}, Hold: cuecast.Duration(time.Hour), Analysis: ms},
		{Name: "all", Percent: 100},
	}}
	e := newEnvSet(t, pol, cuecast.Relaxed, func(e *env) { e.opts = func(o *rollout.Options) { o.Analyzer = pa } })
	e.baseline()
	canary := e.instance("svc-0")
	waitOn(t, 1, canary)
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, canary)
	poll.Until(t, "the analysis asking the silent Prometheus", poll.Patience, func() (bool, string) {
		return accepted.Load() > 0, "no connection yet"
	})

	// The operator's CLI: a controller without policies, which records the
	// halt and waits for serve's to carry it out.
	op, err := rollout.New(t.Context(), e.nc, e.d, nil, rollout.Options{Heartbeat: heartbeat, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	halted := make(chan error, 1)
	go func() {
		_, err := op.Halt(context.Background(), cfg, rollout.Action{Actor: "ann", Reason: "prometheus is down, stop"})
		halted <- err
	}()
	// Well below one query's timeout, let alone six of them: not how fast
	// the halt is, but that it does not wait for the queries.
	bound := queryTimeout / 2
	poll.Until(t, "the operator's halt carried out", bound, func() (bool, string) {
		cur := e.record().Current
		return cur.State == rollout.StateHalted && cur.Reverted, fmt.Sprintf("%s, reverted %t, note %q", cur.State, cur.Reverted, cur.Note)
	})
	if err := poll.Receive(t, "the operator's halt returning", bound, halted); err != nil {
		t.Errorf("Halt: %v", err)
	}
	waitOn(t, 1, canary)
}
