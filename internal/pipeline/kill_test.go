package pipeline_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natsserver"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// The serve child of TestKillServe: the test binary re-executed with these
// set runs one pipeline (embedded NATS) and nothing else.
const (
	envServeChild  = "CUECAST_FAULTS_SERVE_DATA" // the data directory
	envServeRepo   = "CUECAST_FAULTS_SERVE_REPO"
	envServeListen = "CUECAST_FAULTS_SERVE_LISTEN"
	// envServeNATS, when set, is the external NATS server serve uses
	// instead of its embedded one (as one replica).
	envServeNATS = "CUECAST_FAULTS_SERVE_NATS"
	// envServeID names a --nats serve in the lease (default "serve").
	envServeID = "CUECAST_FAULTS_SERVE_ID"
)

// runServeChild runs serve until SIGKILL, or until its stdin closes (the
// parent test is gone). It prints "ready" once the pipeline started.
func runServeChild() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		cancel()
	}()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	cfg := pipeline.Config{
		Repo: os.Getenv(envServeRepo), Branch: "main", DataDir: os.Getenv(envServeChild),
		Listen: os.Getenv(envServeListen), Interval: 20 * time.Millisecond, Logger: log,
		// A lease of 1 s, embedded or not: every serve of a stream the same.
		External: pipeline.External{LeaseTTL: time.Second},
	}
	if url := os.Getenv(envServeNATS); url != "" {
		cfg.External = pipeline.External{NATS: url, LeaseTTL: time.Second, ReplicaID: cmp.Or(os.Getenv(envServeID), "serve")}
	}
	var p *pipeline.Pipeline
	var err error
	// The killed serve's port and data directory lock are released by the
	// kernel; a moment's retry covers a port still in use.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if p, err = pipeline.Start(ctx, cfg); err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "serve child: %v\n", err)
		return 1
	}
	defer p.Close()
	fmt.Println("ready")
	if err := p.Run(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "serve child: run: %v\n", err)
		return 1
	}
	return 0
}

// envCLIChild, set, makes the re-executed test binary the cuecast command
// line itself, run with the arguments it was given: a real `cuecast serve`
// process without a second build of the binary (as testscript runs
// cuecast), built from the same packages as the test.
const envCLIChild = "CUECAST_FAULTS_CLI"

// runCLIChild is cmd/cuecast's main: SIGTERM stops the command cleanly.
func runCLIChild() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return cli.System(ctx)
}

// startCLI starts `cuecast ARGS...` as a process; it is ready once its
// stderr has a line beginning with ready.
func startCLI(t *testing.T, ready string, args ...string) *serveProc {
	t.Helper()
	return startProc(t, args, ready, envCLIChild+"=1")
}

// serveProc is one child process: a serve, or a NATS server.
type serveProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	ready  chan struct{}
	exited chan error
	stderr *syncBuf
}

// syncBuf is a child serve's stderr, read while it runs.
type syncBuf = iostreams.SyncBuffer

// startServeProc starts a serve child listening on listen, or using the
// NATS server at natsURL when it is set; env adds to the child's.
func startServeProc(t *testing.T, repo, data, listen, natsURL string, env ...string) *serveProc {
	t.Helper()
	return startChild(t, append([]string{envServeChild + "=" + data, envServeRepo + "=" + repo, envServeListen + "=" + listen, envServeNATS + "=" + natsURL}, env...)...)
}

// The NATS child of TestKillServe's "nats" mode: a NATS server with
// JetStream over a store directory, on a fixed address, killed and started
// again over the same store.
const (
	envNATSChild  = "CUECAST_FAULTS_NATS_DIR"
	envNATSListen = "CUECAST_FAULTS_NATS_LISTEN"
)

// runNATSChild runs a NATS server until SIGKILL or until its stdin closes;
// it prints "ready" once the server accepts clients.
func runNATSChild() int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var s *server.Server
	var err error
	// The killed server's port is released by the kernel; a moment's retry
	// covers it still being in use.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if s, err = natsserver.Start(ctx, natsserver.Options{Dir: os.Getenv(envNATSChild), Listen: os.Getenv(envNATSListen)}); err == nil || time.Now().After(deadline) {
			break
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "nats child: %v\n", err)
		return 1
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	s.Shutdown()
	s.WaitForShutdown()
	return 0
}

// startNATSProc starts a NATS child over the store dir, listening on listen.
func startNATSProc(t *testing.T, dir, listen string) *serveProc {
	t.Helper()
	return startChild(t, envNATSChild+"="+dir, envNATSListen+"="+listen)
}

