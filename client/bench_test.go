package client_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
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
	"github.com/cuecast/cuecast/internal/natstest"
)

// The fan-out benchmark runs the simulated instances in a child process (this
// test binary re-executed with CUECAST_BENCH_CHILD set): one process here can
// hold about 20,000 open files, and 10,000 instances with their own
// connections need 10,000 on each side. The parent runs the embedded server
// and the distributor; the two talk over the child's stdin and stdout.

func TestMain(m *testing.M) {
	if os.Getenv("CUECAST_BENCH_CHILD") != "" {
		os.Exit(benchChild())
	}
	os.Exit(m.Run())
}

// benchContent is a realistic ~2 KB config.
func benchContent(n uint64) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `{"version":%d,"limits":{`, n)
	for i := range 40 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"merchant_tier_%02d":{"max_amount":%d,"currency":"EUR","review":%t}`, i, 1000*(i+1)+int(n), i%3 == 0)
	}
	b.WriteString("}}")
	return []byte(b.String())
}

type fleet struct {
	srv       *natstest.Server
	d         *distributor.Distributor
	pub       *nats.Conn
	key       nkeys.KeyPair
	cmd       *exec.Cmd
	in        io.WriteCloser
	out       *bufio.Scanner
	n         int
	ver       uint64
	round     int
	published []time.Duration // how long each Publish took

	clientBytes, clientRSS, serverBytes float64
	serverSubs                          uint32
	serverGoroutines                    int
}

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

func startFleet(b *testing.B, n int, mode string) *fleet {
	b.Helper()
	f := &fleet{n: n, srv: natstest.Start(b)}
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
	baseHeap, baseG := heapNow(), runtime.NumGoroutine()

	f.cmd = exec.Command(os.Args[0])
	f.cmd.Env = append(os.Environ(), "CUECAST_BENCH_CHILD=1", "CUECAST_BENCH_URL="+f.srv.ClientURL(),
		"CUECAST_BENCH_N="+strconv.Itoa(n), "CUECAST_BENCH_KEY="+pubKey, "CUECAST_BENCH_MODE="+mode)
	f.cmd.Stderr = os.Stderr
	f.in, _ = f.cmd.StdinPipe()
	out, _ := f.cmd.StdoutPipe()
	f.out = bufio.NewScanner(out)
	f.out.Buffer(make([]byte, 1<<20), 64<<20)
	if err := f.cmd.Start(); err != nil {
		b.Fatalf("start child: %v", err)
	}
	ready := f.expect(b, "ready")
	f.clientBytes, _ = strconv.ParseFloat(ready[1], 64)
	f.clientRSS, _ = strconv.ParseFloat(ready[2], 64)
	f.serverBytes = float64(heapNow()-baseHeap) / float64(n)
	f.serverGoroutines = runtime.NumGoroutine() - baseG
	f.serverSubs = f.srv.NumSubscriptions()
	return f
}

func (f *fleet) stop() {
	if f.cmd != nil && f.cmd.Process != nil {
		f.in.Close()
		_ = f.cmd.Wait()
	}
}

func (f *fleet) ship(b *testing.B) {
	b.Helper()
	f.ver++
	v := cuecast.Version{Config: cfg, Version: f.ver, Commit: fmt.Sprintf("c%d", f.ver)}
	t0 := time.Now()
	if err := f.d.Publish(context.Background(), v, benchContent(f.ver)); err != nil {
		b.Fatalf("publish: %v", err)
	}
	f.published = append(f.published, time.Since(t0))
	if err := f.d.Deploy(context.Background(), v); err != nil {
		b.Fatalf("deploy: %v", err)
	}
}

func (f *fleet) send(b *testing.B, line string) {
	b.Helper()
	if _, err := io.WriteString(f.in, line+"\n"); err != nil {
		b.Fatalf("to child: %v", err)
	}
}

func (f *fleet) expect(b *testing.B, word string) []string {
	b.Helper()
	if !f.out.Scan() {
		b.Fatalf("child ended before %q: %v", word, f.out.Err())
	}
	fields := strings.Fields(f.out.Text())
	if len(fields) == 0 || fields[0] != word {
		b.Fatalf("from child: got %q, want %q", f.out.Text(), word)
	}
	return fields
}

// measure arms the child for one round, runs act, and returns each
// instance's latency from just before act.
func (f *fleet) measure(b *testing.B, kind string, want uint64, act func()) []time.Duration {
	b.Helper()
	f.send(b, fmt.Sprintf("arm %s %d", kind, want))
	f.expect(b, "armed")
	t0 := time.Now().UnixNano()
	act()
	done := f.expect(b, "done")
	lat := make([]time.Duration, 0, f.n)
	for _, s := range strings.Split(done[1], ",") {
		ns, _ := strconv.ParseInt(s, 10, 64)
		lat = append(lat, time.Duration(ns-t0))
	}
	slices.Sort(lat)
	return lat
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
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
//	go test -run '^$' -bench Fanout -benchtime 20x ./client/
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
		var floor, apply, rollback []time.Duration
		var floorAll, applyAll, rollbackAll, ship []time.Duration
		payload := benchContent(0)
		for range b.N {
			f.round++
			lat := f.measure(b, "floor", uint64(f.round), func() {
				m := nats.NewMsg("bench.floor")
				m.Data = payload
				m.Header.Set("Round", strconv.Itoa(f.round))
				if err := f.pub.PublishMsg(m); err != nil {
					b.Fatal(err)
				}
				_ = f.pub.Flush()
			})
			floor, floorAll = append(floor, lat...), append(floorAll, lat[len(lat)-1])
			var shipped time.Duration
			lat = f.measure(b, "apply", f.ver+1, func() {
				t0 := time.Now()
				f.ship(b)
				shipped = time.Since(t0)
			})
			ship = append(ship, shipped)
			apply, applyAll = append(apply, lat...), append(applyAll, lat[len(lat)-1])
		}
		// Roll every bucket back one version and forward again.
		lat := f.measure(b, "apply", f.ver-1, func() {
			buckets := make([]int, cuecast.Buckets)
			for i := range buckets {
				buckets[i] = i
			}
			if err := f.d.SetPointers(context.Background(), cfg, buckets, cuecast.Pointer{Version: f.ver - 1, Rollback: true, Reason: "bench"}); err != nil {
				b.Fatal(err)
			}
		})
		rollback, rollbackAll = append(rollback, lat...), append(rollbackAll, lat[len(lat)-1])
		f.measure(b, "apply", f.ver+1, func() { f.ship(b) })
		slices.Sort(floor)
		slices.Sort(apply)
		slices.Sort(floorAll)
		slices.Sort(applyAll)
		b.ReportMetric(ms(pct(floor, 0.5)), "floor-p50-ms")
		b.ReportMetric(ms(pct(floorAll, 0.5)), "floor-all-p50-ms")
		b.ReportMetric(ms(apply[0]), "apply-min-ms")
		b.ReportMetric(ms(pct(apply, 0.5)), "apply-p50-ms")
		b.ReportMetric(ms(pct(apply, 0.99)), "apply-p99-ms")
		b.ReportMetric(ms(apply[len(apply)-1]), "apply-max-ms")
		b.ReportMetric(ms(pct(applyAll, 0.5)), "apply-all-p50-ms")
		b.ReportMetric(ms(rollbackAll[0]), "rollback-all-ms")
		slices.Sort(ship)
		b.ReportMetric(ms(pct(ship, 0.5)), "publish+deploy-p50-ms")
		pubs := slices.Sorted(slices.Values(f.published))
		b.ReportMetric(ms(pct(pubs, 0.5)), "publish-p50-ms")
		b.ReportMetric(f.clientBytes/1024, "client-KiB/inst")
		b.ReportMetric(f.clientRSS/1024, "client-RSS-KiB/inst")
		b.ReportMetric(f.serverBytes/1024, "server-KiB/inst")
		b.Logf("n=%d rounds=%d server: %d subscriptions, %d goroutines for the fleet", n, b.N, f.serverSubs, f.serverGoroutines)
	})
}

// round is what the child is waiting for.
type round struct {
	kind      string
	want      uint64
	times     []atomic.Int64
	remaining atomic.Int64
	done      chan struct{}
}

func (r *round) hit(i int, at int64) {
	if r.times[i].CompareAndSwap(0, at) && r.remaining.Add(-1) == 0 {
		close(r.done)
	}
}

// benchChild runs the simulated instances: one connection, client and
// watcher each, plus a core subscription for the floor measurement.
func benchChild() int {
	url := os.Getenv("CUECAST_BENCH_URL")
	n, _ := strconv.Atoi(os.Getenv("CUECAST_BENCH_N"))
	key := os.Getenv("CUECAST_BENCH_KEY")
	mode := os.Getenv("CUECAST_BENCH_MODE")
	shared, err := client.NewKeyring(key)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	var cur atomic.Pointer[round]
	ctx := context.Background()
	ws := make([]*client.Watcher, n)
	ncs := make([]*nats.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	before := heapNow()
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			nc, err := nats.Connect(url, append(client.ConnectOptions(), nats.Timeout(30*time.Second))...)
			if err != nil {
				errs <- err
				return
			}
			ncs[i] = nc
			if _, err := nc.Subscribe("bench.floor", func(m *nats.Msg) {
				at := time.Now().UnixNano()
				if r := cur.Load(); r != nil && r.kind == "floor" && m.Header.Get("Round") == strconv.FormatUint(r.want, 10) {
					r.hit(i, at)
				}
			}); err != nil {
				errs <- err
				return
			}
			opts := []client.Option{client.WithInstance(fmt.Sprintf("bench-%05d", i))}
			switch mode {
			case "signed":
				opts = append(opts, client.WithTrustedKeys(key))
			case "signed-shared":
				opts = append(opts, client.WithKeyring(shared))
			}
			c, err := client.New(nc, append(opts,
				client.WithEvents(func(e client.Event) {
					if r := cur.Load(); r != nil && e.Kind == client.EventApplied && r.kind == "apply" && e.Version == r.want {
						r.hit(i, e.At.UnixNano())
					}
				}))...)
			if err != nil {
				errs <- err
				return
			}
			w, err := c.Watch(ctx, cfg)
			if err != nil {
				errs <- err
				return
			}
			ws[i] = w
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	default:
	}
	for _, w := range ws {
		for w.Current().Version == 0 {
			time.Sleep(10 * time.Millisecond)
		}
	}
	used := heapNow() - before
	fmt.Printf("ready %d %d\n", used/uint64(n), rss()/uint64(n))
	if path := os.Getenv("CUECAST_BENCH_CHILD_CPUPROFILE"); path != "" {
		// For diagnosis: profile the instances' side of the rounds.
		if f, err := os.Create(path); err == nil {
			if err := pprof.StartCPUProfile(f); err == nil {
				defer pprof.StopCPUProfile()
			}
		}
	}

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var kind string
		var want uint64
		if _, err := fmt.Sscanf(in.Text(), "arm %s %d", &kind, &want); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad command", in.Text())
			return 1
		}
		r := &round{kind: kind, want: want, times: make([]atomic.Int64, n), done: make(chan struct{})}
		r.remaining.Store(int64(n))
		cur.Store(r)
		fmt.Println("armed")
		<-r.done
		parts := make([]string, n)
		for i := range r.times {
			parts[i] = strconv.FormatInt(r.times[i].Load(), 10)
		}
		fmt.Printf("done %s\n", strings.Join(parts, ","))
	}
	for i, w := range ws {
		w.Stop()
		ncs[i].Close()
	}
	return 0
}

// rss is the process's resident set in bytes (Linux), 0 elsewhere.
func rss() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb * 1024
		}
	}
	return 0
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
	if err := d.Publish(b.Context(), v, benchContent(1)); err != nil {
		b.Fatal(err)
	}
	if err := d.Deploy(b.Context(), v); err != nil {
		b.Fatal(err)
	}
	nc := e.srv.Connect(b)
	for range b.N {
		before := heapNow()
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
		b.ReportMetric(float64(heapNow()-before)/n/1024, "watcher-KiB")
		for _, w := range ws {
			w.Stop()
		}
	}
}
