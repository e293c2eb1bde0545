package scalesim

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/cuecast/cuecast/internal/simfleet"
)

// The children's environment.
const (
	roleEnv = "CUECAST_SCALESIM_ROLE"
	confEnv = "CUECAST_SCALESIM_CONF"
	// logEnv, when set, is the file the server logs to.
	logEnv = "CUECAST_SCALESIM_LOG"
	// fleetChild is simfleet.ChildEnv's value for the instances' children.
	fleetChild = "scalesim"
)

// Child runs the role the environment names, if any: a server (see the
// package comment) or a fleet of instances (simfleet). ok is false in the
// test process itself, which then runs its tests.
func Child() (code int, ok bool) {
	if os.Getenv(roleEnv) == "server" {
		return serverMain(os.Getenv(confEnv), os.Getenv(logEnv), os.Stdin, os.Stdout), true
	}
	if os.Getenv(simfleet.ChildEnv) == fleetChild {
		return fleetMain(), true
	}
	switch os.Getenv(roleEnv) {
	case summarizerRole:
		return summarizerMain(os.Stdin, os.Stdout), true
	case reportersRole:
		return reportersMain(os.Stdin, os.Stdout), true
	case busyRole:
		return busyMain(os.Stdin, os.Stdout), true
	}
	return 0, false
}

// Counters are a server's message counts since it started (varz, and its
// leafnode connections' from leafz).
type Counters struct {
	InMsgs, OutMsgs, InBytes, OutBytes int64
	// LeafInMsgs and LeafOutMsgs: over the leafnode connections only, as
	// this server counts them (received from, sent to the other side).
	LeafInMsgs, LeafOutMsgs int64
	Connections             int
	// CPU is the server process's user and system time (getrusage), which
	// Linux keeps in nanoseconds where /proc/<pid>/stat has 10 ms ticks:
	// a hub's cost per change is a few ticks.
	CPU time.Duration
	// Compression counts this server's leafnode links by the compression
	// each runs now. The generated configs leave it to nats-server's
	// s2_auto, which picks a costlier level as a link's round trip grows
	// past 10, 50 and 100 ms: on one saturated box, loopback links can
	// end up at s2_best, and their CPU is then part of what is measured.
	Compression map[string]int `json:",omitempty"`
	// GCs and GCCPU are the server process's completed collections and
	// the CPU the runtime estimates it spent collecting
	// (runtime/metrics): a process at rest is collected at least every
	// two minutes, so a short window holds one such collection or none.
	GCs   uint64
	GCCPU time.Duration
}

func serverMain(conf, log string, in io.Reader, out io.Writer) int {
	opts, err := server.ProcessConfigFile(conf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scalesim server: load %s: %v\n", conf, err)
		return 1
	}
	opts.NoLog, opts.NoSigs = log == "", true
	opts.LogFile, opts.Logtime = log, true
	s, err := server.NewServer(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "scalesim server %s: %v\n", conf, err)
		return 1
	}
	if log != "" {
		s.ConfigureLogger()
	}
	go s.Start()
	if !s.ReadyForConnections(30 * time.Second) {
		fmt.Fprintf(os.Stderr, "scalesim server %s: not ready after 30s\n", conf)
		return 1
	}
	defer func() {
		s.Shutdown()
		s.WaitForShutdown()
	}()
	fmt.Fprintf(out, "ready %s\n", s.ClientURL())
	sc := bufio.NewScanner(in)
	for sc.Scan() {
		if sc.Text() == "heap" {
			// The live heap after a collection: the resident set follows
			// the collector's pacing (up to twice the live heap before it
			// runs), which grows with the changes made, not the fleet.
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			fmt.Fprintf(out, "heap %d\n", m.HeapAlloc)
			continue
		}
		if sc.Text() != "stats" {
			fmt.Fprintf(os.Stderr, "scalesim server: bad command %q\n", sc.Text())
			return 1
		}
		c, err := counters(s)
		if err != nil {
			fmt.Fprintf(os.Stderr, "scalesim server: %v\n", err)
			return 1
		}
		b, _ := json.Marshal(c)
		fmt.Fprintf(out, "stats %s\n", b)
	}
	return 0
}

