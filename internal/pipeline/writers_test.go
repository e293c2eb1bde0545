package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/tailer"
)

// firstParents numbers the first-parent history of repo's main from its
// root (0) to its tip: the order in which versions must follow each other.
func firstParents(t *testing.T, repo *gittest.Repo) map[string]int {
	t.Helper()
	c, err := repo.Git.CommitObject(plumbing.NewHash(repo.Head()))
	if err != nil {
		t.Fatal(err)
	}
	var chain []string
	for {
		chain = append(chain, c.Hash.String())
		if c.NumParents() == 0 {
			break
		}
		if c, err = c.Parent(0); err != nil {
			t.Fatal(err)
		}
	}
	order := make(map[string]int, len(chain))
	for i, h := range chain {
		order[h] = len(chain) - 1 - i
	}
	return order
}

// checkMonotonic is the two-writer oracle: each config's versions, oldest
// first, are made by commits strictly increasing in first-parent order, so
// no version's content is older than its predecessor's. It returns the
// number of violations, each reported.
func checkMonotonic(t *testing.T, d *distributor.Distributor, cfgs []cuecast.ConfigPath, order map[string]int) int {
	t.Helper()
	bad := 0
	for _, cf := range cfgs {
		vs, err := d.Versions(context.Background(), cf)
		if err != nil {
			t.Errorf("versions of %s: %v", cf, err)
			bad++
			continue
		}
		for i := len(vs) - 1; i > 0; i-- { // newest first: vs[i] precedes vs[i-1]
			prev, next := vs[i], vs[i-1]
			p, pok := order[prev.Commit]
			n, nok := order[next.Commit]
			if !pok || !nok || n <= p {
				t.Errorf("%s: v%d is commit #%d (%s) after v%d of commit #%d (%s): want a later commit",
					cf, next.Version, n, short(next.Commit), prev.Version, p, short(prev.Commit))
				bad++
			}
		}
	}
	return bad
}

// TestTwoServesOneStream: issue 32, defect 1. An embedded serve and a
// second serve with --nats pointed at it follow one repository while
// commits arrive faster than either compiles; each config's versions must
// come from strictly later commits, whoever wrote them.
func TestTwoServesOneStream(t *testing.T) {
	t.Parallel()
	repo, cfgs := smallRepo(t)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(cfg pipeline.Config) *pipeline.Pipeline {
		t.Helper()
		cfg.Repo, cfg.Branch, cfg.DataDir, cfg.Interval = repo.Dir, "main", t.TempDir(), 5*time.Millisecond
		if err := os.WriteFile(filepath.Join(cfg.DataDir, "signing.nk"), seed, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.Start(ctx, cfg)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
			p.Close()
		})
		return p
	}
	embedded := start(pipeline.Config{Listen: "127.0.0.1:0"})
	start(pipeline.Config{External: pipeline.External{NATS: embedded.ClientURL(), LeaseTTL: 2 * time.Second}})

	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	// Runs of changes to one config, about a compile apart: a tailer whose
	// poll began before a commit landed finds that config's latest made
	// by a commit it has not seen, when the other's poll began after.
	for i := range 100 {
		c.change(cfgs[i/25%2])
		time.Sleep(time.Duration(i*37%100) * time.Millisecond)
	}
	head := repo.Head()
	d := embedded.Distributor
	poll.Until(t, "the branch processed", poll.Patience, func() (bool, string) {
		st, err := embedded.Tailer.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Cursor == head, "cursor at " + short(st.Cursor)
	})
	for _, cf := range cfgs[:2] {
		if v, err := d.Latest(ctx, cf); err != nil || v.Commit != c.last[cf] {
			t.Errorf("%s: latest v%d of commit %s (%v), want the last change %s", cf, v.Version, short(v.Commit), err, short(c.last[cf]))
		}
	}
	checkMonotonic(t, d, cfgs, firstParents(t, repo))
}

