package integration_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/simfleet"
)

// The fan-out benchmark runs the simulated instances in a child process (this
// test binary re-executed by simfleet with CUECAST_BENCH_CHILD set): one
// process here can hold about 20,000 open files, and 10,000 instances with
// their own connections need 10,000 on each side. The parent runs the
// embedded server and the distributor; the two talk over the child's stdin
// and stdout.

func TestMain(m *testing.M) {
	if os.Getenv(simfleet.ChildEnv) != "" {
		os.Exit(benchChild())
	}
	os.Exit(natstest.RunWithExampleEnv(m, exampleConfig, []byte(exampleContent)))
}

type fleet struct {
	srv       *natstest.Server
	d         *distributor.Distributor
	pub       *nats.Conn
	key       nkeys.KeyPair
	child     *simfleet.Child
	ver       uint64
	round     int
	published []time.Duration      // how long each Publish took
	cpu       map[string]*roundCPU // by round kind
	profiled  int                  // rounds profiled (CUECAST_BENCH_CPUPROFILE)

	serverBytes      float64
	serverSubs       uint32
	serverGoroutines int
}

func startFleet(b *testing.B, n int, mode string) *fleet {
	b.Helper()
	f := &fleet{srv: natstest.Start(b)}
	f.pub = f.srv.Connect(b)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		b.Fatal(err)
	}
	f.key = kp
	pubKey, _ := kp.PublicKey()
	dopts := distributor.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	if mode != "unsigned" {
		dopts.SigningKey = kp
	}
	f.d, err = distributor.New(context.Background(), f.pub, dopts)
	if err != nil {
		b.Fatal(err)
	}
	f.ship(b)
	baseHeap, baseG := simfleet.HeapInUse(), runtime.NumGoroutine()
	f.child = simfleet.Start(b, simfleet.Spec{Child: "fanout", URL: f.srv.ClientURL(), Instances: n,
		Env: []string{"CUECAST_BENCH_KEY=" + pubKey, "CUECAST_BENCH_MODE=" + mode}})
	f.serverBytes = float64(simfleet.HeapInUse()-baseHeap) / float64(n)
	f.serverGoroutines = runtime.NumGoroutine() - baseG
	f.serverSubs = f.srv.NumSubscriptions()
	return f
}

func (f *fleet) stop() {
	if f.child != nil {
		f.child.Stop()
	}
}

func (f *fleet) ship(b *testing.B) {
	b.Helper()
	f.ver++
	v := cuecast.Version{Config: cfg, Version: f.ver, Commit: fmt.Sprintf("c%d", f.ver)}
	t0 := time.Now()
	if err := f.d.Publish(context.Background(), v, simfleet.Content(f.ver)); err != nil {
		b.Fatalf("publish: %v", err)
	}
	f.published = append(f.published, time.Since(t0))
	if err := f.d.Deploy(context.Background(), v); err != nil {
		b.Fatalf("deploy: %v", err)
	}
}

// measure arms the child for one round, runs act, and returns each
// instance's latency from just before act. It adds the CPU time the child
// and this process (server and distributor) spent in the round, from just
// before act until the last instance had it, to f.cpu[kind]; with
// CUECAST_BENCH_CPUPROFILE=dir, it writes this process's CPU profile of
// the round to dir/parent-KIND-N.prof, N counting the rounds measured
// (merge them with go tool pprof).
func (f *fleet) measure(b *testing.B, kind string, want uint64, act func()) []time.Duration {
	b.Helper()
	f.child.Arm(b, kind, want)
	stopProfile := f.profileRound(b, kind)
	child0, self0 := procCPU(f.child.Pid()), selfCPU()
	t0 := time.Now()
	act()
	lat := f.child.Done(b, t0)
	child1, self1 := procCPU(f.child.Pid()), selfCPU()
	stopProfile()
	if f.cpu == nil {
		f.cpu = map[string]*roundCPU{}
	}
	c := f.cpu[kind]
	if c == nil {
		c = &roundCPU{}
		f.cpu[kind] = c
	}
	c.rounds++
	c.child += child1 - child0
	c.server += self1 - self0
	return lat
}

// roundCPU is the CPU time spent in the rounds of one kind.
type roundCPU struct {
	rounds        int
	child, server time.Duration
}

// reportCPU reports the CPU time per round of each kind in cpu.
func reportCPU(b *testing.B, cpu map[string]*roundCPU) {
	for kind, c := range cpu {
		name := kind
		if kind == simfleet.Applied {
			name = "apply"
		}
		b.ReportMetric(ms(c.child)/float64(c.rounds), "child-cpu-ms/"+name)
		b.ReportMetric(ms(c.server)/float64(c.rounds), "server-cpu-ms/"+name)
	}
}