// startChild re-executes the test binary with env added; TestMain runs
// the child that env names, which prints "ready" once it is.
func startChild(t *testing.T, env ...string) *serveProc {
	t.Helper()
	return startProc(t, []string{"-test.run=^$"}, "ready", env...)
}

// startProc re-executes the test binary with args and env added. It is
// ready once a line of its output, stdout or stderr, begins with ready;
// its stderr is kept.
func startProc(t *testing.T, args []string, ready string, env ...string) *serveProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], args...)
	// A child killed mid-compile leaves its compiler's scratch directory
	// behind: in the test's own, not the machine's /tmp.
	cmd.Env = append(append(os.Environ(), "TMPDIR="+t.TempDir()), env...)
	sp := &serveProc{cmd: cmd, ready: make(chan struct{}), exited: make(chan error, 1), stderr: &syncBuf{}}
	lines := &readyLine{prefix: ready, ready: sp.ready}
	cmd.Stdout = lines
	cmd.Stderr = io.MultiWriter(sp.stderr, lines)
	var err error
	if sp.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start child: %v", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() }) // when the test failed half-way; harmless after Wait
	go func() { sp.exited <- cmd.Wait() }()
	return sp
}

// readyLine closes ready at the first line written to it that begins with
// prefix.
type readyLine struct {
	mu     sync.Mutex
	prefix string
	ready  chan struct{}
	line   []byte // the line being written
	done   bool
}

func (r *readyLine) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range p {
		if r.done {
			break
		}
		if b != '\n' {
			r.line = append(r.line, b)
			continue
		}
		if strings.HasPrefix(string(r.line), r.prefix) {
			close(r.ready)
			r.done = true
		}
		r.line = r.line[:0]
	}
	return len(p), nil
}

// kill sends SIGKILL and waits; it fails the test when serve had exited on
// its own (a failed start, say after the previous kill).
func (sp *serveProc) kill(t *testing.T) {
	t.Helper()
	_ = sp.cmd.Process.Signal(syscall.SIGKILL)
	err := <-sp.exited
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !ee.Sys().(syscall.WaitStatus).Signaled() {
		t.Fatalf("child exited by itself before the kill: %v\n%s", err, sp.stderr.String())
	}
}

// waitReady waits for serve's "ready", failing if it exits first.
func (sp *serveProc) waitReady(t *testing.T) {
	t.Helper()
	select {
	case <-sp.ready:
	case err := <-sp.exited:
		t.Fatalf("child exited before it was ready: %v\n%s", err, sp.stderr.String())
	case <-time.After(convergeBound):
		t.Fatalf("child not ready after %s\n%s", convergeBound, sp.stderr.String())
	}
}

// TestKillServe kills a separate serve process (the test binary re-executed)
// with SIGKILL at random points: during its start (and the embedded
// server's JetStream recovery), right after commits while it compiles and
// publishes, or idle; while dead, commits go on. Each time a new serve
// starts on the same data directory (and port). "embedded" kills NATS with
// serve; "external" runs serve against a separate server through a Link,
// which is also cut (serve↔NATS partitions), and the killed serve's lease
// must expire before the next one works. A fleet of instances watches
// throughout, behind links that also get cut. Checked as TestSoakFaults
// does (fleet.check, convergence within convergeBound), and the stream
// itself: each config's versions are numbered 1… without gaps, version n+1
// being the config's n-th change (no commit published twice or lost).
// "nats" runs that server as a process too and kills it (alone, or with
// serve) with SIGKILL, restarting it over the same store: serve and the
// fleet reconnect, and nothing it acknowledged is lost or published twice.
// CUECAST_SOAK=1 kills them many more times.
func TestKillServe(t *testing.T) {
	t.Parallel()
	for _, mode := range []string{"embedded", "external", "nats"} {
		t.Run(mode, func(t *testing.T) { killServe(t, mode != "embedded", mode == "nats") })
	}
}

