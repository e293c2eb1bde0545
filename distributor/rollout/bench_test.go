package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
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
	"github.com/cuecast/cuecast/internal/cputime"
	"github.com/cuecast/cuecast/internal/natstest"
)

// benchInstances is how many simulated instances BenchmarkRollback runs
// (CUECAST_BENCH_INSTANCES overrides; the target in DESIGN.md is 10,000).
func benchInstances() int {
	if n, err := strconv.Atoi(os.Getenv("CUECAST_BENCH_INSTANCES")); err == nil && n > 0 {
		return n
	}
	return 10000
}

// BenchmarkRollback: `cuecast rollback` ▶ every instance applied the
// rolled-back version. The operator's controller (no policies, no signing
// key, as in the CLI) records the rollback; serve's controller carries it
// out; N real client watchers, 100 per NATS connection, count their applies.
// CUECAST_BENCH_DIRECT=1 calls Rollback on serve's controller instead.
func BenchmarkRollback(b *testing.B) {
	n := benchInstances()
	srv := natstest.Start(b)
	nc := srv.Connect(b)
	ctx := context.Background()
	key, err := nkeys.CreateAccount()
	if err != nil {
		b.Fatal(err)
	}
	pub, _ := key.PublicKey()
	d, err := distributor.New(ctx, nc, distributor.Options{Logger: benchLogger(), SigningKey: key})
	if err != nil {
		b.Fatal(err)
	}
	serve, err := rollout.New(ctx, nc, d, rollout.Static{}, rollout.Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = serve.Run(rctx) }()
	opNC := srv.Connect(b)
	opD, err := distributor.New(ctx, opNC, distributor.Options{})
	if err != nil {
		b.Fatal(err)
	}
	operator, err := rollout.New(ctx, opNC, opD, nil, rollout.Options{Logger: benchLogger()})
	if err != nil {
		b.Fatal(err)
	}

	var mu sync.Mutex
	applied := map[uint64]*atomic.Int64{}
	counter := func(v uint64) *atomic.Int64 {
		mu.Lock()
		defer mu.Unlock()
		if applied[v] == nil {
			applied[v] = &atomic.Int64{}
		}
		return applied[v]
	}
	var last atomic.Int64 // unix nanos of the latest apply
	version := uint64(0)
	publish := func() cuecast.Version {
		version++
		v := cuecast.Version{Config: cfg, Version: version, Commit: fmt.Sprintf("%040d", version)}
		body := benchBody(version)
		if err := d.Publish(ctx, v, body); err != nil {
			b.Fatal(err)
		}
		v.Checksum, v.Size = cuecast.Checksum(body), int64(len(body))
		return v
	}
	waitAll := func(v uint64, within time.Duration) time.Duration {
		c := counter(v)
		deadline := time.Now().Add(within)
		for c.Load() < int64(n) {
			if time.Now().After(deadline) {
				b.Fatalf("v%d: %d of %d instances applied after %s", v, c.Load(), n, within)
			}
			time.Sleep(time.Millisecond)
		}
		return time.Duration(last.Load())
	}
	v1 := publish()
	if err := serve.Deploy(ctx, v1); err != nil {
		b.Fatal(err)
	}

	conns := make([]*nats.Conn, (n+99)/100)
	for i := range conns {
		conns[i] = srv.Connect(b, nats.Timeout(30*time.Second))
	}
	start := time.Now()
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			c, err := client.New(conns[i/100], client.WithInstance(fmt.Sprintf("bench-%05d", i)), client.WithTrustedKeys(pub),
				client.WithEvents(func(e client.Event) {
					if e.Kind == client.EventApplied {
						last.Store(e.At.UnixNano())
						counter(e.Version).Add(1)
					}
				}))
			if err != nil {
				b.Error(err)
				return
			}
			if _, err := c.Watch(ctx, cfg); err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	waitAll(1, time.Minute)
	b.Logf("%d instances watching after %s", n, time.Since(start).Round(time.Millisecond))

	var took []time.Duration
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		if _, err := operator.Unpin(ctx, cfg, rollout.Action{Actor: "bench", Reason: "next round"}); err != nil && version > 1 {
			b.Fatal(err)
		}
		good := version
		bad := publish()
		if err := serve.Deploy(ctx, bad); err != nil {
			b.Fatal(err)
		}
		waitAll(bad.Version, time.Minute)
		// Let the reports of that apply drain into the report stream and
		// the rollout complete: a rollback comes minutes after a rollout,
		// not within milliseconds of its last apply.
		time.Sleep(3 * time.Second)
		// good was applied before: count only the applies of the rollback.
		counter(good).Store(0)
		b.StartTimer()
		t0 := time.Now()
		benchLogger().Info("rollback starts")
		actor := operator
		if os.Getenv("CUECAST_BENCH_DIRECT") != "" {
			// In serve's process, with the signing controller itself: no
			// hand-off through the rollout state.
			actor = serve
		}
		if _, err := actor.Rollback(ctx, cfg, good, rollout.Action{Actor: "bench", Reason: "bench"}); err != nil {
			b.Fatal(err)
		}
		recorded := time.Since(t0)
		end := waitAll(good, time.Minute)
		took = append(took, time.Unix(0, int64(end)).Sub(t0))
		b.Logf("rollback carried out (pin applied) after %s, last instance applied after %s",
			recorded.Round(time.Millisecond), took[len(took)-1].Round(time.Millisecond))
	}
	b.StopTimer()
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(took[len(took)-1])/1e6, "max-ms")
	b.ReportMetric(float64(n), "instances")
}