func (f *fleet) profileRound(b *testing.B, kind string) (stop func()) {
	dir := os.Getenv("CUECAST_BENCH_CPUPROFILE")
	if dir == "" {
		return func() {}
	}
	if kind == simfleet.Applied {
		kind = "apply"
	}
	f.profiled++
	out, err := os.Create(filepath.Join(dir, fmt.Sprintf("parent-%s-%03d.prof", kind, f.profiled)))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(out); err != nil {
		b.Fatal(err)
	}
	return func() {
		pprof.StopCPUProfile()
		_ = out.Close()
	}
}

// procCPU is the user and system CPU time process pid has used (Linux; 0
// elsewhere), in clock ticks of 10 ms.
func procCPU(pid int) time.Duration {
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command, which is in parentheses.
	i := bytes.LastIndexByte(st, ')')
	if i < 0 {
		return 0
	}
	fields := strings.Fields(string(st[i+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// selfCPU is the user and system CPU time this process has used.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchSettle is the pause before each measured round: a round measures one
// change reaching a fleet at rest, so it starts after the previous round's
// apply reports are in (each instance sends one 0.5–1.5 s after applying,
// with the default 15 s heartbeat; watcher_timers.go, reportSoon), and the
// child has collected its heap (settleHeap). Back to back, a
// round would also carry the storing of the previous round's 10,000 reports,
// a change rate of two a second on one config that the targets do not
// describe; CUECAST_BENCH_SETTLE=0 measures that (BENCHMARKS.md,
// "Distribution").
func benchSettle(b *testing.B) time.Duration {
	s := os.Getenv("CUECAST_BENCH_SETTLE")
	if s == "" {
		return 1500 * time.Millisecond
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		b.Fatalf("CUECAST_BENCH_SETTLE=%q: %v", s, err)
	}
	return d
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkFanout: version published ▶ every instance applied and verified
// (checksummed, and signed unless mode=unsigned), against bare core-NATS
// fan-out of a message of the same size to the same connections, and a
// rollback pointer reaching all. Modes: unsigned; signed (each instance
// verifies the pointer signature itself, as separate processes would, all
// on this box's two cores); signed-shared (the child's instances share one
// Keyring, so each distinct signature is verified once per process). Each
// iteration is one round of each. Run with e.g.
//
//	go test -run '^$' -bench Fanout -benchtime 20x ./client/integration/
func BenchmarkFanout(b *testing.B) {
	outer := b
	for _, n := range []int{100, 1000, 10000} {
		for _, mode := range []string{"unsigned", "signed", "signed-shared"} {
			benchFanout(outer, n, mode)
		}
	}
}

func benchFanout(outer *testing.B, n int, mode string) {
	var f *fleet
	defer func() {
		if f != nil {
			f.stop()
			f.srv.Stop()
		}
	}()
	outer.Run(fmt.Sprintf("instances=%d_%s", n, mode), func(b *testing.B) {
		// The fleet outlives this function: the benchmark framework
		// calls it once with b.N=1 and again with the real b.N.
		if f == nil {
			f = startFleet(outer, n, mode)
		}
		f.cpu = nil
		var floor, apply []time.Duration
		var floorAll, applyAll, rollbackAll, ship []time.Duration
		payload := simfleet.Content(0)
		settle := benchSettle(b)
		for range b.N {
			time.Sleep(settle)
			f.round++
			lat := f.measure(b, simfleet.Floor, uint64(f.round), func() {
				m := nats.NewMsg("bench.floor")
				m.Data = payload
				m.Header.Set("Round", strconv.Itoa(f.round))
				if err := f.pub.PublishMsg(m); err != nil {
					b.Fatal(err)
				}
				_ = f.pub.Flush()
			})
			floor, floorAll = append(floor, lat...), append(floorAll, lat[len(lat)-1])
			time.Sleep(settle)
			var shipped time.Duration
			lat = f.measure(b, simfleet.Applied, f.ver+1, func() {
				t0 := time.Now()
				f.ship(b)
				shipped = time.Since(t0)
			})
			ship = append(ship, shipped)
			apply, applyAll = append(apply, lat...), append(applyAll, lat[len(lat)-1])
		}
		// The CPU of the floor and apply rounds, not of the rollback and
		// the unsettled round after it.
		cpu := f.cpu
		f.cpu = nil
		// Roll every bucket back one version and forward again.
		time.Sleep(settle)
		lat := f.measure(b, simfleet.Applied, f.ver-1, func() {
			buckets := make([]int, cuecast.Buckets)
			for i := range buckets {
				buckets[i] = i
			}
			if err := f.d.SetPointers(context.Background(), cfg, buckets, cuecast.Pointer{Version: f.ver - 1, Rollback: true, Reason: "bench"}); err != nil {
				b.Fatal(err)
			}
		})
		rollbackAll = append(rollbackAll, lat[len(lat)-1])
		f.measure(b, simfleet.Applied, f.ver+1, func() { f.ship(b) })
		b.ReportMetric(ms(simfleet.Percentile(floor, 0.5)), "floor-p50-ms")
		b.ReportMetric(ms(simfleet.Percentile(floorAll, 0.5)), "floor-all-p50-ms")
		b.ReportMetric(ms(slices.Min(apply)), "apply-min-ms")
		b.ReportMetric(ms(simfleet.Percentile(apply, 0.5)), "apply-p50-ms")
		b.ReportMetric(ms(simfleet.Percentile(apply, 0.99)), "apply-p99-ms")
		b.ReportMetric(ms(slices.Max(apply)), "apply-max-ms")
		b.ReportMetric(ms(simfleet.Percentile(applyAll, 0.5)), "apply-all-p50-ms")
		b.ReportMetric(float64(simfleet.Percentile(applyAll, 0.5))/float64(simfleet.Percentile(floorAll, 0.5)), "apply/floor")
		// The same ratio round by round (each apply round against the floor
		// round just before it), less swayed by a slow stretch of the run.
		ratios := make([]time.Duration, len(applyAll))
		for i := range applyAll {
			ratios[i] = applyAll[i] * 1000 / floorAll[i]
		}
		b.ReportMetric(float64(simfleet.Percentile(ratios, 0.5))/1000, "apply/floor-by-round-p50")
		b.ReportMetric(ms(rollbackAll[0]), "rollback-all-ms")
		b.ReportMetric(ms(simfleet.Percentile(ship, 0.5)), "publish+deploy-p50-ms")
		b.ReportMetric(ms(simfleet.Percentile(f.published, 0.5)), "publish-p50-ms")
		b.ReportMetric(f.child.HeapPerInstance/1024, "client-KiB/inst")
		b.ReportMetric(f.child.RSSPerInstance/1024, "client-RSS-KiB/inst")
		b.ReportMetric(f.serverBytes/1024, "server-KiB/inst")
		reportCPU(b, cpu)
		b.Logf("n=%d rounds=%d server: %d subscriptions, %d goroutines for the fleet", n, b.N, f.serverSubs, f.serverGoroutines)
	})
}

// benchChild runs the simulated instances: one connection, client and
// watcher each, plus a core subscription for the floor measurement (a round
// of kind floor is reached by the message carrying the round's number).
func benchChild() int {
	trust, err := simfleet.Trust(os.Getenv("CUECAST_BENCH_MODE"), os.Getenv("CUECAST_BENCH_KEY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	return simfleet.RunChild("child:", simfleet.Options{
		Config:      cfg,
		Client:      []client.Option{trust},
		BeforeRound: settleHeap(),
		Conn:        simfleet.FloorConn("bench.floor"),
	})
}

// settleHeap is what the child does before each round, with the fleet at
// rest: a collection, so that none falls in a round. The child's instances
// share one heap of 650–800 MB, which a collection marks in whichever round
// it lands in (about 70 ms of CPU, and the floor and apply rounds are
// measured against each other); a fleet of separate processes has no such
// shared collection. Nil (none) when rounds run back to back
// (CUECAST_BENCH_SETTLE=0) or with CUECAST_BENCH_CHILD_GC=0, which measures
// without it (BENCHMARKS.md, "Distribution").
func settleHeap() func() {
	if os.Getenv("CUECAST_BENCH_CHILD_GC") == "0" {
		return nil
	}
	if d, err := time.ParseDuration(os.Getenv("CUECAST_BENCH_SETTLE")); err == nil && d == 0 {
		return nil
	}
	return runtime.GC
}

// BenchmarkWatcherMemory: the marginal heap of one watcher (its client,
// goroutine, subscriptions and applied snapshot of a ~2 KB config), with
// 1,000 watchers sharing one connection, so the connection's own buffers are
// not counted. Reported as watcher-KiB.
func BenchmarkWatcherMemory(b *testing.B) {
	const n = 1000
	e := &env{srv: natstest.Start(b)}
	e.dnc = e.srv.Connect(b)
	d, err := distributor.New(b.Context(), e.dnc, distributor.Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	v := cuecast.Version{Config: cfg, Version: 1, Commit: "c1"}
	if err := d.Publish(b.Context(), v, simfleet.Content(1)); err != nil {
		b.Fatal(err)
	}
	if err := d.Deploy(b.Context(), v); err != nil {
		b.Fatal(err)
	}
	nc := e.srv.Connect(b)
	for range b.N {
		before := simfleet.HeapInUse()
		ws := make([]*client.Watcher, n)
		for i := range n {
			c, err := client.New(nc, client.WithInstance(fmt.Sprintf("mem-%04d", i)))
			if err != nil {
				b.Fatal(err)
			}
			if ws[i], err = c.Watch(b.Context(), cfg); err != nil {
				b.Fatal(err)
			}
		}
		for _, w := range ws {
			for w.Current().Version != 1 {
				time.Sleep(time.Millisecond)
			}
		}
		b.ReportMetric(float64(simfleet.HeapInUse()-before)/n/1024, "watcher-KiB")
		for _, w := range ws {
			w.Stop()
		}
	}
}