func counters(s *server.Server) (Counters, error) {
	v, err := s.Varz(nil)
	if err != nil {
		return Counters{}, fmt.Errorf("varz: %w", err)
	}
	l, err := s.Leafz(nil)
	if err != nil {
		return Counters{}, fmt.Errorf("leafz: %w", err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return Counters{}, fmt.Errorf("getrusage: %w", err)
	}
	gc := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/cpu/classes/gc/total:cpu-seconds"}}
	metrics.Read(gc)
	c := Counters{InMsgs: v.InMsgs, OutMsgs: v.OutMsgs, InBytes: v.InBytes, OutBytes: v.OutBytes, Connections: v.Connections,
		CPU: time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), GCs: gc[0].Value.Uint64(), GCCPU: time.Duration(gc[1].Value.Float64() * float64(time.Second))}
	for _, li := range l.Leafs {
		c.LeafInMsgs += li.InMsgs
		c.LeafOutMsgs += li.OutMsgs
		if c.Compression == nil {
			c.Compression = map[string]int{}
		}
		c.Compression[li.Compression]++
	}
	return c, nil
}

// Server is the parent's handle on a server child (or on another child
// that talks in lines: a summarizer, a report generator).
type Server struct {
	Name string
	// URL is where clients connect.
	URL string
	// Conf is the configuration it runs.
	Conf string
	cmd  *exec.Cmd
	in   io.WriteCloser
	out  *bufio.Scanner
}

// startServer runs the test binary again as a server with the
// configuration at conf, logging to log if set, and waits up to 30 s for it
// to accept clients; tb.Cleanup stops it.
func startServer(tb testing.TB, name, conf, log string) *Server {
	tb.Helper()
	s := startChild(tb, name, roleEnv+"=server", confEnv+"="+conf, logEnv+"="+log)
	s.Conf = conf
	f := s.line(tb, "ready")
	if len(f) != 2 {
		tb.Fatalf("server %s: got %q, want ready URL", name, strings.Join(f, " "))
	}
	s.URL = f[1]
	return s
}

// startChild runs the test binary again with env added to its
// environment; tb.Cleanup stops it.
func startChild(tb testing.TB, name string, env ...string) *Server {
	tb.Helper()
	s := &Server{Name: name}
	var out io.Reader
	s.cmd, s.in, out = simfleet.Reexec(tb, "server "+name, env...)
	s.out = bufio.NewScanner(out)
	tb.Cleanup(s.Stop)
	return s
}

// Pid is the server process's id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Counters asks the server for its message counts.
func (s *Server) Counters(tb testing.TB) Counters {
	tb.Helper()
	if _, err := io.WriteString(s.in, "stats\n"); err != nil {
		tb.Fatalf("server %s: %v", s.Name, err)
	}
	f := s.line(tb, "stats")
	var c Counters
	if len(f) != 2 || json.Unmarshal([]byte(f[1]), &c) != nil {
		tb.Fatalf("server %s: got %q, want stats JSON", s.Name, strings.Join(f, " "))
	}
	return c
}

// Heap asks the server for its live heap after a collection, in bytes.
// It collects, so it belongs outside the windows that count CPU.
func (s *Server) Heap(tb testing.TB) int64 {
	tb.Helper()
	if _, err := io.WriteString(s.in, "heap\n"); err != nil {
		tb.Fatalf("server %s: %v", s.Name, err)
	}
	f := s.line(tb, "heap")
	n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
	if len(f) != 2 || err != nil {
		tb.Fatalf("server %s: got %q, want heap bytes", s.Name, strings.Join(f, " "))
	}
	return n
}

// line reads the server's next line, which must start with word. The
// server answers at once; a server that has died ends its output.
func (s *Server) line(tb testing.TB, word string) []string {
	tb.Helper()
	if !s.out.Scan() {
		tb.Fatalf("server %s ended before %q: %v", s.Name, word, s.out.Err())
	}
	f := strings.Fields(s.out.Text())
	if len(f) == 0 || f[0] != word {
		tb.Fatalf("server %s: got %q, want %q", s.Name, s.out.Text(), word)
	}
	return f
}

// Stop closes the server's stdin, which shuts it down, and waits for it;
// one still running 20 s later is killed. Safe twice.
func (s *Server) Stop() {
	if s.in == nil {
		return
	}
	s.in.Close()
	s.in = nil
	kill := time.AfterFunc(20*time.Second, func() { _ = s.cmd.Process.Kill() })
	defer kill.Stop()
	_ = s.cmd.Wait()
}
