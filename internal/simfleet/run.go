package simfleet

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
)

// The child's environment, set by Start.
const (
	// ChildEnv names the variable that tells the test binary it is the
	// child; its value is Spec.Child.
	ChildEnv   = "CUECAST_BENCH_CHILD"
	urlEnv     = "CUECAST_BENCH_URL"
	countEnv   = "CUECAST_BENCH_N"
	profileEnv = "CUECAST_BENCH_CHILD_CPUPROFILE"
)

// Applied is the kind of round that an instance's EventApplied of the
// round's version reaches.
const Applied = "apply"

// Floor is the kind of round that a core message on a floor subject
// (FloorConn) reaches: the wire's own latency to every instance, without
// the client's work.
const Floor = "floor"

// FloorConn is an Options.Conn that subscribes each instance to subject: a
// message carrying the armed Floor round's number in its Round header
// reaches the instance.
func FloorConn(subject string) func(i int, nc *nats.Conn, armed func() *Round) error {
	return func(i int, nc *nats.Conn, armed func() *Round) error {
		_, err := nc.Subscribe(subject, func(m *nats.Msg) {
			at := time.Now()
			if r := armed(); r != nil && r.Kind == Floor && m.Header.Get("Round") == strconv.FormatUint(r.Want, 10) {
				r.Hit(i, at)
			}
		})
		return err
	}
}

// Trust is the client option of a benchmark's signing mode, for the
// signing key key: "unsigned" (nothing verified), "signed" (each client
// verifies) or "signed-shared" (the process's clients share one Keyring,
// so each pointer is verified once).
func Trust(mode, key string) (client.Option, error) {
	switch mode {
	case "unsigned":
		return client.WithInsecureSkipVerify(), nil
	case "signed":
		return client.WithTrustedKeys(key), nil
	case "signed-shared":
		k, err := client.NewKeyring(key)
		if err != nil {
			return nil, err
		}
		return client.WithKeyring(k), nil
	}
	return nil, fmt.Errorf("signing mode %q: want unsigned, signed or signed-shared", mode)
}

// RunChild is Run for a child process's main: it returns the exit code,
// having said Run's error on stderr after prefix.
func RunChild(prefix string, o Options) int {
	if err := Run(context.Background(), o); err != nil {
		fmt.Fprintln(os.Stderr, prefix, err)
		return 1
	}
	return 0
}

// Round is what the child waits for: every instance to reach Want in the
// way Kind names, and when each did.
type Round struct {
	Kind string
	Want uint64

	times     []atomic.Int64 // unix nanoseconds, 0 until reached
	remaining atomic.Int64
	done      chan struct{}
}

// Hit records that instance i reached the round at at; later hits of the
// same instance do not count. Safe for concurrent use.
func (r *Round) Hit(i int, at time.Time) {
	if r.times[i].CompareAndSwap(0, at.UnixNano()) && r.remaining.Add(-1) == 0 {
		close(r.done)
	}
}

// Options say what each instance is besides its connection (client.
// ConnectOptions), its client (named bench-00000, bench-00001, …) and its
// watcher.
type Options struct {
	// Config is what every instance watches.
	Config cuecast.ConfigPath
	// Dial is more options for every instance's connection, after
	// client.ConnectOptions (an inbox prefix, say).
	Dial []nats.Option
	// Client is more options for every instance's client (trust, for
	// one); Run adds the instance's name and its events callback.
	Client []client.Option
	// Conn, if set, is called with instance i's connection before its
	// client is made, for a subscription of the benchmark's own; armed
	// returns the round under way, or nil.
	Conn func(i int, nc *nats.Conn, armed func() *Round) error
	// Event, if set, sees every event of instance i.
	Event func(i int, e client.Event)
	// BeforeRound, if set, is called when a round is asked for, before
	// the child says it is armed: the round's clock starts after it
	// returns (a collection with the fleet at rest, say).
	BeforeRound func()
}