// TestSoakWriters: issue 32, defect 1, with real processes. Three serves
// follow one repository on one stream: an embedded one, whose server is
// the stream's, and two with --nats to it, started in a random order, each
// killed with SIGKILL at random points (the embedded one takes the stream
// down with it) and started again, or frozen (SIGSTOP) past its lease and
// thawed, while commits land in bursts on one config at a time, between
// faults and while a serve is dead or frozen. Then, per
// config: the versions' commits strictly increase in first-parent order
// (no version older than its predecessor), and they are exactly the
// config's changing commits, each once. A few rounds in go test;
// CUECAST_SOAK=1 runs 60.
func TestSoakWriters(t *testing.T) {
	t.Parallel()
	rounds, stopAt := soakLength(t, 6, 60)
	seed := soakSeed(t)
	rng := rand.New(rand.NewPCG(seed, 32))
	repo, cfgs := smallRepo(t)
	addr := natstest.FreeAddr(t)
	dirs := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	sharedKey(t, dirs...)
	var all []*serveProc // every serve started, for the count of refusals
	start := func(i int) *serveProc {
		var sp *serveProc
		if i == 0 {
			sp = startServeProc(t, repo.Dir, dirs[0], addr, "")
		} else {
			sp = startServeProc(t, repo.Dir, dirs[i], "", "nats://"+addr, fmt.Sprintf("%s=replica-%d", envServeID, i))
		}
		all = append(all, sp)
		return sp
	}
	procs := make([]*serveProc, len(dirs))
	startOrder := rng.Perm(len(procs))
	for _, i := range startOrder {
		procs[i] = start(i)
	}

	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	changes := map[cuecast.ConfigPath][]string{}
	burst := func() {
		cf := cfgs[rng.IntN(2)]
		for range 1 + rng.IntN(6) {
			c.change(cf)
			changes[cf] = append(changes[cf], c.last[cf])
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
	}
	kills, pauses := 0, 0
	for r := 0; r < rounds && time.Now().Before(stopAt); r++ {
		switch rng.IntN(4) {
		case 3:
			// Frozen past its lease (1 s), as a long pause freezes a
			// process: the others take over and move on; when it thaws it
			// still believes it holds the lease until its timers fire.
			// Mid-burst, so that it is likely frozen mid-publish.
			i := rng.IntN(len(procs))
			burst()
			time.Sleep(time.Duration(rng.IntN(40)) * time.Millisecond)
			if err := procs[i].cmd.Process.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			pauses++
			burst()
			time.Sleep(time.Duration(1000+rng.IntN(1000)) * time.Millisecond)
			burst()
			if err := procs[i].cmd.Process.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
		case 0:
			burst()
		case 1:
			i := rng.IntN(len(procs))
			procs[i].kill(t)
			kills++
			if rng.IntN(2) == 0 {
				burst()
			}
			procs[i] = start(i)
			time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
		default:
			burst()
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
		}
	}
	for _, sp := range procs {
		sp.waitReady(t)
	}
	t.Cleanup(func() {
		for _, sp := range procs {
			sp.stdin.Close() // a clean stop
		}
		for i, sp := range procs {
			select {
			case err := <-sp.exited:
				if err != nil {
					t.Errorf("serve %d: %v\n%s", i, err, sp.stderr.String())
				}
			case <-time.After(convergeBound):
				t.Errorf("serve %d did not stop %s after its stdin closed\n%s", i, convergeBound, sp.stderr.String())
			}
		}
	})

	nc, d := readStreams(t, addr)
	waitCursor(t, nc, repo.Head())
	bad := checkChanges(t, d, cfgs, firstParents(t, repo), changes)
	fenced := 0
	for _, sp := range all {
		fenced += strings.Count(sp.stderr.String(), "writer fence lost")
	}
	t.Logf("seed %d: started in order %v, %d rounds, %d kills, %d pauses, %d commits, %d stale publishes refused by the fence; %d failures",
		seed, startOrder, rounds, kills, pauses, len(changes[cfgs[0]])+len(changes[cfgs[1]]), fenced, bad)
}

// readStreams connects to the NATS server at addr, reconnecting as long as
// the test runs, and opens serve's streams read-only: nothing of the
// test's may mend the store it checks.
func readStreams(t *testing.T, addr string) (*nats.Conn, *distributor.Distributor) {
	t.Helper()
	nc, err := nats.Connect("nats://"+addr, client.ConnectOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	d, err := distributor.Open(t.Context(), nc, distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return nc, d
}

// readerBack waits until nc, a readStreams connection, is connected again
// after the server it reads (serve's embedded one) was restarted. Its
// options are the library's (client.ConnectOptions), which wait up to 30 s
// between attempts, growing with each failed one, so after serve was down
// a while the next attempt may be many seconds away and a single read
// times out; the reader asks for an attempt now, as an operator would by
// retrying, and the read that follows finds it connected.
func readerBack(t *testing.T, nc *nats.Conn) {
	t.Helper()
	if !nc.IsConnected() {
		if err := nc.ForceReconnect(); err != nil {
			t.Fatal(err)
		}
	}
	poll.Until(t, "the reader connected again", poll.Patience, func() (bool, string) {
		return nc.IsConnected(), nc.Status().String()
	})
}

// waitCursor waits until the tailer's cursor in the stream, whichever
// serve wrote it, is head.
func waitCursor(t *testing.T, nc *nats.Conn, head string) {
	t.Helper()
	poll.Until(t, "the branch processed", poll.Patience, func() (bool, string) {
		st, err := tailer.LoadState(t.Context(), distributor.NewDirectStream(nc, tailer.StateStream), "default")
		if err != nil {
			return false, err.Error()
		}
		return st.Cursor == head, "cursor at " + short(st.Cursor)
	})
}

// checkChanges is the oracle of a run of several writers: per config, the
// versions' commits strictly increase in first-parent order
// (checkMonotonic), and they are exactly the branch's root and then the
// config's changing commits (changes, in order), each once: none lost,
// none published twice. It returns the number of failures, each reported.
func checkChanges(t *testing.T, d *distributor.Distributor, cfgs []cuecast.ConfigPath, order map[string]int, changes map[cuecast.ConfigPath][]string) int {
	t.Helper()
	bad := checkMonotonic(t, d, cfgs, order)
	var root string
	for sha, i := range order {
		if i == 0 {
			root = sha
		}
	}
	for _, cf := range cfgs {
		vs, err := d.Versions(t.Context(), cf)
		if err != nil {
			continue // reported by checkMonotonic
		}
		got := make([]string, len(vs))
		for i, v := range vs { // newest first
			got[len(vs)-1-i] = v.Commit
		}
		want := append([]string{root}, changes[cf]...)
		if len(want) > len(got) {
			want = want[len(want)-len(got):] // retention keeps the newest
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: retained versions from %d commits %v, want its last %d changes %v", cf, len(got), shorts(got), len(want), shorts(want))
			bad++
		}
	}
	return bad
}

func shorts(shas []string) []string {
	out := make([]string, len(shas))
	for i, s := range shas {
		out[i] = short(s)
	}
	return out
}

// TestFencedServeCampaignsAgain: a serve whose writer fence is claimed by a
// later term while it still holds the lease (as after a pause the lease
// outlived) has its next version refused by the store; it stops tailing,
// gives up its term and campaigns again, and its next term claims the
// fence anew, re-reads the state and publishes the change.
func TestFencedServeCampaignsAgain(t *testing.T) {
	t.Parallel()
	repo, cfgs := smallRepo(t)
	p, _ := pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, Interval: 10 * time.Millisecond})
	ctx := t.Context()
	nc, err := nats.Connect(p.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	readFence := func() distributor.Fence {
		t.Helper()
		m, err := distributor.LeaderLastMsg(ctx, nc, cuecast.Stream, distributor.FenceSubject)
		if err != nil {
			t.Fatalf("read fence: %v", err)
		}
		var f distributor.Fence
		if err := json.Unmarshal(m.Data, &f); err != nil {
			t.Fatal(err)
		}
		return f
	}
	poll.Until(t, "v1 published", poll.Patience, func() (bool, string) {
		v, err := p.Distributor.Latest(ctx, cfgs[0])
		return err == nil && v.Version == 1, fmt.Sprintf("v%d (%v)", v.Version, err)
	})
	holder, rev, err := p.Lease.Holder(ctx)
	if err != nil || holder == "" {
		t.Fatalf("lease holder %q (%v)", holder, err)
	}
	own := readFence()
	if own.Holder != holder {
		t.Fatalf("fence held by %q, want the lease holder %q", own.Holder, holder)
	}
	thief, err := distributor.New(ctx, nc, distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := thief.ClaimFence(ctx, rev, "later-term"); err != nil {
		t.Fatalf("claim: %v", err)
	}

	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	c.change(cfgs[0])
	poll.Until(t, "the change published by the serve's next term", poll.Patience, func() (bool, string) {
		v, err := p.Distributor.Latest(ctx, cfgs[0])
		if err != nil || v.Version != 2 || v.Commit != c.last[cfgs[0]] {
			return false, fmt.Sprintf("v%d of %s (%v)", v.Version, short(v.Commit), err)
		}
		return true, ""
	})
	if f := readFence(); f.Holder != holder || f.Epoch <= rev {
		t.Errorf("fence %+v, want %s's new term, above %d", f, holder, rev)
	}
}
