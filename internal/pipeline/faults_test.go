package pipeline_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/soak"
)

// convergeBound is how long every instance may take to reach its config's
// newest version once the faults have healed. Measured convergence is
// under a second on two shared cores (BENCHMARKS.md "Reliability"); the
// slowest path is an instance whose reconnect backoff reached the client's
// 5 s cap while its link was cut, plus a lease expiry (1 s) or a serve
// start (JetStream recovery, a few hundred ms), plus the tailer's poll.
// 30 s leaves a factor of about four over that worst case for a loaded
// machine; a fleet that does not converge at all fails it regardless.
const convergeBound = 30 * time.Second

// soakLength is short in `go test` and long with CUECAST_SOAK set (`make
// soak`); CUECAST_SOAK_FOR, a duration, additionally ends the faults phase
// at the time returned (a brief soak, without a flag of its own).
func soakLength(t *testing.T, short, long int) (int, time.Time) {
	t.Helper()
	if !soak.On() {
		return short, time.Now().Add(24 * time.Hour)
	}
	if s := os.Getenv("CUECAST_SOAK_FOR"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CUECAST_SOAK_FOR: %v", err)
		}
		return long, time.Now().Add(d)
	}
	return long, time.Now().Add(24 * time.Hour)
}

// soakSeed is a random seed, or CUECAST_SOAK_SEED's to replay a failed
// run's faults (their timing, and so the run, still varies).
func soakSeed(t *testing.T) uint64 {
	t.Helper()
	s := os.Getenv("CUECAST_SOAK_SEED")
	if s == "" {
		return rand.Uint64()
	}
	seed, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		t.Fatalf("CUECAST_SOAK_SEED: %v", err)
	}
	return seed
}

// soakRand is a soak's random source on stream, seeded by soakSeed; the
// seed is logged with what the run does (e.g. "8 rounds"), so that a
// failure can be replayed.
func soakRand(t *testing.T, stream uint64, what string) *rand.Rand {
	t.Helper()
	seed := soakSeed(t)
	t.Logf("seed %d, %s", seed, what)
	return rand.New(rand.NewPCG(seed, stream))
}

// failureLog is a logger for the serves of a fault run: their warnings and
// errors are kept and printed only when the test fails, where they say
// what a serve met (a failed poll, a lost lease) that the check cannot.
func failureLog(t *testing.T) *slog.Logger {
	var mu sync.Mutex
	var buf bytes.Buffer
	t.Cleanup(func() {
		if t.Failed() {
			mu.Lock()
			t.Logf("serve warnings and errors:\n%s", buf.String())
			mu.Unlock()
		}
	})
	return slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(b)
}

// applied is one update a watcher delivered.
type applied struct {
	version  uint64
	checksum string
	ok       bool // the content hashes to the checksum
}

// history records what every instance applied.
type history struct {
	mu  sync.Mutex
	per map[string][]applied // instance ▶ updates in order
}

func (h *history) add(id string, a applied) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.per[id] = append(h.per[id], a)
}

// instance is one watcher of the fleet, connected through its own link.
type instance struct {
	id   string
	cfg  cuecast.ConfigPath
	link *natstest.Link
	w    *client.Watcher
}

// fleet is the instances under test and their recorded history.
type fleet struct {
	ins       []*instance
	hist      *history
	recorders sync.WaitGroup
}

// startFleet connects n instances to the NATS server at addr, each through
// its own Link, each watching one of cfgs and trusting only pub.
func startFleet(t *testing.T, addr, pub string, cfgs []cuecast.ConfigPath, n int) *fleet {
	t.Helper()
	ctx := context.Background()
	f := &fleet{hist: &history{per: map[string][]applied{}}}
	for i := range n {
		in := &instance{id: fmt.Sprintf("i%d", i), cfg: cfgs[i%len(cfgs)], link: natstest.StartLink(t, addr)}
		nc, err := nats.Connect("nats://"+in.link.Addr(), append(client.ConnectOptions(),
			nats.ErrorHandler(func(*nats.Conn, *nats.Subscription, error) {}))...) // cut links: EOFs are the point
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		cl, err := client.New(nc, client.WithInstance(in.id), client.WithTrustedKeys(pub))
		if err != nil {
			t.Fatal(err)
		}
		if in.w, err = cl.Watch(ctx, in.cfg, client.LastKnownGood(t.TempDir()+"/lkg.json")); err != nil {
			t.Fatal(err)
		}
		f.recorders.Add(1)
		go func() {
			defer f.recorders.Done()
			for u := range in.w.Updates() {
				f.hist.add(in.id, applied{version: u.Version, checksum: u.Checksum, ok: u.Deleted || cuecast.Checksum(u.Content) == u.Checksum})
			}
		}()
		f.ins = append(f.ins, in)
	}
	return f
}

