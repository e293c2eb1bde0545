package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestDataDirLocked: a second pipeline over a data directory in use exits at
// once naming the first one's PID; once the first is closed, it starts.
func TestDataDirLocked(t *testing.T) {
	repo, _ := smallRepo(t)
	data := t.TempDir()
	first := start(t, repo, data)
	// "At once": it returns while the first still holds the directory, so
	// it did not wait for the lock (a wall-clock bound would only add a
	// way to fail on a loaded box).
	_, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: "127.0.0.1:0"})
	if !errors.Is(err, pipeline.ErrDataDirLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second start: %v, want ErrDataDirLocked naming pid %d", err, os.Getpid())
	}
	first.stop()
	p, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	p.Close()
}

// TestBusyPortsFailAtOnce: a taken --listen or --http port fails Start at
// once, naming the port, before the store is opened (it used to open the
// store and wait 10s for "not ready").
func TestBusyPortsFailAtOnce(t *testing.T) {
	repo := gittest.New(t)
	repo.CopyDir("../../configs-example")
	repo.Commit("import")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()
	_, port, _ := net.SplitHostPort(busy)
	for _, tc := range []struct {
		name         string
		listen, http string
		want         string
	}{
		{"listen", busy, "", "--listen " + busy + ": port " + port + " is not available"},
		{"http", "127.0.0.1:0", busy, "--http " + busy + ": port not available"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := t.TempDir()
			_, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: tc.listen, HTTP: tc.http})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if _, err := os.Stat(filepath.Join(data, "jetstream")); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the JetStream store was opened before the port was refused (stat: %v)", err)
			}
		})
	}
}

// TestStoreFullNamedAndRecovers: with the JetStream store at its limit (a
// full disk in small), a commit's publish fails naming the lack of space,
// /readyz is 503 saying so, and once space is freed the version is published
// without a restart and /readyz is 200 again. (It used to fail with "context
// deadline exceeded" and keep /readyz at 200.)
func TestStoreFullNamedAndRecovers(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo, cfgs := smallRepo(t)
	var logs syncLog
	pctx, cancel := context.WithCancel(ctx)
	p, err := pipeline.Start(pctx, pipeline.Config{
		Repo: repo.Dir, Branch: "main", DataDir: t.TempDir(), Listen: "127.0.0.1:0", Interval: 20 * time.Millisecond,
		HTTP: "127.0.0.1:0", SampleInterval: 50 * time.Millisecond, MaxFileStore: 4 << 20,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() { cancel(); <-done; p.Close() })
	base := "http://" + p.HTTPAddr()
	poll.Until(t, "first commit deployed everywhere", poll.Patience, func() (bool, string) {
		recs, err := p.Rollout.Records(ctx)
		if err != nil || len(recs) != len(cfgs) {
			return false, fmt.Sprint(len(recs), err)
		}
		for _, r := range recs {
			if r.Current == nil || r.Current.State != rollout.StateComplete {
				return false, fmt.Sprintf("%s: %+v", r.Config, r.Current)
			}
		}
		return true, ""
	})

	js := natstest.JetStream(t, p.NC)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "FILLER", Subjects: []string{"filler"}}); err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		if _, err := js.Publish(ctx, "filler", make([]byte, 64<<10)); err != nil {
			break
		}
		if i > 200 {
			t.Fatal("the store never filled up")
		}
	}
	poll.Until(t, "/readyz 503 naming the full store", poll.Patience, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable && strings.Contains(body, "store full"), fmt.Sprint(code, body)
	})
	change := repo.CommitFiles("a: value 1", map[string]string{string(cfgs[0]) + "/c.cue": fmt.Sprintf("package %s\n\nvalue: 1\n", cfgs[0].Name())})
	p.Tailer.Wake()
	poll.Until(t, "the failed publish named as lack of space", poll.Patience, func() (bool, string) {
		return strings.Contains(logs.String(), "no space left"), logs.String()
	})

	if err := js.DeleteStream(ctx, "FILLER"); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the change published after space was freed", poll.Patience, func() (bool, string) {
		v, err := p.Distributor.Latest(ctx, cfgs[0])
		return err == nil && v.Commit == change, fmt.Sprint(v.Version, err)
	})
	poll.Until(t, "/readyz 200", poll.Patience, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusOK, fmt.Sprint(code, body)
	})
}

// TestJetStreamDisabledStopsServe: when the embedded server disables
// JetStream (what it may do on a full disk) and there is space, Run returns
// an error saying so, for the supervisor to start serve again, which
// reopens the store (TestFullDiskHeals runs the whole runbook).
func TestJetStreamDisabledStopsServe(t *testing.T) {
	t.Parallel()
	repo, _ := smallRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := pipeline.Start(ctx, pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: t.TempDir(), Listen: "127.0.0.1:0", Interval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	p.Server.DisableJetStream()
	if err := poll.Receive(t, "Run's return with JetStream disabled (still going)", 20*time.Second, done); !errors.Is(err, pipeline.ErrJetStreamDisabled) || !strings.Contains(err.Error(), "free space") {
		t.Fatalf("Run: %v, want ErrJetStreamDisabled telling to free space", err)
	}
}

// syncLog is the log a running serve writes while the test reads it.
type syncLog = iostreams.SyncBuffer
