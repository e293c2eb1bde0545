package cli_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestHeartbeatFlags: serve --heartbeat sets how long a report is live
// (four heartbeats: the report stream's max age), and watch --heartbeat how
// often an instance reports when nothing changes. docs/SCALING.md tells an
// operator to lengthen both for a large fleet; without the flags only the
// library could.
func TestHeartbeatFlags(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	listen := natstest.FreeAddr(t)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan int, 1)
	go func() {
		code, _, errOut := run(ctx, "serve", "--repo", repo.Dir, "--data", t.TempDir(), "--interval", "20ms",
			"--listen", listen, "--heartbeat", "1m")
		if code != 0 {
			t.Errorf("serve: exit %d: %s", code, errOut)
		}
		served <- code
	}()
	defer func() { cancel(); <-served }()
	var nc *nats.Conn
	poll.Until(t, "serve's NATS up", 30*time.Second, func() (bool, string) {
		c, err := nats.Connect("nats://" + listen)
		if err != nil {
			return false, err.Error()
		}
		nc = c
		return true, ""
	})
	defer nc.Close()
	js := natstest.JetStream(t, nc)
	poll.Until(t, "the report stream kept for four heartbeats of a minute", 30*time.Second, func() (bool, string) {
		st, err := js.Stream(t.Context(), cuecast.ReportStream)
		if err != nil {
			return false, err.Error()
		}
		return st.CachedInfo().Config.MaxAge == 4*time.Minute, st.CachedInfo().Config.MaxAge.String()
	})

	// An instance with a 300 ms heartbeat reports again and again while
	// nothing changes (at the default 15 s it would not within the poll).
	var reports atomic.Int64
	sub, err := nc.Subscribe(cuecast.ReportPrefix+".>", func(m *nats.Msg) { reports.Add(1) })
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	_, stderr := startCmd(t, "watch", "--nats", "nats://"+listen, "--config", "payments/checkout", "--instance", "web-1",
		"--insecure-skip-verify", "--lkg", filepath.Join(t.TempDir(), "lkg.json"), "--heartbeat", "300ms", "--reconcile", "1h")
	poll.Until(t, "five reports from web-1 at a 300 ms heartbeat", 10*time.Second, func() (bool, string) {
		n := reports.Load()
		return n >= 5, fmt.Sprint("reports so far: ", n)
	})
	// docs/SECURITY.md: --insecure-skip-verify warns on every start.
	if !strings.Contains(stderr.String(), "watch web-1: WARNING: --insecure-skip-verify: signatures are NOT checked") {
		t.Errorf("watch --insecure-skip-verify said %q; want the warning", stderr)
	}

	for _, args := range [][]string{
		{"serve", "--repo", repo.Dir, "--data", t.TempDir(), "--heartbeat", "10ms"},
		{"watch", "--config", "payments/checkout", "--instance", "web-2", "--insecure-skip-verify", "--heartbeat", "0s"},
	} {
		if code, _, errOut := run(context.Background(), args...); code != cli.ExitUsage {
			t.Errorf("%v: exit %d (%s), want %d", args, code, errOut, cli.ExitUsage)
		}
	}
}
