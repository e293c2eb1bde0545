package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
)

// TestDataDirLocked: a second pipeline over a data directory in use exits at
// once naming the first one's PID; once the first is closed, it starts.
func TestDataDirLocked(t *testing.T) {
	repo, _ := smallRepo(t)
	data := t.TempDir()
	first := start(t, repo, data)
	began := time.Now()
	_, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: "127.0.0.1:0"})
	if !errors.Is(err, pipeline.ErrDataDirLocked) || !strings.Contains(err.Error(), fmt.Sprintf("pid %d", os.Getpid())) {
		t.Fatalf("second start: %v, want ErrDataDirLocked naming pid %d", err, os.Getpid())
	}
	if d := time.Since(began); d > 2*time.Second {
		t.Errorf("second start took %s to fail", d)
	}
	first.stop()
	p, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: data, Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatalf("start after the first stopped: %v", err)
	}
	p.Close()
}

// TestBusyPortsFailAtOnce: a taken --listen or --http port fails Start at
// once, naming the port (it used to wait 10s for "not ready").
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
			began := time.Now()
			_, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, Branch: "main", DataDir: t.TempDir(), Listen: tc.listen, HTTP: tc.http})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error containing %q", err, tc.want)
			}
			if d := time.Since(began); d > 2*time.Second {
				t.Errorf("took %s to fail", d)
			}
		})
	}
}