// converge waits until every instance holds its config's latest version,
// failing convergeBound after healed (when the last fault healed), and
// returns how long after healed it took.
func (f *fleet) converge(t *testing.T, healed time.Time, latest map[cuecast.ConfigPath]cuecast.Version) time.Duration {
	t.Helper()
	check := func() (bool, string) {
		for _, in := range f.ins {
			cur := in.w.Current()
			if want := latest[in.cfg]; cur.Version != want.Version || cur.Checksum != want.Checksum {
				return false, fmt.Sprintf("%s on %s v%d, want v%d", in.id, in.cfg, cur.Version, want.Version)
			}
		}
		return true, ""
	}
	poll.Until(t, fmt.Sprintf("converged within %s after the faults healed", convergeBound), time.Until(healed.Add(convergeBound)), check)
	return time.Since(healed)
}

// check stops the watchers and checks the recorded history: every
// instance's versions only move forward, every applied content hashes to
// its checksum, every (config, version) maps to one checksum across the
// run and to the one stored (version looks it up; an error means it is no
// longer stored). It returns the (config, version) pairs applied and the
// failures.
func (f *fleet) check(t *testing.T, version func(cuecast.ConfigPath, uint64) (cuecast.Version, error)) (pairs, failures int) {
	t.Helper()
	for _, in := range f.ins {
		in.w.Stop()
	}
	f.recorders.Wait()
	type key struct {
		cfg cuecast.ConfigPath
		n   uint64
	}
	seen := map[key]string{} // ▶ checksum
	for _, in := range f.ins {
		var last uint64
		for i, a := range f.hist.per[in.id] {
			if !a.ok {
				t.Errorf("%s: update %d (v%d) content does not hash to its checksum", in.id, i, a.version)
				failures++
			}
			if a.version < last {
				t.Errorf("%s: went back from v%d to v%d", in.id, last, a.version)
				failures++
			}
			last = a.version
			k := key{in.cfg, a.version}
			if prev, ok := seen[k]; ok && prev != a.checksum {
				t.Errorf("%s@%d means two contents: %s and %s", k.cfg, k.n, prev, a.checksum)
				failures++
			}
			seen[k] = a.checksum
		}
	}
	for k, sum := range seen {
		v, err := version(k.cfg, k.n)
		if err == nil && v.Checksum != sum {
			t.Errorf("%s@%d applied with %s, the stream holds %s", k.cfg, k.n, sum, v.Checksum)
			failures++
		}
	}
	return len(seen), failures
}

// faults counts what a run injected.
type faults struct {
	commits, cuts, oneWay, resets, torn, delays, restarts, partitions, natsKills, kills int
}

func (c faults) String() string {
	var parts []string
	for _, f := range []struct {
		n    int
		what string
	}{
		{c.commits, "commits"}, {c.cuts, "link cuts"}, {c.oneWay, "one-way partitions"}, {c.resets, "connection resets"}, {c.torn, "links armed to reset mid-message"}, {c.delays, "delayed links"},
		{c.restarts, "serve restarts"}, {c.partitions, "serve↔NATS partitions"}, {c.natsKills, "kill -9 of NATS"}, {c.kills, "kill -9 of serve"},
	} {
		if f.n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", f.n, f.what))
		}
	}
	return strings.Join(parts, ", ")
}

// commits changes configs of repo, remembering each one's last commit.
type commits struct {
	repo interface {
		CommitFiles(string, map[string]string) string
	}
	values map[cuecast.ConfigPath]int
	last   map[cuecast.ConfigPath]string
	// pad, when set, is added to each config changed: a version too large
	// to fit in the last page of a full file system.
	pad string
}

func (c *commits) change(cfg cuecast.ConfigPath) {
	c.values[cfg]++
	content := fmt.Sprintf("package %s\n\nvalue: %d\n", cfg.Name(), c.values[cfg])
	if c.pad != "" {
		content += fmt.Sprintf("pad: %q\n", c.pad)
	}
	c.last[cfg] = c.repo.CommitFiles(fmt.Sprintf("%s: value %d", cfg, c.values[cfg]), map[string]string{
		string(cfg) + "/c.cue": content,
	})
}