func killServe(t *testing.T, external, killNATS bool) {
	kills, stopAt := soakLength(t, 4, 60)
	rng := soakRand(t, 3, fmt.Sprintf("%d kills", kills))

	ctx := context.Background()
	repo, cfgs := smallRepo(t)
	data := t.TempDir()
	pub := sharedKey(t, data)
	addr := natstest.FreeAddr(t) // where the fleet connects
	listen, natsURL := addr, ""
	var serveLink *natstest.Link
	var np *serveProc // the NATS child
	natsDir := t.TempDir()
	switch {
	case killNATS:
		np = startNATSProc(t, natsDir, addr)
		np.waitReady(t)
		t.Cleanup(func() { np.stdin.Close(); <-np.exited })
	case external:
		srv := natstest.Start(t)
		addr = strings.TrimPrefix(srv.ClientURL(), "nats://")
	}
	if external {
		serveLink = natstest.StartLink(t, addr)
		listen, natsURL = "", "nats://"+serveLink.Addr()
	}

	var n faults
	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	changes := map[cuecast.ConfigPath][]string{} // config ▶ its changing commits in order
	change := func() {
		cf := cfgs[rng.IntN(len(cfgs))]
		c.change(cf)
		changes[cf] = append(changes[cf], c.last[cf])
		n.commits++
	}

	sp := startServeProc(t, repo.Dir, data, listen, natsURL)
	sp.waitReady(t)
	f := startFleet(t, addr, pub, cfgs, 6)
	for r := 0; r < kills; r++ {
		if time.Now().After(stopAt) {
			kills = r
			break
		}
		switch k := rng.IntN(3); k {
		case 0: // early: before or during the start
			time.Sleep(time.Duration(rng.IntN(400)) * time.Millisecond)
		case 1: // while it publishes
			sp.waitReady(t)
			for range 1 + rng.IntN(3) {
				change()
			}
			time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
		default: // settled, with cut links
			sp.waitReady(t)
			change()
			if serveLink != nil && rng.IntN(2) == 0 { // and serve cut off from NATS
				serveLink.Cut()
				n.partitions++
			}
			var cut []*instance
			for _, in := range f.ins {
				if rng.IntN(3) == 0 {
					in.link.Cut()
					cut = append(cut, in)
				}
			}
			n.cuts += len(cut)
			time.Sleep(time.Duration(100+rng.IntN(400)) * time.Millisecond)
			for _, in := range cut {
				in.link.Heal()
			}
		}
		// In "nats": NATS alone a third of the time, serve alone a third,
		// both the rest.
		victim := 0
		if killNATS {
			victim = rng.IntN(3)
		}
		if victim != 1 {
			sp.kill(t)
			n.kills++
		}
		if victim != 0 {
			np.kill(t)
			n.natsKills++
		}
		if serveLink != nil {
			serveLink.Heal()
		}
		if rng.IntN(2) == 0 { // commits while dead
			change()
		}
		if victim != 0 {
			np = startNATSProc(t, natsDir, addr)
			np.waitReady(t)
		}
		if victim != 1 {
			sp = startServeProc(t, repo.Dir, data, listen, natsURL)
		}
	}
	sp.waitReady(t)
	healed := time.Now()
	last := sp
	t.Cleanup(func() {
		last.stdin.Close() // a clean stop
		select {
		case err := <-last.exited:
			if err != nil {
				t.Errorf("serve child: %v\n%s", err, last.stderr.String())
			}
		case <-time.After(convergeBound):
			t.Errorf("serve child did not stop %s after its stdin closed\n%s", convergeBound, last.stderr.String())
		}
	})

	// Read the stream as serve wrote it, through a connection of our own.
	nc, err := nats.Connect("nats://"+addr, client.ConnectOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	d, err := distributor.Open(ctx, nc, distributor.Options{}) // read-only: nothing of the parent's may mend the store
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	latest := map[cuecast.ConfigPath]cuecast.Version{}
	poll.Until(t, "every change published", poll.Patience, func() (bool, string) {
		for _, cf := range cfgs {
			v, err := d.Latest(ctx, cf)
			want := len(changes[cf]) + 1
			if err != nil || v.Version != uint64(want) {
				return false, fmt.Sprintf("%s at v%d, want v%d (%v)\n%s", cf, v.Version, want, err, sp.stderr.String())
			}
			latest[cf] = v
		}
		return true, ""
	})
	failures := 0
	for _, cf := range cfgs {
		vs, err := d.Versions(ctx, cf)
		if err != nil {
			t.Fatalf("versions of %s: %v", cf, err)
		}
		for i, v := range vs { // newest first
			want := uint64(len(vs) - i)
			if v.Version != want {
				t.Errorf("%s: v%d at position %d, want v%d (a gap or a duplicate)", cf, v.Version, i, want)
				failures++
			}
			if want > 1 && int(want-2) < len(changes[cf]) && v.Commit != changes[cf][want-2] {
				t.Errorf("%s@%d: commit %s, want %s", cf, want, v.Commit, changes[cf][want-2])
				failures++
			}
		}
	}
	took := f.converge(t, healed, latest)
	pairs, ff := f.check(t, func(cf cuecast.ConfigPath, v uint64) (cuecast.Version, error) {
		ver, _, err := d.Version(ctx, cf, v)
		return ver, err
	})
	failures += ff
	t.Logf("%d kills: %s; %d (config, version) pairs applied; converged %s after the last start; %d failures",
		kills, n, pairs, took.Round(time.Millisecond), failures)
}

// serveReady is the line `cuecast serve` writes on stderr once it serves.
const serveReady = "cuecast serve: NATS at "

// supervised is one `cuecast serve` process slot, started again by the test
// as a supervisor (systemd's Restart=on-failure) would when it exits by
// itself for a reason the docs give: a --nats serve whose NATS is not up
// yet, an embedded serve whose store needs reopening after a full disk.
type supervised struct {
	name string
	args []string
	http string // its operations server
	// expected says whether an exit on its own, with this stderr, is one
	// the docs promise.
	expected func(stderr string) bool
	proc     *serveProc
	exited   bool         // proc exited and was reaped
	procs    []*serveProc // every start, for their logs
	exits    []string     // the last line of each exit on its own
}

func (s *supervised) start(t *testing.T) {
	t.Helper()
	if len(s.procs) == 0 {
		t.Cleanup(func() {
			if t.Failed() {
				for i, p := range s.procs {
					t.Logf("%s, start %d, stderr:\n%s", s.name, i+1, p.stderr.String())
				}
			}
		})
	}
	s.proc = startCLI(t, serveReady, s.args...)
	s.procs = append(s.procs, s.proc)
	s.exited = false
}

// reap notes an exit of the process on its own: expected ones are
// recorded and the serve started again; any other fails the test.
func (s *supervised) reap(t *testing.T) {
	t.Helper()
	if s.exited {
		return
	}
	select {
	case err := <-s.proc.exited:
		s.exited = true
		s.exitedWith(t, err)
		s.start(t)
	default:
	}
}

func (s *supervised) exitedWith(t *testing.T, err error) {
	t.Helper()
	stderr := s.proc.stderr.String()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 || !s.expected(stderr) {
		t.Fatalf("%s exited by itself (%v), not as the docs say it may:\n%s", s.name, err, stderr)
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	s.exits = append(s.exits, lines[len(lines)-1])
}

// kill sends SIGKILL and waits for the process; one that had exited by
// itself meanwhile is reaped instead.
func (s *supervised) kill(t *testing.T) {
	t.Helper()
	if s.exited {
		return
	}
	_ = s.proc.cmd.Process.Signal(syscall.SIGKILL)
	err := <-s.proc.exited
	s.exited = true
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Sys().(syscall.WaitStatus).Signaled() {
		return
	}
	s.exitedWith(t, err)
}

// ready says whether the serve runs and has said it serves.
func (s *supervised) ready() bool {
	if s.exited {
		return false
	}
	select {
	case <-s.proc.ready:
		return true
	default:
		return false
	}
}

// stop stops the serve with SIGTERM and wants a clean exit. It waits for
// a serve still starting to say it serves: until then it may not have
// set up its handling of SIGTERM.
func (s *supervised) stop(t *testing.T) {
	t.Helper()
	if s.exited {
		return
	}
	select {
	case <-s.proc.ready:
	case err := <-s.proc.exited:
		s.exited = true
		s.exitedWith(t, err)
		return
	case <-time.After(convergeBound):
	}
	_ = s.proc.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.proc.exited:
		s.exited = true
		if err != nil {
			t.Errorf("%s: %v after SIGTERM\n%s", s.name, err, s.proc.stderr.String())
		}
	case <-time.After(convergeBound):
		t.Errorf("%s did not stop %s after SIGTERM\n%s", s.name, convergeBound, s.proc.stderr.String())
	}
}

// sharedKey writes one new signing key into each data directory, as
// replicas share theirs, before any serve starts there (so the fleet knows
// whom to trust from the start, and no kill catches serve writing it); it
// returns the public key.
func sharedKey(t *testing.T, dirs ...string) string {
	t.Helper()
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	pub, _ := kp.PublicKey()
	for _, dir := range dirs {
		if err := os.WriteFile(filepath.Join(dir, "signing.nk"), seed, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return pub
}
