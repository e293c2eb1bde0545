package pipeline_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// BenchmarkCommitToApplied is DESIGN.md §9's "commit on main ▶ every instance
// applied, tailer woken by webhook or notify" (target: p50 under 250 ms for
// 1,000 instances, compile included), with every part real: pipeline.Start
// (embedded NATS, tailer, distributor, rollout controller, default
// single-stage policy) following a go-git repository made from
// configs-example, and the instances as client watchers of
// payments/checkout, each with its own NATS connection, in a child process
// (this test binary re-executed with CUECAST_BENCH_CHILD=pipeline: one
// process here holds about 20,000 open files, and each instance needs one on
// each side).
//
// One iteration: a go-git commit changing checkout's max_amount_minor, then
// Tailer.Wake. Each instance's latency runs from the moment the commit
// returned (the branch points at it: where a webhook would fire) to its
// EventApplied for the new version, clocks compared on one host. The commit
// itself (git add and commit, ~ms) is reported apart as git-commit-p50-ms.
// Between iterations the timer stops for 2 s, so the instances' jittered
// reports of one round do not land in the next.
//
// Sizes are 100 and 1,000 instances; CUECAST_BENCH_INSTANCES=100,1000,5000
// overrides them. CUECAST_BENCH_KEYRING=shared makes the child's instances
// share one client.Keyring (each signature verified once per process)
// instead of each verifying it itself as separate processes would. Run with
//
//	go test -run '^$' -bench CommitToApplied -benchtime 5x ./internal/pipeline/
func BenchmarkCommitToApplied(b *testing.B) {
	sizes := []int{100, 1000}
	if s := os.Getenv("CUECAST_BENCH_INSTANCES"); s != "" {
		sizes = nil
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n <= 0 {
				b.Fatalf("CUECAST_BENCH_INSTANCES=%q: want a comma-separated list of positive counts", s)
			}
			sizes = append(sizes, n)
		}
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("instances=%d", n), func(b *testing.B) { benchCommitToApplied(b, n) })
	}
}

// TestMain runs the benchmark's instances when re-executed as its child.
func TestMain(m *testing.M) {
	if os.Getenv("CUECAST_BENCH_CHILD") == "pipeline" {
		os.Exit(runCommitBenchChild())
	}
	os.Exit(m.Run())
}

