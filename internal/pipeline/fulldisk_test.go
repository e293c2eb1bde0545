//go:build linux

package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/diskfull"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// publishErrors reads cuecast_version_publish_errors_total from /metrics.
func publishErrors(t *testing.T, base string) float64 {
	t.Helper()
	n, err := readMetric(t, base, "cuecast_version_publish_errors_total")
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// readMetric reads the value of an unlabelled metric from /metrics; an
// error when the server does not answer with it.
func readMetric(t *testing.T, base, name string) (float64, error) {
	t.Helper()
	code, body := get(t, base+"/metrics")
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindStringSubmatch(body)
	if code != http.StatusOK || m == nil {
		return 0, fmt.Errorf("no %s in /metrics (%d %.200s)", name, code, body)
	}
	return strconv.ParseFloat(m[1], 64)
}

// serving is one run of serve's pipeline: Run in the background, its
// outcome on done.
type serving struct {
	p      *pipeline.Pipeline
	cancel context.CancelFunc
	done   chan error
	base   string
}

// serveOn starts serve's pipeline over data, listening for NATS on listen.
func serveOn(t *testing.T, repo, data, listen string, logs *syncLog) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	p, err := pipeline.Start(ctx, pipeline.Config{
		Repo: repo, Branch: "main", DataDir: data, Listen: listen, Interval: 20 * time.Millisecond,
		HTTP: "127.0.0.1:0", SampleInterval: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		cancel()
		t.Fatalf("start serve: %v", err)
	}
	s := &serving{p: p, cancel: cancel, done: make(chan error, 1), base: "http://" + p.HTTPAddr()}
	go func() { s.done <- p.Run(ctx) }()
	return s
}

// stop cancels Run (unless it returned) and closes the pipeline.
func (s *serving) stop() {
	s.cancel()
	if s.done != nil {
		<-s.done
	}
	s.p.Close()
}

// TestFullDiskHeals runs docs/OPERATIONS.md's "A full disk" as written, on a
// real full file system: serve's --data on a small tmpfs, filled, then
// commits of ~30 KB configs. The embedded server's file store latches the
// failed write ("Critical write error … no space left on device") and
// refused every write after space was back, while /readyz said 200 and the
// watchers stayed behind until a restart (issue 32, item 2). Now, while the
// disk is full, serve runs on, /readyz is 503 naming the failed write and
// the failures are counted in cuecast_version_publish_errors_total; once
// the file is removed, serve exits with the error saying to start it again,
// and the start the supervisor makes (here, the test) reopens the store:
// the changes are published and rolled out, the watcher gets them, and
// /readyz is 200.
func TestFullDiskHeals(t *testing.T) {
	t.Parallel()
	data := diskfull.Mount(t, 24<<20)
	repo, cfgs := smallRepo(t)
	var logs syncLog
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	listen := natstest.FreeAddr(t)
	s := serveOn(t, repo.Dir, data, listen, &logs)
	t.Cleanup(func() { s.stop() })
	ctx := t.Context()
	deployed := func(what string, commit string) {
		t.Helper()
		poll.Until(t, what, poll.Patience, func() (bool, string) {
			rec, err := s.p.Rollout.Record(ctx, cfgs[0])
			if err != nil {
				return false, err.Error()
			}
			r := rec.Current
			return r != nil && r.Commit == commit && r.State == rollout.StateComplete, fmt.Sprintf("%+v", r)
		})
	}
	deployed("the first commit deployed", repo.Head())
	nc, err := nats.Connect("nats://"+listen, client.ConnectOptions()...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	w := natstest.Watch(t, nc, cfgs[0], []client.Option{client.WithInstance("web-1"), client.WithTrustedKeys(s.p.PublicKey)})

	filler := diskfull.Fill(t, data)
	pad := strings.Repeat("x", 30<<10)
	var change string
	for i := 1; i <= 3; i++ {
		change = repo.CommitFiles(fmt.Sprintf("a: value %d", i), map[string]string{
			string(cfgs[0]) + "/c.cue": fmt.Sprintf("package %s\n\nvalue: %d\npad: %q\n", cfgs[0].Name(), i, pad),
		})
	}
	s.p.Tailer.Wake()
	poll.Until(t, "/readyz 503 naming the failed write", poll.Patience, func() (bool, string) {
		code, body := get(t, s.base+"/readyz")
		return code == http.StatusServiceUnavailable &&
			(strings.Contains(body, "failed a write") || strings.Contains(body, "disabled JetStream")), fmt.Sprint(code, body)
	})
	poll.Until(t, "the failed writes counted", poll.Patience, func() (bool, string) {
		n := publishErrors(t, s.base)
		return n > 0, fmt.Sprint(n)
	})
	select {
	case err := <-s.done:
		t.Fatalf("serve stopped on a disk still full: %v", err)
	default:
	}

	// The runbook: free space; serve exits for its supervisor to start it.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	select {
	case err = <-s.done:
		s.done = nil
	case <-time.After(poll.Patience):
		t.Fatalf("serve still running %s after space was freed, its store refusing writes (/readyz: %v)", poll.Patience, fmt.Sprint(get(t, s.base+"/readyz")))
	}
	exited := time.Since(freed)
	if !errors.Is(err, pipeline.ErrStoreWriteFailed) && !errors.Is(err, pipeline.ErrJetStreamDisabled) || !strings.Contains(err.Error(), "start serve again") {
		t.Fatalf("Run: %v, want the store's failed write and \"start serve again\"", err)
	}
	s.stop()
	started := time.Now()
	s = serveOn(t, repo.Dir, data, listen, &logs)
	deployed("the last change rolled out after the start", change)
	t.Logf("serve exited %s after space was freed; started again, it rolled the change out in %s", exited.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
	poll.Until(t, "the watcher on the last change", poll.Patience, func() (bool, string) {
		v, err := s.p.Distributor.Latest(ctx, cfgs[0])
		if err != nil {
			return false, err.Error()
		}
		got := w.Current()
		return got.Version == v.Version && got.Checksum == v.Checksum, fmt.Sprintf("on v%d, latest v%d", got.Version, v.Version)
	})
	poll.Until(t, "/readyz 200", poll.Patience, func() (bool, string) {
		code, body := get(t, s.base+"/readyz")
		return code == http.StatusOK, fmt.Sprint(code, body)
	})
}