// Run is the child's side: it runs as many instances as Start was asked
// for against its server, setting up 64 at a time, and says "ready" once
// every one has applied a version; then it answers each "arm" on stdin
// until stdin ends, and stops the watchers and closes the connections. ctx
// is the watchers' context. Run returns the first instance's error in
// setting up, an error if an instance applied nothing within a minute of
// the last being set up, or one for a line it does not understand. With
// CUECAST_BENCH_CHILD_CPUPROFILE=file in its environment, the child writes
// a CPU profile of its rounds there, for diagnosis; a file name with %s
// gets one profile per round, from arming to the last instance reaching
// it, %s replaced by the round's kind and number.
func Run(ctx context.Context, o Options) error {
	url := os.Getenv(urlEnv)
	n, err := strconv.Atoi(os.Getenv(countEnv))
	if err != nil || n <= 0 {
		return fmt.Errorf("%s=%q: want a positive count", countEnv, os.Getenv(countEnv))
	}
	var armed atomic.Pointer[Round]
	ws := make([]*client.Watcher, n)
	ncs := make([]*nats.Conn, n)
	defer func() {
		for i := range n {
			if ws[i] != nil {
				ws[i].Stop()
			}
			if ncs[i] != nil {
				ncs[i].Close()
			}
		}
	}()
	start := func(i int) error {
		nc, err := nats.Connect(url, slices.Concat(client.ConnectOptions(), []nats.Option{nats.Timeout(30 * time.Second)}, o.Dial)...)
		if err != nil {
			return err
		}
		ncs[i] = nc
		if o.Conn != nil {
			if err := o.Conn(i, nc, armed.Load); err != nil {
				return err
			}
		}
		c, err := client.New(nc, slices.Concat(
			[]client.Option{client.WithInstance(fmt.Sprintf("bench-%05d", i))},
			o.Client,
			[]client.Option{client.WithEvents(func(e client.Event) {
				if r := armed.Load(); r != nil && e.Kind == client.EventApplied && r.Kind == Applied && e.Version == r.Want {
					r.Hit(i, e.At)
				}
				if o.Event != nil {
					o.Event(i, e)
				}
			})})...)
		if err != nil {
			return err
		}
		ws[i], err = c.Watch(ctx, o.Config)
		return err
	}

	before := HeapInUse()
	errs := make(chan error, n)
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := start(i); err != nil {
				errs <- fmt.Errorf("instance %d: %w", i, err)
			}
		})
	}
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
	}
	deadline := time.Now().Add(time.Minute)
	for i, w := range ws {
		for w.Current().Version == 0 {
			if time.Now().After(deadline) {
				return fmt.Errorf("instance %d applied nothing in a minute", i)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	fmt.Printf("ready %d %d\n", (HeapInUse()-before)/uint64(n), rss()/uint64(n))
	path := os.Getenv(profileEnv)
	perRound := strings.Contains(path, "%s")
	if path != "" && !perRound {
		defer profile(path)()
	}

	in := bufio.NewScanner(os.Stdin)
	round := 0
	for in.Scan() {
		r := &Round{times: make([]atomic.Int64, n), done: make(chan struct{})}
		if _, err := fmt.Sscanf(in.Text(), "arm %s %d", &r.Kind, &r.Want); err != nil {
			return fmt.Errorf("bad command %q", in.Text())
		}
		r.remaining.Store(int64(n))
		if o.BeforeRound != nil {
			o.BeforeRound()
		}
		stop := func() {}
		if perRound {
			round++
			stop = profile(fmt.Sprintf(path, fmt.Sprintf("%s-%03d", r.Kind, round)))
		}
		armed.Store(r)
		fmt.Println("armed")
		<-r.done
		stop()
		parts := make([]string, n)
		for i := range r.times {
			parts[i] = strconv.FormatInt(r.times[i].Load(), 10)
		}
		fmt.Printf("done %s\n", strings.Join(parts, ","))
	}
	return in.Err()
}

// profile starts a CPU profile into path and returns its stop; a profile
// that cannot be written is skipped (it is for diagnosis only).
func profile(path string) (stop func()) {
	f, err := os.Create(path)
	if err != nil {
		return func() {}
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return func() {}
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}
}

// HeapInUse is the heap and stacks in use after two collections: what the
// child's ready line counts, for the parent to count its own side the same
// way.
func HeapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
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

// Content is version n of the config the fleet benchmarks publish: 2.2 KB
// of JSON, the size of every figure in BENCHMARKS.md's Distribution and
// Scale sections.
func Content(n uint64) []byte {
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