func benchCommitToApplied(b *testing.B, n int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	repo := gittest.New(b)
	repo.CopyDir("../../configs-example")
	first := repo.Commit("Import the example configs")
	p, err := pipeline.Start(ctx, pipeline.Config{
		Repo:    repo.Dir,
		Branch:  "main",
		DataDir: b.TempDir(),
		Listen:  "127.0.0.1:0",
		// Only Wake makes the tailer poll after its first poll at start.
		Interval: time.Hour,
	})
	if err != nil {
		b.Fatalf("start pipeline: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("pipeline run: %v", err)
		}
		p.Close()
	}()
	poll.Until(b, "tailer at the first commit", time.Minute, func() (bool, string) {
		st, err := p.Tailer.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Cursor == first, "at " + st.Cursor
	})

	c := startCommitBenchChild(b, p, n)
	defer c.stop()

	var lat, all, compiled, gitCommit []time.Duration
	line := "max_amount_minor: 5_000_000" // as configs-example writes it
	round := 0
	for b.Loop() {
		b.StopTimer()
		round++
		time.Sleep(2 * time.Second) // the previous round's reports settle
		want := latestCheckout(b, p).Version + 1
		c.send(b, fmt.Sprintf("arm %d", want))
		c.expect(b, "armed", 10*time.Second)
		next := fmt.Sprintf("max_amount_minor: %d", 5_000_000+round)
		editCheckoutLine(b, repo, line, next)
		line = next
		b.StartTimer()

		before := time.Now()
		sha := repo.Commit("checkout: " + next)
		t0 := time.Now()
		p.Tailer.Wake()
		fields := c.expect(b, "done", time.Minute)

		b.StopTimer()
		gitCommit = append(gitCommit, t0.Sub(before))
		v := latestCheckout(b, p)
		if v.Version != want || v.Commit != sha {
			b.Fatalf("checkout's latest: got v%d from %s, want v%d from %s", v.Version, v.Commit, want, sha)
		}
		compiled = append(compiled, v.CompiledAt.Sub(t0))
		roundLat := make([]time.Duration, 0, n)
		for _, s := range strings.Split(fields[1], ",") {
			at, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				b.Fatalf("from child: applied time %q: %v", s, err)
			}
			roundLat = append(roundLat, time.Duration(at-t0.UnixNano()))
		}
		slices.Sort(roundLat)
		lat = append(lat, roundLat...)
		all = append(all, roundLat[len(roundLat)-1])
		b.Logf("round %d (v%d): compiled +%.1f ms, first applied +%.1f ms, p50 %.1f ms, all %.1f ms",
			round, want, benchMS(compiled[len(compiled)-1]), benchMS(roundLat[0]), benchMS(benchPct(roundLat, 0.5)), benchMS(roundLat[len(roundLat)-1]))
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	slices.Sort(all)
	slices.Sort(compiled)
	slices.Sort(gitCommit)
	b.ReportMetric(benchMS(benchPct(lat, 0.5)), "applied-p50-ms")
	b.ReportMetric(benchMS(benchPct(lat, 0.99)), "applied-p99-ms")
	b.ReportMetric(benchMS(lat[len(lat)-1]), "applied-max-ms")
	b.ReportMetric(benchMS(benchPct(all, 0.5)), "all-applied-p50-ms")
	b.ReportMetric(benchMS(benchPct(compiled, 0.5)), "compiled-p50-ms")
	b.ReportMetric(benchMS(benchPct(gitCommit, 0.5)), "git-commit-p50-ms")
}

// latestCheckout is checkout's newest version.
func latestCheckout(b *testing.B, p *pipeline.Pipeline) cuecast.Version {
	b.Helper()
	vs, err := p.Distributor.Versions(context.Background(), checkout)
	if err != nil || len(vs) == 0 {
		b.Fatalf("versions of %s: got %d, %v", checkout, len(vs), err)
	}
	return vs[0]
}

// editCheckoutLine replaces one line of checkout.cue in the work tree.
func editCheckoutLine(b *testing.B, repo *gittest.Repo, from, to string) {
	b.Helper()
	src, err := os.ReadFile(filepath.Join(repo.Dir, "payments", "checkout", "checkout.cue"))
	if err != nil {
		b.Fatal(err)
	}
	if !strings.Contains(string(src), from+"\n") {
		b.Fatalf("checkout.cue has no line %q", from)
	}
	repo.Write(map[string]string{"payments/checkout/checkout.cue": strings.Replace(string(src), from+"\n", to+"\n", 1)})
}

func benchPct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, int(float64(len(sorted))*p))]
}

func benchMS(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// commitBenchChild is the parent's handle on the child process. Its stdout
// is read by one goroutine into lines, so the parent can wait with a
// deadline.
type commitBenchChild struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
}

func startCommitBenchChild(b *testing.B, p *pipeline.Pipeline, n int) *commitBenchChild {
	b.Helper()
	c := &commitBenchChild{cmd: exec.Command(os.Args[0]), lines: make(chan string, 4)}
	c.cmd.Env = append(os.Environ(), "CUECAST_BENCH_CHILD=pipeline", "CUECAST_BENCH_URL="+p.ClientURL(),
		"CUECAST_BENCH_N="+strconv.Itoa(n), "CUECAST_BENCH_KEY="+p.PublicKey)
	c.cmd.Stderr = os.Stderr
	var err error
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := c.cmd.Start(); err != nil {
		b.Fatalf("start child: %v", err)
	}
	go func() {
		defer close(c.lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 64<<20)
		for sc.Scan() {
			c.lines <- sc.Text()
		}
	}()
	c.expect(b, "ready", 5*time.Minute)
	return c
}

