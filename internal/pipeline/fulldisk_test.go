//go:build linux

package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// smallFS mounts a tmpfs of size bytes on a new directory, unmounted at
// cleanup. It skips the test, saying why, where mounting is not allowed
// (not root, no CAP_SYS_ADMIN).
func smallFS(t *testing.T, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("cannot mount a small tmpfs to fill (%v): run as root, or with CAP_SYS_ADMIN", err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes a file in dir until its file system has no space left, and
// returns the file's path.
func fill(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, n := range []int{len(buf), 4096, 1} {
		for {
			_, err := f.Write(buf[:n])
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill %s: %v", dir, err)
			}
		}
	}
	return path
}

var publishErrorsRe = regexp.MustCompile(`(?m)^cuecast_version_publish_errors_total (\S+)$`)

// publishErrors reads cuecast_version_publish_errors_total from /metrics.
func publishErrors(t *testing.T, base string) float64 {
	t.Helper()
	_, body := get(t, base+"/metrics")
	m := publishErrorsRe.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no cuecast_version_publish_errors_total in /metrics")
	}
	n, err := strconv.ParseFloat(m[1], 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestFullDiskHeals runs docs/OPERATIONS.md's "A full disk" as written, on a
// real full file system: serve's --data on a small tmpfs, filled, then
// commits of ~30 KB configs. The embedded server's file store latches the
// failed write ("Critical write error … no space left on device") and
// refused every write after space was back, while /readyz said 200 and the
// watchers stayed behind until a restart (issue 32, item 2). Now, while
// writes fail, /readyz is 503 naming why and the failures are counted in
// cuecast_version_publish_errors_total; once the file is removed, serve
// reopens its store by itself, the changes are published and rolled out,
// and /readyz is 200, without a restart (Run never returned).
func TestFullDiskHeals(t *testing.T) {
	data := smallFS(t, 24<<20)
	repo, cfgs := smallRepo(t)
	var logs syncLog
	ctx, cancel := context.WithCancel(context.Background())
	p, err := pipeline.Start(ctx, pipeline.Config{
		Repo: repo.Dir, Branch: "main", DataDir: data, Listen: "127.0.0.1:0", Interval: 20 * 1e6,
		HTTP: "127.0.0.1:0", SampleInterval: 50 * 1e6,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
	})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done; p.Close() })
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logs.String())
		}
	})
	base := "http://" + p.HTTPAddr()
	deployed := func(what string, commit string) {
		t.Helper()
		poll.Until(t, what, poll.Patience, func() (bool, string) {
			select {
			case err := <-done:
				t.Fatalf("Run returned: %v", err)
			default:
			}
			rec, err := p.Rollout.Record(ctx, cfgs[0])
			if err != nil {
				return false, err.Error()
			}
			r := rec.Current
			return r != nil && r.Commit == commit && r.State == rollout.StateComplete, fmt.Sprintf("%+v", r)
		})
	}
	deployed("the first commit deployed", repo.Head())

	filler := fill(t, data)
	pad := strings.Repeat("x", 30<<10)
	var change string
	for i := 1; i <= 3; i++ {
		change = repo.CommitFiles(fmt.Sprintf("a: value %d", i), map[string]string{
			string(cfgs[0]) + "/c.cue": fmt.Sprintf("package %s\n\nvalue: %d\npad: %q\n", cfgs[0].Name(), i, pad),
		})
	}
	p.Tailer.Wake()
	poll.Until(t, "/readyz 503 saying the store cannot write", poll.Patience, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusServiceUnavailable &&
			(strings.Contains(body, "failed a write") || strings.Contains(body, "disabled JetStream")), fmt.Sprint(code, body)
	})
	poll.Until(t, "the failed writes counted", poll.Patience, func() (bool, string) {
		n := publishErrors(t, base)
		return n > 0, fmt.Sprint(n)
	})

	// The runbook: free space; nothing else.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	deployed("the last change rolled out after space was freed", change)
	poll.Until(t, "/readyz 200", poll.Patience, func() (bool, string) {
		code, body := get(t, base+"/readyz")
		return code == http.StatusOK, fmt.Sprint(code, body)
	})
	if !strings.Contains(logs.String(), "no space left on device") {
		t.Errorf("the log never named the cause (no space left on device)")
	}
}
