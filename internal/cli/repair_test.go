package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestRepairCommand: after the CUECAST stream of a stopped serve is deleted,
// `cuecast repair` republishes every config above the numbers it had.
func TestRepairCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if code, _, stderr := run(ctx, "repair", "--repo", t.TempDir()); code != 2 || !strings.Contains(stderr.String(), "--reason") {
		t.Fatalf("repair without --reason: exit %d, %s; want 2 asking for --reason", code, stderr)
	}
	repo, data := lostStore(t)
	code, stdout, stderr := run(ctx, "repair", "--repo", repo.Dir, "--data", data, "--reason", "test", "--log-level", "error")
	if code != 0 {
		t.Fatalf("repair: exit %d: %s", code, stderr)
	}
	if out := stdout.String(); !strings.Contains(out, "payments/checkout: stream held v0, v1 was published; now v2 (content), deployed, audited") {
		t.Fatalf("repair output:\n%s", out)
	}
}

// lostStore is a serve's data directory after its whole store was lost (a
// volume gone), the key and the highwater file kept: what repair is for, not
// a --data to refuse. Its serve had published the example configs of repo.
func lostStore(t *testing.T) (repo *gittest.Repo, data string) {
	t.Helper()
	repo = exampleRepo(t)
	data = t.TempDir()
	p, stop := pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, DataDir: data})
	poll.Until(t, "first commit published", 20*time.Second, func() (bool, string) {
		st, err := p.Tailer.State(t.Context())
		return err == nil && st.Cursor == repo.Head(), st.Cursor
	})
	stop()
	if err := os.RemoveAll(filepath.Join(data, "jetstream")); err != nil {
		t.Fatal(err)
	}
	return repo, data
}

// TestRepairSecureDataDir: repair of a serve --secure data directory opens
// its store in serve's accounts. It used to open it without them, find no
// CUECAST stream in the global account, "repair" every config into a new
// one there and raise the highwater file, so that the next serve --secure
// refused to publish: the very damage repair is for. A healthy store has
// nothing to repair; one whose stream was deleted is repaired where serve
// keeps it.
func TestRepairSecureDataDir(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	data := t.TempDir()
	addr := natstest.FreeAddrOn(t, "127.0.0.1")
	secrets := filepath.Join(data, cli.EmbeddedSecretsDir)
	serve := func() {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			if code, _, errOut := run(ctx, "serve", "--repo", repo.Dir, "--data", data, "--interval", "20ms",
				"--listen", addr, "--secure", "--namespace", "payments", "--log-level", "error"); code != 0 {
				t.Errorf("serve: exit %d: %s", code, errOut)
			}
		}()
		login := []string{"--nats", "tls://" + addr, "--user", "operator", "--password-file", filepath.Join(secrets, "operator.password"),
			"--tls-ca", filepath.Join(secrets, "ca.pem")}
		// Stopped once the tailer's cursor is at the head: every version
		// of the commit published (a stop before would leave a reserved
		// number unpublished, which repair rightly renumbers).
		poll.Until(t, "the head published", 30*time.Second, func() (bool, string) {
			code, o, e := run(ctx, append([]string{"tailer", "status"}, login...)...)
			return code == 0 && strings.Contains(o.String(), " at "+cuecast.ShortCommit(repo.Head())), o.String() + e.String()
		})
		cancel()
		<-done
	}
	serve()
	ctx := context.Background()
	code, stdout, stderr := run(ctx, "repair", "--repo", repo.Dir, "--data", data, "--reason", "test", "--log-level", "error")
	if code != 0 || !strings.Contains(stdout.String(), "nothing to repair") {
		t.Fatalf("repair of a healthy secure store: exit %d, stdout %q, stderr %q; want nothing to repair", code, stdout, stderr)
	}
	global := filepath.Join(data, "jetstream", "jetstream", "$G")
	if _, err := os.Stat(global); !os.IsNotExist(err) {
		t.Errorf("%s: %v; want no store outside serve's accounts", global, err)
	}
	if err := os.RemoveAll(filepath.Join(data, "jetstream", "jetstream", "CUECAST", "streams", "CUECAST")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr = run(ctx, "repair", "--repo", repo.Dir, "--data", data, "--reason", "test", "--log-level", "error")
	if code != 0 || !strings.Contains(stdout.String(), "payments/checkout: stream held v0, v1 was published; now v2 (content), deployed, audited") {
		t.Fatalf("repair of a deleted secure stream: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	if _, err := os.Stat(global); !os.IsNotExist(err) {
		t.Errorf("%s: %v; want no store outside serve's accounts", global, err)
	}
	serve() // and serve --secure publishes again: it would refuse a damaged store
}

// TestRepairRefusesAnEmptyDataDir: a --data that holds no serve store is a
// typo, not a store to rebuild: repair used to create a fresh one there.
func TestRepairRefusesAnEmptyDataDir(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	data := filepath.Join(t.TempDir(), "nonexist")
	code, _, stderr := run(context.Background(), "repair", "--repo", repo.Dir, "--data", data, "--reason", "test")
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "holds no serve store") {
		t.Errorf("repair --data %s: exit %d, stderr %q; want %d saying it holds no serve store", data, code, stderr, cli.ExitUsage)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("%s: %v; want it not created", data, err)
	}
}