// netFault injects one network fault on the instances' links and on the
// connections of serves to NATS (serveLinks: none for the embedded
// server, one per replica otherwise); it returns once the fault has healed.
func netFault(rng *rand.Rand, f *fleet, serveLinks []*natstest.Link, n *faults) {
	var serveLink *natstest.Link // the serve a fault may hit
	if len(serveLinks) > 0 {
		serveLink = serveLinks[rng.IntN(len(serveLinks))]
	}
	some := func(p int) []*natstest.Link {
		var ls []*natstest.Link
		for _, in := range f.ins {
			if rng.IntN(p) == 0 {
				ls = append(ls, in.link)
			}
		}
		return ls
	}
	pause := func(upTo int) { time.Sleep(time.Duration(20+rng.IntN(upTo)) * time.Millisecond) }
	switch k := rng.IntN(9); {
	case k < 1: // a one-way partition: one direction's data held, then delivered
		ls := some(3)
		if serveLink != nil && rng.IntN(2) == 0 {
			ls = append(ls, serveLink)
		}
		up := rng.IntN(2) == 0
		for _, l := range ls {
			l.Stall(up, !up)
		}
		n.oneWay += len(ls)
		pause(1500)
		for _, l := range ls {
			l.Unstall()
		}
	case k < 5: // a partition between some instances and NATS
		cut := some(3)
		for _, l := range cut {
			l.Cut()
		}
		n.cuts += len(cut)
		pause(300)
		for _, l := range cut {
			l.Heal()
		}
	case k < 6: // connections reset mid-stream; redials succeed at once
		ls := some(2)
		if serveLink != nil && rng.IntN(2) == 0 {
			ls = append(ls, serveLink)
		}
		if rng.IntN(2) == 0 {
			for _, l := range ls {
				n.resets += l.Reset()
				pause(30)
			}
			return
		}
		// Torn inside a message: after a random number of bytes.
		for _, l := range ls {
			l.ResetAfter(rng.IntN(2048))
		}
		n.torn += len(ls)
		pause(300)
		for _, l := range ls {
			l.ResetAfter(-1)
		}
	case k < 8: // latency and jitter, each direction its own
		ls := some(3)
		if serveLink != nil && rng.IntN(2) == 0 {
			ls = append(ls, serveLink)
		}
		for _, l := range ls {
			l.Delay(time.Duration(rng.IntN(80))*time.Millisecond, time.Duration(rng.IntN(80))*time.Millisecond,
				time.Duration(1+rng.IntN(40))*time.Millisecond)
		}
		n.delays += len(ls)
		pause(400)
		for _, l := range ls {
			l.Delay(0, 0, 0)
		}
	default: // serve cut off from NATS, sometimes past its lease (1 s)
		if serveLink == nil {
			pause(100)
			return
		}
		serveLink.Cut()
		n.partitions++
		pause(1500)
		serveLink.Heal()
	}
}

// TestSoakFaults is a fault-injection run in the spirit of etcd's robustness
// tests: serve, NATS and a fleet of instances each behind its own TCP link
// (natstest.Link), commits at random times while links are cut, stalled one
// way, reset and delayed and serve is restarted (its parts stopped and a new
// start over the same data directory). "embedded" runs serve's own NATS
// server, which it reaches in-process; "external" runs serve against a
// separate server through a Link too, so serve itself is partitioned from
// NATS; "replicated" runs two serves sharing the lease against that server,
// each through its own Link, each restarted and partitioned on its own. The
// recorded history is checked afterwards (fleet.check) and once the faults
// heal every instance must converge within convergeBound. Short in `make
// test`; with CUECAST_SOAK=1 (`make soak`) it runs many more rounds.
// TestKillServe does the same to serve and NATS processes killed with
// SIGKILL.
func TestSoakFaults(t *testing.T) {
	t.Parallel()
	for _, mode := range []struct {
		name   string
		serves int // 0: embedded NATS
	}{{"embedded", 0}, {"external", 1}, {"replicated", 2}} {
		t.Run(mode.name, func(t *testing.T) { soakFaults(t, mode.serves) })
	}
}