// benchLogger logs to stderr when CUECAST_BENCH_LOG is set, to see where
// the time goes.
func benchLogger() *slog.Logger {
	if os.Getenv("CUECAST_BENCH_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}

func benchBody(n uint64) []byte {
	return fmt.Appendf(nil, `{"version":%d,"limits":{"max_amount":%d,"currency":"EUR","padding":"%0512d"}}`, n, 1000+n, n)
}

// memDistributor is the distributor as far as the controller is concerned,
// in memory: BenchmarkControllerCPU measures the controller, not JetStream.
type memDistributor struct {
	mu       sync.Mutex
	versions map[cuecast.ConfigPath][]cuecast.Version
}

var _ rollout.Distributor = (*memDistributor)(nil)

func (m *memDistributor) Versions(_ context.Context, c cuecast.ConfigPath) ([]cuecast.Version, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	vs := m.versions[c]
	if len(vs) == 0 {
		return nil, cuecast.ErrNotFound
	}
	return slices.Clone(vs), nil
}

func (m *memDistributor) Version(ctx context.Context, c cuecast.ConfigPath, n uint64) (cuecast.Version, []byte, error) {
	vs, err := m.Versions(ctx, c)
	if err != nil {
		return cuecast.Version{}, nil, err
	}
	for _, v := range vs {
		if v.Version == n {
			return v, benchBody(n), nil
		}
	}
	return cuecast.Version{}, nil, cuecast.ErrNotFound
}

func (m *memDistributor) SetPointers(context.Context, cuecast.ConfigPath, []int, cuecast.Pointer) error {
	return nil
}

func (m *memDistributor) SetInstancePointers(context.Context, cuecast.ConfigPath, []string, cuecast.Pointer) error {
	return nil
}

func (m *memDistributor) Reports(context.Context, cuecast.ConfigPath) ([]cuecast.Report, error) {
	return nil, nil
}

// BenchmarkControllerCPU: 1,000 configs, each with a rollout holding, and
// 1,000 instances per config reporting every 15 s (66,667 reports/s), for
// CUECAST_BENCH_SECONDS (default 15). The process CPU is measured once with
// the controller running and once without (publisher and server only); the
// difference is the controller's, including the server's cost of delivering
// every report to its subscription. Reports are published at the real rate,
// spread evenly, after one warm-up round (heartbeats then repeat what the
// controller has seen).
func BenchmarkControllerCPU(b *testing.B) {
	for _, active := range []bool{true, false} {
		b.Run(fmt.Sprintf("rolling=%t", active), func(b *testing.B) { benchControllerCPU(b, active) })
	}
}

// benchControllerCPU runs 1,000 configs whose rollouts are all holding in
// their canary stage (rolling) or all complete (the steady state).
func benchControllerCPU(b *testing.B, rolling bool) {
	const configs, perConfig = 1000, 1000
	secs := 15
	if s, err := strconv.Atoi(os.Getenv("CUECAST_BENCH_SECONDS")); err == nil && s > 0 {
		secs = s
	}
	srv := natstest.Start(b)
	nc := srv.Connect(b)
	ctx := context.Background()
	md := &memDistributor{versions: map[cuecast.ConfigPath][]cuecast.Version{}}
	cfgs := make([]cuecast.ConfigPath, configs)
	for i := range cfgs {
		cfgs[i] = cuecast.ConfigPath(fmt.Sprintf("ns%d/cfg%04d", i%10, i))
		md.versions[cfgs[i]] = []cuecast.Version{
			{Config: cfgs[i], Version: 2, Checksum: "b"}, {Config: cfgs[i], Version: 1, Checksum: "a"}}
	}
	pol := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 10, Hold: cuecast.Duration(time.Hour), MaxUnhealthy: 0.5, MaxApplyFailures: 0.5},
		{Name: "all", Percent: 100},
	}}}
	var policies rollout.Policies = pol
	if !rolling {
		policies = rollout.Static{}
	}
	c, err := rollout.New(ctx, nc, md, policies, rollout.Options{Interval: time.Second})
	if err != nil {
		b.Fatal(err)
	}
	for _, cp := range cfgs {
		if err := c.Deploy(ctx, cuecast.Version{Config: cp, Version: 2, Checksum: "b"}); err != nil {
			b.Fatal(err)
		}
	}
	pub := srv.Connect(b)
	// Pre-encode one report per instance and config.
	reports := make([][]byte, 0, configs*perConfig)
	subjects := make([]string, 0, configs*perConfig)
	for _, cp := range cfgs {
		for j := range perConfig {
			id := fmt.Sprintf("i%04d", j)
			r := cuecast.Report{Instance: id, Cohort: cuecast.Cohort(cp.Namespace(), id), Config: cp, Version: 2,
				Checksum: "b", Healthy: true, At: time.Now().UTC(), Labels: map[string]string{"region": "eu-west-1"}}
			body, _ := json.Marshal(r)
			reports = append(reports, body)
			subjects = append(subjects, "ccs."+cp.Namespace()+"."+id+"."+cp.Name())
		}
	}
	run := func(withController bool) time.Duration {
		rctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		if withController {
			go func() { defer close(done); _ = c.Run(rctx) }()
		} else {
			close(done)
		}
		// After the first tick the controller subscribes to the reports of
		// the configs it rolls out.
		time.Sleep(1500 * time.Millisecond)
		// Warm-up: every instance has reported once before the measured
		// window, as in a fleet that has been running, and the controller
		// has heard a heartbeat and a quarter (it decides nothing before).
		for k := range reports {
			_ = pub.Publish(subjects[k], reports[k])
		}
		_ = pub.Flush()
		time.Sleep(20 * time.Second)
		cpu0 := cputime.Process()
		interval := time.Duration(secs) * time.Second / time.Duration(len(reports))
		t0 := time.Now()
		const batch = 500
		for i := 0; i < len(reports); i += batch {
			for k := i; k < min(i+batch, len(reports)); k++ {
				_ = pub.Publish(subjects[k], reports[k])
			}
			if d := time.Until(t0.Add(time.Duration(i+batch) * interval)); d > 0 {
				time.Sleep(d)
			}
		}
		_ = pub.Flush()
		time.Sleep(time.Until(t0.Add(time.Duration(secs) * time.Second)))
		used := cputime.Process() - cpu0
		stop()
		<-done
		return used
	}
	b.ResetTimer()
	for range b.N {
		base := run(false)
		with := run(true)
		b.ReportMetric(float64(base)/float64(time.Duration(secs)*time.Second), "cores-without")
		b.ReportMetric(float64(with)/float64(time.Duration(secs)*time.Second), "cores-with")
		b.ReportMetric(float64(with-base)/float64(time.Duration(secs)*time.Second), "controller-cores")
	}
}
