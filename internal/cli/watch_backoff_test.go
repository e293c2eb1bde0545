package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestWatchBacksOffFromAnUnverifiableIndex: an unsigned variant index
// published as the newest version at a config's base path (anyone may
// publish on a loopback serve without login) made `watch --dim` re-watch
// thousands of times a second and never deliver (issue 32, defect 5). The
// attacker holds only a NATS connection. Re-watches now back off (counted
// through the pause hook: waits double up to a minute, so a 5-minute window
// holds a handful), the refusal is in the instance's report (`refused`),
// and a watcher with a last-known-good variant keeps it.
func TestWatchBacksOffFromAnUnverifiableIndex(t *testing.T) {
	t.Parallel()
	repo := variantRepo(t)
	p := startPipeline(t, repo)
	const cfg = cuecast.ConfigPath("search/ranking")
	await(t, "the variants published", func() bool {
		_, err := p.Distributor.Latest(context.Background(), "search/ranking/env=staging")
		return err == nil
	})
	lkg := filepath.Join(t.TempDir(), "ranking.lkg")
	stdout, _ := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", string(cfg), "--instance", "web-0",
		"--trusted-key", p.PublicKey, "--dim", "env=staging", "--lkg", lkg)
	await(t, "the staging variant applied", func() bool {
		return strings.Contains(stdout.String(), `"config":"search/ranking/env=staging","version":1`)
	})

	// The attack: the signed index, republished unsigned as the newest version.
	latest, err := p.Distributor.Latest(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	index := []byte(`{"config":"search/ranking","dimensions":["env"],"schema":"cuecast.variants/v1","variants":["search/ranking/env=prod","search/ranking/env=staging"]}`)
	meta, _ := json.Marshal(cuecast.Version{Config: cfg, Version: latest.Version + 1, Checksum: cuecast.Checksum(index), Size: int64(len(index))})
	nc, err := nats.Connect(p.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := nc.JetStream()
	if err != nil {
		t.Fatal(err)
	}
	msg := nats.NewMsg(cuecast.VersionSubject(cfg))
	msg.Header.Set(cuecast.HeaderMeta, string(meta))
	msg.Data = index
	if _, err := js.PublishMsg(msg); err != nil {
		t.Fatalf("publish the forged index: %v", err)
	}

	// A new instance without a last-known-good file: its re-watches back off.
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var waits []time.Duration
	var waited time.Duration
	refusedReported := func() (bool, string) {
		reps, err := p.Distributor.Reports(context.Background(), cfg)
		for _, r := range reps {
			if r.Instance == "web-1" && strings.Contains(r.Refused, "variant index") {
				return true, ""
			}
		}
		return false, fmt.Sprintf("reports %+v (%v)", reps, err)
	}
	pause := func(ctx context.Context, d time.Duration) error {
		// The watcher runs, and reports, while it waits: the first pause
		// lasts until its report carries the refusal.
		if len(waits) == 0 {
			poll.Until(t, "the refusal reported", poll.Patience, refusedReported)
		}
		mu.Lock()
		defer mu.Unlock()
		waits = append(waits, d)
		waited += d
		if waited >= 5*time.Minute || len(waits) >= 200 {
			cancel()
		}
		return ctx.Err()
	}
	out, errOut := &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}
		done <- cli.MainWithRewatchPause(ctx, []string{"watch", "--nats", p.ClientURL(), "--config", string(cfg), "--instance", "web-1",
			"--trusted-key", p.PublicKey, "--dim", "env=staging"}, io, pause)
	}()
	select {
	case <-done:
	case <-time.After(poll.Patience):
		cancel()
		<-done
		mu.Lock()
		t.Fatalf("watch still re-watching after %d pauses totalling %s: %v", len(waits), waited, waits)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) > 12 {
		t.Errorf("%d re-watches in %s of pauses, want at most 12 (backing off to a minute): %v", len(waits), waited, waits)
	}
	for i := 1; i < len(waits); i++ {
		if waits[i] < waits[i-1] || waits[i] == 0 {
			t.Errorf("pause %d is %s after %s: re-watches must back off", i, waits[i], waits[i-1])
		}
	}
	if !strings.Contains(errOut.String(), "variant index") {
		t.Errorf("stderr does not say the index was refused:\n%s", errOut)
	}

	// An instance restarting with its last-known-good variant keeps it.
	stdout2, _ := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", string(cfg), "--instance", "web-0",
		"--trusted-key", p.PublicKey, "--dim", "env=staging", "--lkg", lkg)
	await(t, "the last-known-good staging variant kept", func() bool {
		return strings.Contains(stdout2.String(), `"config":"search/ranking/env=staging","version":1`)
	})
}