func (c *commitBenchChild) send(b *testing.B, line string) {
	b.Helper()
	if _, err := io.WriteString(c.in, line+"\n"); err != nil {
		b.Fatalf("to child: %v", err)
	}
}

// expect waits up to timeout for the child's next line, which must start
// with word, and returns its fields.
func (c *commitBenchChild) expect(b *testing.B, word string, timeout time.Duration) []string {
	b.Helper()
	select {
	case line, ok := <-c.lines:
		if !ok {
			b.Fatalf("child ended before %q", word)
		}
		fields := strings.Fields(line)
		if len(fields) == 0 || fields[0] != word {
			b.Fatalf("from child: got %.200q, want %q", line, word)
		}
		return fields
	case <-time.After(timeout):
		b.Fatalf("child: no %q after %s", word, timeout)
	}
	return nil
}

func (c *commitBenchChild) stop() {
	c.in.Close() // the child stops its watchers and exits at end of input
	_ = c.cmd.Wait()
}

// commitRound is the version the child is waiting for and when each
// instance applied it.
type commitRound struct {
	want      uint64
	times     []atomic.Int64
	remaining atomic.Int64
	done      chan struct{}
}

func (r *commitRound) hit(i int, at int64) {
	if r.times[i].CompareAndSwap(0, at) && r.remaining.Add(-1) == 0 {
		close(r.done)
	}
}

// runCommitBenchChild runs the instances: a connection, client and watcher of
// payments/checkout each. It says "ready" once every one has applied a
// version; then, for each "arm V" on stdin, "armed", and "done" with every
// instance's EventApplied time of version V in unix nanoseconds.
func runCommitBenchChild() int {
	url := os.Getenv("CUECAST_BENCH_URL")
	n, _ := strconv.Atoi(os.Getenv("CUECAST_BENCH_N"))
	key := os.Getenv("CUECAST_BENCH_KEY")
	var keyring *client.Keyring
	if os.Getenv("CUECAST_BENCH_KEYRING") == "shared" {
		var err error
		if keyring, err = client.NewKeyring(key); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	}
	var cur atomic.Pointer[commitRound]
	var complaints atomic.Int64 // the first few rejections and errors go to stderr
	ctx := context.Background()
	ws := make([]*client.Watcher, n)
	ncs := make([]*nats.Conn, n)
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
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
			trust := client.WithTrustedKeys(key)
			if keyring != nil {
				trust = client.WithKeyring(keyring)
			}
			cl, err := client.New(nc, trust, client.WithInstance(fmt.Sprintf("bench-%05d", i)),
				client.WithEvents(func(e client.Event) {
					switch e.Kind {
					case client.EventApplied:
						if r := cur.Load(); r != nil && e.Version == r.want {
							r.hit(i, e.At.UnixNano())
						}
					case client.EventRejected, client.EventError:
						if complaints.Add(1) <= 10 {
							fmt.Fprintf(os.Stderr, "child: instance %d: %s\n", i, e)
						}
					}
				}))
			if err != nil {
				errs <- err
				return
			}
			if ws[i], err = cl.Watch(ctx, checkout); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	select {
	case err := <-errs:
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	default:
	}
	deadline := time.Now().Add(time.Minute)
	for i, w := range ws {
		for w.Current().Version == 0 {
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "child: instance %d applied nothing in a minute\n", i)
				return 1
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Println("ready")

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var want uint64
		if _, err := fmt.Sscanf(in.Text(), "arm %d", &want); err != nil {
			fmt.Fprintln(os.Stderr, "child: bad command", in.Text())
			return 1
		}
		r := &commitRound{want: want, times: make([]atomic.Int64, n), done: make(chan struct{})}
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