func soakFaults(t *testing.T, replicas int) {
	rounds, stopAt := soakLength(t, 8, 300)
	rng := soakRand(t, 1, fmt.Sprintf("%d rounds", rounds))

	ctx := context.Background()
	repo, cfgs := smallRepo(t)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	signing, _ := kp.Seed() // replicas sign with one key, so clients trust either
	pub, _ := kp.PublicKey()
	serveLog := failureLog(t)
	var natsAddr string // where instances connect
	var serveLinks []*natstest.Link
	var cfgOf []pipeline.Config
	if replicas > 0 {
		srv := natstest.Start(t)
		natsAddr = strings.TrimPrefix(srv.ClientURL(), "nats://")
	} else {
		natsAddr = natstest.FreeAddr(t)
	}
	for i := range max(replicas, 1) {
		data := t.TempDir()
		if err := os.WriteFile(filepath.Join(data, "signing.nk"), signing, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Interval: 20 * time.Millisecond, Logger: serveLog}
		if replicas > 0 {
			l := natstest.StartLink(t, natsAddr)
			serveLinks = append(serveLinks, l)
			cfg.External = pipeline.External{NATS: "nats://" + l.Addr(), LeaseTTL: time.Second, ReplicaID: fmt.Sprintf("serve-%d", i)}
		} else {
			cfg.Listen = natsAddr
		}
		cfgOf = append(cfgOf, cfg)
	}

	var n faults
	type serve struct {
		p    *pipeline.Pipeline
		stop func()
	}
	startServe := func(cfg pipeline.Config) serve {
		t.Helper()
		pctx, cancel := context.WithCancel(ctx)
		var p *pipeline.Pipeline
		var err error
		// The port of the previous serve may take a moment to be free.
		for deadline := time.Now().Add(10 * time.Second); ; {
			p, err = pipeline.Start(pctx, cfg)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			cancel()
			t.Fatalf("start serve: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(pctx) }()
		return serve{p: p, stop: func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve run: %v", err)
			}
			p.Close()
		}}
	}
	serves := make([]serve, len(cfgOf))
	for i, cfg := range cfgOf {
		serves[i] = startServe(cfg)
	}
	defer func() {
		for _, s := range serves {
			s.stop()
		}
	}()

	f := startFleet(t, natsAddr, pub, cfgs, 8)
	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	for r := 0; r < rounds; r++ {
		if time.Now().After(stopAt) {
			rounds = r
			break
		}
		if rng.IntN(2) == 0 {
			c.change(cfgs[rng.IntN(len(cfgs))])
			n.commits++
		}
		if rng.IntN(10) == 0 { // a serve stops and starts again
			i := rng.IntN(len(serves))
			serves[i].stop()
			serves[i] = startServe(cfgOf[i])
			n.restarts++
			continue
		}
		netFault(rng, f, serveLinks, &n)
	}

	// Quiescence: everything healed; every instance must reach its config's
	// newest version. With replicas, the one holding the lease got there.
	healed := time.Now()
	head := repo.Head()
	// Where everything is when no tailer has reached the head for most of
	// the wait: printed with the failure, for a hang the serves' logs
	// cannot show.
	var dumped sync.WaitGroup
	dumped.Add(1)
	dump := time.AfterFunc(poll.Patience*3/4, func() {
		defer dumped.Done()
		var b bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Logf("no tailer at the head after %s; goroutines:\n%s", poll.Patience*3/4, b.String())
	})
	defer func() {
		if !dump.Stop() {
			dumped.Wait()
		}
	}()
	var s serve
	poll.Until(t, "a tailer at the head", poll.Patience, func() (bool, string) {
		var states []string
		for _, r := range serves {
			st, err := r.p.Tailer.State(ctx)
			if err == nil && st.Cursor == head && len(st.Undeployed) == 0 {
				s = r
				return true, ""
			}
			states = append(states, fmt.Sprint(st.Cursor, err))
		}
		return false, strings.Join(states, "; ")
	})
	latest := map[cuecast.ConfigPath]cuecast.Version{}
	for _, cf := range cfgs {
		v, err := s.p.Distributor.Latest(ctx, cf)
		if err != nil {
			t.Fatal(err)
		}
		latest[cf] = v
	}
	took := f.converge(t, healed, latest)
	pairs, failures := f.check(t, func(cf cuecast.ConfigPath, v uint64) (cuecast.Version, error) {
		ver, _, err := s.p.Distributor.Version(ctx, cf, v)
		return ver, err
	})
	t.Logf("%d rounds: %s; %d (config, version) pairs applied; converged %s after healing; %d failures",
		rounds, n, pairs, took.Round(time.Millisecond), failures)
}
