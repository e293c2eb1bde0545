//go:build linux

package pipeline_test

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/diskfull"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestSoakCombinedFaults is issue 32's combined fault run, with real
// `cuecast serve` processes (the cuecast command line of this test binary,
// startCLI) on one stream: an embedded serve, its --data on a small tmpfs,
// and two `serve --nats` against its server, started in a random order (a
// --nats serve that finds no server yet exits and is started again, as by
// a supervisor), all with --lease-ttl 1s. Commits land in bursts; at
// random points a serve is killed with SIGKILL (the embedded one takes the
// stream's server with it) and started again, or frozen past its lease;
// once per iteration the disk under the store fills up (docs/OPERATIONS.md
// "A full disk", as TestFullDiskHeals runs it). While it is full the
// embedded serve's /readyz must answer 503 naming the store that failed a
// write, and /metrics show the failures (publishes counted, or the commits
// waiting behind a cursor or lease the store refused). Then the space is
// freed, and the embedded serve, if its store latched the failed write,
// exits saying to start it again, and is. After each iteration's faults,
// the next change of every config must reach every watcher of a fleet
// that watched throughout, and /readyz answer 200 on every serve. At the
// end, per config: the versions' commits strictly increase in
// first-parent order and are exactly its changing commits, each once
// (checkChanges), and every watcher's history only moved forward through
// stored content (fleet.check). One iteration with a few faults in go
// test; CUECAST_SOAK=1 runs 20.
func TestSoakCombinedFaults(t *testing.T) {
	t.Parallel() // processes and waits on them: it overlaps the other such test
	iterations, stopAt := soakLength(t, 1, 20)
	rounds := 2
	if os.Getenv("CUECAST_SOAK") != "" {
		rounds = 6
	}
	rng := soakRand(t, 320, fmt.Sprintf("%d iterations", iterations))
	store := diskfull.Mount(t, 24<<20)
	repo, cfgs := smallRepo(t)
	datas := []string{store, t.TempDir(), t.TempDir()}
	pub := sharedKey(t, datas...)
	natsAddr := natstest.FreeAddr(t)

	common := []string{"serve", "--repo", repo.Dir, "--interval", "50ms", "--lease-ttl", "1s"}
	slots := make([]*supervised, len(datas))
	for i, data := range datas {
		s := &supervised{http: natstest.FreeAddr(t)}
		s.args = append(append([]string{}, common...), "--data", data, "--http", s.http)
		if i == 0 {
			s.name = "embedded serve"
			s.args = append(s.args, "--listen", natsAddr)
			s.expected = func(stderr string) bool {
				return strings.Contains(stderr, "start serve again, which reopens the store")
			}
		} else {
			s.name = fmt.Sprintf("serve --nats #%d", i)
			s.args = append(s.args, "--nats", "nats://"+natsAddr)
			// Its NATS was not up while it started (not yet, not again,
			// or going down): it exits before it serves, and a
			// supervisor starts it again (docs/OPERATIONS.md, "Embedded
			// or cluster").
			s.expected = func(stderr string) bool {
				return !strings.Contains(stderr, serveReady) && strings.Contains(stderr, "cuecast: start pipeline: ")
			}
		}
		slots[i] = s
	}
	embedded := slots[0]
	startOrder := rng.Perm(len(slots))
	for _, i := range startOrder {
		slots[i].start(t)
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	}
	allReady := func(what string) {
		t.Helper()
		poll.Until(t, what, convergeBound, func() (bool, string) {
			var waiting []string
			for _, s := range slots {
				s.reap(t)
				if !s.ready() {
					waiting = append(waiting, s.name)
				}
			}
			return len(waiting) == 0, "waiting for " + strings.Join(waiting, ", ")
		})
	}
	allReady("every serve started")
	defer func() {
		for _, s := range slices.Backward(slots) { // the embedded serve, the --nats serves' server, last
			s.stop(t)
		}
	}()

	f := startFleet(t, natsAddr, pub, cfgs, len(cfgs))
	nc, d := readStreams(t, natsAddr)
	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	changes := map[cuecast.ConfigPath][]string{}
	change := func(cf cuecast.ConfigPath) {
		c.change(cf)
		changes[cf] = append(changes[cf], c.last[cf])
	}
	burst := func() {
		cf := cfgs[rng.IntN(len(cfgs))]
		for range 1 + rng.IntN(4) {
			change(cf)
			time.Sleep(time.Duration(rng.IntN(60)) * time.Millisecond)
		}
	}
	var kills, pauses, fills, reopened int
	fullDisk := func() {
		t.Helper()
		allReady("every serve running before the disk fills")
		fills++
		filler := diskfull.Fill(t, store)
		c.pad = strings.Repeat("x", 30<<10)
		for _, cf := range cfgs[:2] {
			change(cf)
		}
		// While writes fail, /readyz and /metrics say so: the embedded
		// serve is not ready, naming the store that failed a write, and
		// the metrics show what failed: a publish of a version or of its
		// pointers, counted; or, where the store refused the tailer's
		// cursor or the lease instead (the versions stored), the commits
		// waiting, in cuecast_tailer_lag_commits. Commits go on meanwhile,
		// one a second, as they would, so that some serve tries to
		// process one after the store failed.
		var extra time.Time
		poll.Until(t, "/readyz 503 naming the store that failed a write (or JetStream not answering), and the failures in /metrics", poll.Patience, func() (bool, string) {
			embedded.reap(t)
			code, body := get(t, "http://"+embedded.http+"/readyz")
			// The store's own fault, or JetStream not answering: seen
			// once, the server stuck for minutes writing the full disk
			// right after recovering from a kill -9.
			failed := code == http.StatusServiceUnavailable && (strings.Contains(body, "failed a write") ||
				strings.Contains(body, "disabled JetStream") || strings.Contains(body, "JetStream: "))
			var counted, lag float64
			var states []string
			for _, s := range slots {
				n, err := readMetric(t, "http://"+s.http, "cuecast_version_publish_errors_total")
				l, lerr := readMetric(t, "http://"+s.http, "cuecast_tailer_lag_commits")
				counted += n
				lag = max(lag, l)
				states = append(states, fmt.Sprintf("%s: %v publish errors (%v), lag %v (%v)", s.name, n, err, l, lerr))
			}
			if failed && (counted > 0 || lag > 0) {
				return true, ""
			}
			if time.Since(extra) > time.Second {
				change(cfgs[rng.IntN(2)])
				extra = time.Now()
			}
			return false, fmt.Sprintf("/readyz %d %s; %s", code, body, strings.Join(states, "; "))
		})
		if rng.IntN(2) == 0 { // a --nats serve dies while the disk is full
			s := slots[1+rng.IntN(2)]
			s.kill(t)
			kills++
			s.start(t)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		c.pad = ""
		// A store that latched the failed write makes the embedded serve
		// exit, saying to start it again; one that did not publishes
		// again by itself.
		poll.Until(t, "the store writing again", poll.Patience, func() (bool, string) {
			n := len(embedded.exits)
			embedded.reap(t)
			if len(embedded.exits) > n {
				reopened++
				return true, ""
			}
			code, body := get(t, "http://"+embedded.http+"/readyz")
			return code == http.StatusOK, fmt.Sprint(code, " ", body)
		})
	}

	for it := 0; it < iterations && time.Now().Before(stopAt); it++ {
		diskAt := rng.IntN(rounds + 1)
		for r := 0; r <= rounds; r++ {
			for _, s := range slots {
				s.reap(t)
			}
			if r == diskAt {
				fullDisk()
				continue
			}
			switch rng.IntN(4) {
			case 0:
				burst()
			case 1, 2:
				s := slots[rng.IntN(len(slots))]
				s.kill(t)
				kills++
				if rng.IntN(2) == 0 {
					burst()
				}
				s.start(t)
				time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
			default:
				// Frozen past its lease, mid-burst, as a long pause
				// freezes a process (TestSoakWriters).
				s := slots[rng.IntN(len(slots))]
				burst()
				if s.exited {
					continue
				}
				if err := s.proc.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
					s.reap(t) // it exited by itself since the round began
					continue
				}
				pauses++
				burst()
				time.Sleep(time.Duration(1000+rng.IntN(500)) * time.Millisecond)
				if err := s.proc.cmd.Process.Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			}
		}

		// The faults stop: the next change of every config reaches every
		// watcher, and /readyz says ready.
		allReady("every serve running again")
		healed := time.Now()
		for _, cf := range cfgs {
			change(cf)
		}
		waitCursor(t, nc, repo.Head())
		latest := map[cuecast.ConfigPath]cuecast.Version{}
		for _, cf := range cfgs {
			v, err := d.Latest(t.Context(), cf)
			if err != nil {
				t.Fatalf("latest of %s: %v", cf, err)
			}
			if v.Commit != c.last[cf] {
				t.Fatalf("%s: latest v%d is commit %s, want the next change %s", cf, v.Version, short(v.Commit), short(c.last[cf]))
			}
			latest[cf] = v
		}
		f.converge(t, healed, latest)
		poll.Until(t, "/readyz 200 on every serve", poll.Patience, func() (bool, string) {
			for _, s := range slots {
				if code, body := get(t, "http://"+s.http+"/readyz"); code != http.StatusOK {
					return false, fmt.Sprint(s.name, ": ", code, " ", body)
				}
			}
			return true, ""
		})
	}

	bad := checkChanges(t, d, cfgs, firstParents(t, repo), changes)
	pairs, failures := f.check(t, func(cf cuecast.ConfigPath, v uint64) (cuecast.Version, error) {
		ver, _, err := d.Version(t.Context(), cf, v)
		return ver, err
	})
	n := 0
	for _, cs := range changes {
		n += len(cs)
	}
	var exits []string
	for _, s := range slots {
		for _, e := range s.exits {
			exits = append(exits, s.name+": "+e)
		}
	}
	t.Logf("started in order %v; %d kills, %d pauses, %d full disks (%d reopened by a start), %d commits; exits on their own: %q; %d (config, version) pairs applied; %d failures",
		startOrder, kills, pauses, fills, reopened, n, exits, pairs, bad+failures)
}
