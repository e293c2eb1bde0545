package pipeline

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/metrics"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/tailer"
)

// laggingStore answers the first Latest after each publish of a config
// with the version before it (or none), as a replica of an R3 stream that
// has not applied the publish yet answers a direct get.
type laggingStore struct {
	metrics.Store
	mu   sync.Mutex
	prev map[cuecast.ConfigPath]*cuecast.Version // nil entry: no earlier version
	lag  map[cuecast.ConfigPath]bool
}

func (s *laggingStore) Publish(ctx context.Context, v cuecast.Version, content []byte) error {
	before, err := s.Store.Latest(ctx, v.Config)
	if err := s.Store.Publish(ctx, v, content); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prev[v.Config] = nil
	if err == nil {
		s.prev[v.Config] = &before
	}
	s.lag[v.Config] = true
	return nil
}

func (s *laggingStore) Latest(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Version, error) {
	s.mu.Lock()
	lag, prev := s.lag[cfg], s.prev[cfg]
	delete(s.lag, cfg)
	s.mu.Unlock()
	if !lag {
		return s.Store.Latest(ctx, cfg)
	}
	if prev == nil {
		return cuecast.Version{}, cuecast.ErrNotFound
	}
	return *prev, nil
}

// laggingTailer is a tailer of a new repo holding configs-example,
// publishing to d through a laggingStore and handing off to dep, as the
// lagging-Latest tests start it.
func laggingTailer(t *testing.T, js jetstream.JetStream, d metrics.Store, dep tailer.Deployer) (*tailer.Tailer, *gittest.Repo) {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir("../../configs-example")
	repo.Commit("Import the example configs")
	store := &laggingStore{Store: d, prev: map[cuecast.ConfigPath]*cuecast.Version{}, lag: map[cuecast.ConfigPath]bool{}}
	ho := newHandoff(store, dep, nil, nil)
	tl, err := tailer.New(t.Context(), tailer.Config{Repo: repo.Dir, Branch: "main", DataDir: t.TempDir(), Interval: time.Hour}, js, ho, ho)
	if err != nil {
		t.Fatal(err)
	}
	return tl, repo
}

// startRollout starts an embedded NATS server with a distributor and a
// rollout controller (static policy) on it: the parts a hand-off hands to.
func startRollout(t *testing.T) (*nats.Conn, *distributor.Distributor, *rollout.Controller) {
	t.Helper()
	nc := natstest.Start(t).Connect(t)
	d, err := distributor.New(t.Context(), nc, distributor.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := rollout.New(t.Context(), nc, d, rollout.Static{}, rollout.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return nc, d, ctl
}

// TestHandoffDeploysWhatWasPublishedThoughLatestLags: issue 15, item 2. The
// tailer deploys what Latest returns after a batch; a lagging replica's
// answer made it deploy the version before (or nothing), and the new
// version was never rolled out.
func TestHandoffDeploysWhatWasPublishedThoughLatestLags(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	nc, d, ctl := startRollout(t)
	js := natstest.JetStream(t, nc)
	tl, repo := laggingTailer(t, js, d, ctl)
	rolledOut := func(cfg cuecast.ConfigPath, want uint64) {
		t.Helper()
		rec, err := ctl.Record(ctx, cfg)
		if errors.Is(err, rollout.ErrNoRollout) {
			t.Fatalf("%s: never deployed, want v%d rolling out", cfg, want)
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Current == nil || rec.Current.Version != want {
			t.Fatalf("%s: rollout of %s, want v%d", cfg, rolloutOf(rec.Current), want)
		}
	}
	if _, err := tl.Poll(ctx); err != nil {
		t.Fatalf("Poll: %v", err)
	}
	rolledOut("payments/checkout", 1)
	rolledOut("search/ranking", 1)

	repo.Edit("payments/checkout/checkout.cue", "max_amount_minor: 5_000_000", "max_amount_minor: 2_500_000")
	repo.Commit("Change checkout")
	if _, err := tl.Poll(ctx); err != nil {
		t.Fatalf("Poll: %v", err)
	}
	rolledOut("payments/checkout", 2)
}

// TestHandoffAfterTakeoverDeploysNewest: issue 15, item 2, across a lease
// changing hands. The new active process has not seen its predecessor's
// publishes; its tailer's Latest, answered by a lagging replica, hands over
// the version before the newest. The hand-off reads the newest from the
// stream's leader and deploys that.
func TestHandoffAfterTakeoverDeploysNewest(t *testing.T) {
	ctx := t.Context()
	nc, d, ctl := startRollout(t)
	cfg := cuecast.ConfigPath("payments/checkout")
	var vs []cuecast.Version
	for n := uint64(1); n <= 2; n++ {
		v := cuecast.Version{Config: cfg, Version: n, Commit: fmt.Sprintf("c%039d", n)}
		if err := d.Publish(ctx, v, fmt.Appendf(nil, `{"n":%d}`, n)); err != nil {
			t.Fatal(err)
		}
		v.Checksum = cuecast.Checksum(fmt.Appendf(nil, `{"n":%d}`, n))
		vs = append(vs, v)
	}
	ho := newHandoff(d, ctl, nc, nil) // the new process: it published nothing
	if err := ho.Deploy(ctx, vs[0]); err != nil {
		t.Fatalf("Deploy: %v", err)
	}
	rec, err := ctl.Record(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Current == nil || rec.Current.Version != 2 {
		t.Fatalf("rollout of %s, want v2 (the newest stored)", rolloutOf(rec.Current))
	}
}

func rolloutOf(r *rollout.Rollout) string {
	if r == nil {
		return "nothing"
	}
	return fmt.Sprintf("v%d (%s)", r.Version, r.State)
}

// The handoff asks the CUECAST stream's leader for a config's newest
// version before each deploy, with the tailer's context, which has no
// deadline: an answer lost with the connection left the tailer's poll
// waiting for good (found beside TestRecordReturnsWhenItsAnswerIsLost, the
// same wait in the rollout controller). It now gives up after a bounded
// wait, and the tailer's next poll asks again.
func TestLeaderLatestReturnsWhenItsAnswerIsLost(t *testing.T) {
	t.Parallel()
	srv := natstest.Start(t)
	if _, err := distributor.New(t.Context(), srv.Connect(t), distributor.Options{}); err != nil {
		t.Fatal(err)
	}
	link := natstest.StartLink(t, strings.TrimPrefix(srv.ClientURL(), "nats://"))
	nc, err := nats.Connect("nats://"+link.Addr(), nats.MaxReconnects(-1), nats.ReconnectWait(20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)

	err = link.LoseAnswer(t, srv, "$JS.API.STREAM.MSG.GET."+cuecast.Stream, func() error {
		_, _, err := leaderLatest(context.Background(), nc, "payments/checkout")
		return err
	})
	if err == nil {
		t.Fatal("leaderLatest returned no error though its answer was lost")
	}
}
