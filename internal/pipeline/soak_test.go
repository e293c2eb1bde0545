package pipeline

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/soak"
)

// switching is the Deployer of whichever controller runs now.
type switching struct {
	mu sync.Mutex
	c  *rollout.Controller
}

func (s *switching) Deploy(ctx context.Context, v cuecast.Version) error {
	s.mu.Lock()
	c := s.c
	s.mu.Unlock()
	return c.Deploy(ctx, v)
}

// TestSoakNoLostDeploy: issue 15, item 2, randomized. Commits to two
// configs at random moments (bursts, and pauses around a rollout's hold and
// completion), the tailer polling at random intervals through a store whose
// Latest lags each publish once (a replica's direct get), and rollout
// controllers replaced at random moments, the old one still running a
// moment after the new one started (a lease changing hands). Then the
// commits stop and the last controller is left alone: every config's
// rollout must complete on its newest version, every bucket pointing at it.
// A few seconds normally; CUECAST_SOAK=1 runs it for a minute.
func TestSoakNoLostDeploy(t *testing.T) {
	t.Parallel()
	dur := soak.Length(3*time.Second, time.Minute)
	intn := soak.Intn(t)

	ctx := t.Context()
	srv := natstest.Start(t)
	nc := srv.Connect(t)
	d, err := distributor.New(ctx, nc, distributor.Options{Heartbeat: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, nc)
	hold := cuecast.Duration(time.Duration(20+intn(60)) * time.Millisecond)
	pol := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, Hold: hold}, {Name: "all", Percent: 100, Hold: hold},
	}}}
	start := func() (*rollout.Controller, func()) {
		c, err := rollout.New(ctx, nc, d, pol, rollout.Options{
			Interval: time.Duration(5+intn(40)) * time.Millisecond, Heartbeat: 100 * time.Millisecond, ApplyTimeout: 5 * time.Second,
		})
		if err != nil {
			t.Fatalf("rollout.New: %v", err)
		}
		rctx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- c.Run(rctx) }()
		return c, func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("controller Run: %v", err)
			}
		}
	}
	sw := &switching{}
	var stop func()
	sw.c, stop = start()

	tl, repo := laggingTailer(t, js, d, sw)

	edits := []struct {
		file string
		re   *regexp.Regexp
		line func(n int) string
	}{
		{"payments/checkout/checkout.cue", regexp.MustCompile(`max_amount_minor: [0-9_]+`), func(n int) string { return fmt.Sprintf("max_amount_minor: %d", 1_000_000+n) }},
		{"search/ranking/ranking.cue", regexp.MustCompile(`boost_recent_days: [0-9]+`), func(n int) string { return fmt.Sprintf("boost_recent_days: %d", 1+n%60) }},
	}
	var repoMu sync.Mutex // the tailer reads the repository the committer writes
	var wg sync.WaitGroup
	deadline := time.Now().Add(dur)
	commits := 0
	wg.Go(func() { // the committer
		for n := 1; time.Now().Before(deadline); n++ {
			soak.Pause(intn, 20*time.Millisecond, time.Duration(hold))
			e := edits[intn(len(edits))]
			path := filepath.Join(repo.Dir, e.file)
			b, err := os.ReadFile(path)
			if err != nil {
				t.Errorf("read %s: %v", e.file, err)
				return
			}
			repoMu.Lock()
			repo.Write(map[string]string{e.file: e.re.ReplaceAllString(string(b), e.line(n))})
			repo.Commit(fmt.Sprintf("change %d", n))
			repoMu.Unlock()
			commits++
		}
	})
	wg.Go(func() { // the controllers, replaced
		for time.Now().Before(deadline) {
			time.Sleep(time.Duration(100+intn(400)) * time.Millisecond)
			next, nextStop := start()
			sw.mu.Lock()
			sw.c = next
			sw.mu.Unlock()
			time.Sleep(time.Duration(intn(20)) * time.Millisecond)
			stop()
			stop = nextStop
		}
	})
	pollOnce := func() {
		repoMu.Lock()
		defer repoMu.Unlock()
		if _, err := tl.Poll(ctx); err != nil && ctx.Err() == nil {
			t.Logf("poll: %v (the next poll retries)", err)
		}
	}
	wg.Go(func() { // the tailer, polling at random intervals
		for time.Now().Before(deadline) {
			time.Sleep(time.Duration(intn(60)) * time.Millisecond)
			pollOnce()
		}
	})
	wg.Wait()
	defer stop()
	pollOnce() // quiescence: everything committed is published and handed over
	t.Logf("%d commits", commits)

	for _, cfg := range []cuecast.ConfigPath{"payments/checkout", "search/ranking"} {
		latest, err := d.Latest(ctx, cfg)
		if err != nil {
			t.Fatal(err)
		}
		poll.Until(t, fmt.Sprintf("%s complete on v%d everywhere", cfg, latest.Version), 15*time.Second, func() (bool, string) {
			sw.mu.Lock()
			c := sw.c
			sw.mu.Unlock()
			rec, err := c.Record(ctx, cfg)
			if err != nil {
				return false, err.Error()
			}
			r := rec.Current
			if r == nil || r.Version != latest.Version || r.State != rollout.StateComplete {
				if r == nil {
					return false, "no rollout"
				}
				return false, fmt.Sprintf("rollout of v%d %s note %q", r.Version, r.State, r.Note)
			}
			for _, b := range []int{0, 1, 37, 99} {
				p, err := d.Pointer(ctx, cfg, b)
				if err != nil && !errors.Is(err, cuecast.ErrNotFound) {
					return false, err.Error()
				}
				if p.Version != latest.Version {
					return false, fmt.Sprintf("bucket %d on v%d", b, p.Version)
				}
			}
			return true, ""
		})
	}
}
