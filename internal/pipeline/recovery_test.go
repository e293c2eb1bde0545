package pipeline_test

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/poll"
)

// TestServeWaitsOutASlowStoreRecovery runs docs/OPERATIONS.md's word on a
// store that takes long to read back ("The data directory"): serve waits
// as long as it takes and says so every 10 s; meanwhile /healthz answers
// 200 and /readyz 503 saying why (before, the port took connections and
// answered none); SIGTERM stops it cleanly (it exited 1); and once the
// store is read it serves what the store held and publishes the next
// change. Before all that, serve gave up after 10 s ("not ready after 10s:
// still recovering the JetStream store"), and a supervisor started it
// into the same recovery again.
//
// What makes the recovery slow: the stream's metadata file is a FIFO, so
// the server's recovery blocks opening it, as on a disk that answers
// slowly, until the test writes the file's own bytes into it.
func TestServeWaitsOutASlowStoreRecovery(t *testing.T) {
	t.Parallel() // processes and waits on them: it overlaps the other such tests
	rb, data, listen, pub := startEmbeddedRunbookServe(t)
	serve, repo, cfgs := rb.serve, rb.repo, rb.cfgs
	defer serve.stop(t)
	nc, c, published := rb.publish(t, listen, pub)
	serve.stop(t)

	meta := filepath.Join(data, "jetstream", "jetstream", "$G", "streams", "CUECAST", "meta.inf")
	content, err := os.ReadFile(meta)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(meta); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(meta, 0o600); err != nil {
		t.Fatal(err)
	}
	// The second of the lines said every 10 s: past any 10 s bound (the
	// old one raced the first line).
	waiting := regexp.MustCompile(`level=WARN msg="the NATS server is not ready yet: still recovering the JetStream store; waiting" .*waited=2\ds`)
	serve.start(t)
	poll.Until(t, "serve says it still waits for the store, past 20 s", 2*convergeBound, func() (bool, string) {
		serve.reap(t) // an exit on its own fails the test
		log := serve.proc.stderr.String()
		return waiting.MatchString(log), log
	})
	if serve.ready() {
		t.Fatalf("serve says it serves while its store is still being read:\n%s", serve.proc.stderr.String())
	}
	// The operations server answers meanwhile: the process runs
	// (/healthz), and is not ready, saying why (/readyz).
	if code, body := get(t, rb.base+"/healthz"); code != http.StatusOK {
		t.Errorf("/healthz %d %q while the store is being read, want 200: the process runs", code, body)
	}
	if code, body := get(t, rb.base+"/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "starting: reading back the embedded NATS server's JetStream store") {
		t.Errorf("/readyz %d %q while the store is being read, want 503 saying so", code, body)
	}

	// "Stop it with SIGTERM if you must": a clean stop, mid-recovery.
	if err := serve.proc.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-serve.proc.exited:
		serve.exited = true
		if err != nil || !strings.Contains(serve.proc.stderr.String(), `msg="stopped while starting"`) {
			t.Fatalf("serve stopped mid-recovery by SIGTERM: %v, want a clean exit saying so\n%s", err, serve.proc.stderr.String())
		}
	case <-time.After(convergeBound):
		t.Fatalf("serve did not stop %s after SIGTERM mid-recovery", convergeBound)
	}

	// Waited out: the store is read, and serve serves what it held.
	serve.start(t)
	readBack(t, meta, content)
	rb.ready()
	readerBack(t, nc)
	for _, cf := range cfgs {
		if v, err := rb.d.Latest(t.Context(), cf); err != nil || v.Version != published[cf].Version || v.Checksum != published[cf].Checksum {
			t.Errorf("%s after the slow recovery: v%d %s (%v), want v%d %s as published", cf, v.Version, v.Checksum, err, published[cf].Version, published[cf].Checksum)
		}
	}
	c.change(cfgs[0])
	waitCursor(t, nc, repo.Head())
	next, err := rb.d.Latest(t.Context(), cfgs[0])
	if err != nil || next.Version != published[cfgs[0]].Version+1 || next.Commit != c.last[cfgs[0]] {
		t.Fatalf("%s after the slow recovery and a commit: v%d of %s (%v), want v%d of %s", cfgs[0], next.Version, short(next.Commit), err, published[cfgs[0]].Version+1, short(c.last[cfgs[0]]))
	}
	published[cfgs[0]] = next
	rb.f.converge(t, time.Now(), published)
	poll.Until(t, "/readyz 200 after the slow recovery", poll.Patience, func() (bool, string) {
		code, body := get(t, rb.base+"/readyz")
		return code == http.StatusOK, strings.TrimSpace(body)
	})
}

// readBack waits until the server is blocked opening meta, a FIFO, and
// ends the read by writing content into it; then it puts a regular file
// with the same bytes in its place for the server's later writes.
func readBack(t *testing.T, meta string, content []byte) {
	t.Helper()
	var f *os.File
	poll.Until(t, "the server reading "+meta, convergeBound, func() (bool, string) {
		// Non-blocking: with no reader there yet, the open fails (ENXIO)
		// rather than waiting.
		var err error
		if f, err = os.OpenFile(meta, os.O_WRONLY|syscall.O_NONBLOCK, 0); errors.Is(err, syscall.ENXIO) {
			return false, "no reader yet"
		} else if err != nil {
			t.Fatal(err)
		}
		return true, ""
	})
	if _, err := f.Write(content); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := meta + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, meta); err != nil {
		t.Fatal(err)
	}
}
