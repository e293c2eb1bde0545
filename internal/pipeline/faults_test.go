package pipeline_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
)

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

// TestSoakFaults is a small fault-injection run in the spirit of etcd's
// robustness tests: serve with an embedded NATS server, a fleet of
// instances each behind its own TCP link (natstest.Link), commits at random
// times while links are cut and healed and serve is restarted (kill of the
// process' parts and a new start over the same data directory and port).
// The recorded history is checked afterwards: every instance's applied
// versions only move forward, every applied content hashes to its checksum
// (the client verified its signature: it trusts only serve's key), every
// (config, version) maps to one checksum across the run and matches what the
// stream holds, and once the faults heal every instance converges on its
// config's latest version within a bound. Short in `make test`; with
// CUECAST_SOAK=1 (`make soak`) it runs many more rounds.
func TestSoakFaults(t *testing.T) {
	rounds := 12
	if os.Getenv("CUECAST_SOAK") != "" {
		rounds = 300
	}
	const converge = 30 * time.Second
	seed := rand.Uint64()
	rng := rand.New(rand.NewPCG(seed, 1))
	t.Logf("seed %d, %d rounds", seed, rounds)

	ctx := context.Background()
	repo, cfgs := smallRepo(t)
	data := t.TempDir()
	addr := func() string {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		return ln.Addr().String()
	}()
	type serve struct {
		p    *pipeline.Pipeline
		stop func()
	}
	startServe := func() serve {
		t.Helper()
		pctx, cancel := context.WithCancel(ctx)
		var p *pipeline.Pipeline
		var err error
		// The port of the previous serve may take a moment to be free.
		for deadline := time.Now().Add(10 * time.Second); ; {
			p, err = pipeline.Start(pctx, pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: addr, Interval: 20 * time.Millisecond})
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
	s := startServe()
	defer func() { s.stop() }()
	pub := s.p.PublicKey

	hist := &history{per: map[string][]applied{}}
	type instance struct {
		id   string
		cfg  cuecast.ConfigPath
		link *natstest.Link
		w    *client.Watcher
	}
	var fleet []*instance
	var recorders sync.WaitGroup
	for i := range 8 {
		in := &instance{id: fmt.Sprintf("i%d", i), cfg: cfgs[i%len(cfgs)], link: natstest.StartLink(t, addr)}
		nc, err := nats.Connect("nats://"+in.link.Addr(), append(client.ConnectOptions(), nats.ReconnectWait(50*time.Millisecond),
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
		recorders.Add(1)
		go func() {
			defer recorders.Done()
			for u := range in.w.Updates() {
				hist.add(in.id, applied{version: u.Version, checksum: u.Checksum, ok: u.Deleted || cuecast.Checksum(u.Content) == u.Checksum})
			}
		}()
		fleet = append(fleet, in)
	}

	var cuts, restarts, commits int
	values := map[cuecast.ConfigPath]int{}
	for range rounds {
		if rng.IntN(2) == 0 {
			c := cfgs[rng.IntN(len(cfgs))]
			values[c]++
			repo.CommitFiles(fmt.Sprintf("%s: value %d", c, values[c]), map[string]string{
				string(c) + "/c.cue": fmt.Sprintf("package %s\n\nvalue: %d\n", c.Name(), values[c]),
			})
			commits++
		}
		switch f := rng.IntN(10); {
		case f < 6: // a partition between some instances and NATS
			var cut []*instance
			for _, in := range fleet {
				if rng.IntN(3) == 0 {
					in.link.Cut()
					cut = append(cut, in)
				}
			}
			cuts += len(cut)
			time.Sleep(time.Duration(20+rng.IntN(300)) * time.Millisecond)
			for _, in := range cut {
				in.link.Heal()
			}
		case f < 7: // serve stops and starts again
			s.stop()
			s = startServe()
			restarts++
		default:
			time.Sleep(time.Duration(rng.IntN(100)) * time.Millisecond)
		}
	}

	// Quiescence: everything healed; every instance must reach its config's
	// newest version.
	began := time.Now()
	head := repo.Head()
	eventually(t, "the tailer at the head", func() (bool, string) {
		st, err := s.p.Tailer.State(ctx)
		return err == nil && st.Cursor == head && len(st.Undeployed) == 0, fmt.Sprint(st.Cursor, err)
	})
	latest := map[cuecast.ConfigPath]cuecast.Version{}
	for _, c := range cfgs {
		v, err := s.p.Distributor.Latest(ctx, c)
		if err != nil {
			t.Fatal(err)
		}
		latest[c] = v
	}
	poll := func() (bool, string) {
		for _, in := range fleet {
			cur := in.w.Current()
			if want := latest[in.cfg]; cur.Version != want.Version || cur.Checksum != want.Checksum {
				return false, fmt.Sprintf("%s on %s v%d, want v%d", in.id, in.cfg, cur.Version, want.Version)
			}
		}
		return true, ""
	}
	for deadline := time.Now().Add(converge); ; time.Sleep(20 * time.Millisecond) {
		ok, state := poll()
		if ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not converged %s after the faults healed: %s", converge, state)
		}
	}
	took := time.Since(began)
	for _, in := range fleet {
		in.w.Stop()
	}
	recorders.Wait()

	// The history.
	seen := map[string]string{} // config@version ▶ checksum
	failures := 0
	for _, in := range fleet {
		var last uint64
		for i, a := range hist.per[in.id] {
			if !a.ok {
				t.Errorf("%s: update %d (v%d) content does not hash to its checksum", in.id, i, a.version)
				failures++
			}
			if a.version < last {
				t.Errorf("%s: went back from v%d to v%d", in.id, last, a.version)
				failures++
			}
			last = a.version
			k := fmt.Sprintf("%s@%d", in.cfg, a.version)
			if prev, ok := seen[k]; ok && prev != a.checksum {
				t.Errorf("%s means two contents: %s and %s", k, prev, a.checksum)
				failures++
			}
			seen[k] = a.checksum
		}
	}
	for k, sum := range seen {
		var cfg string
		var n uint64
		for i := len(k) - 1; i >= 0; i-- {
			if k[i] == '@' {
				cfg = k[:i]
				fmt.Sscan(k[i+1:], &n)
				break
			}
		}
		v, _, err := s.p.Distributor.Version(ctx, cuecast.ConfigPath(cfg), n)
		if err == nil && v.Checksum != sum {
			t.Errorf("%s applied with %s, the stream holds %s", k, sum, v.Checksum)
			failures++
		}
	}
	t.Logf("%d rounds: %d commits, %d link cuts, %d serve restarts; %d (config, version) pairs applied; converged %s after healing; %d failures",
		rounds, commits, cuts, restarts, len(seen), took.Round(time.Millisecond), failures)
}
