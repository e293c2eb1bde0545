package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/poll"
)

// syncBuffer is written by a running command while the test reads it.
type syncBuffer = iostreams.SyncBuffer

func run(ctx context.Context, args ...string) (code int, stdout, stderr *syncBuffer) {
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	io := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
	code = cli.Main(ctx, args, io, func(string) string { return "" })
	return code, stdout, stderr
}

func exampleRepo(t *testing.T) *gittest.Repo {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir(filepath.Join(repoRoot(t), "configs-example"))
	repo.Commit("Import the example configs")
	return repo
}

func TestServeBadInput(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"not a repo", []string{"--repo", t.TempDir()}, "not a git repository"},
		{"no such branch", []string{"--repo", repo.Dir, "--branch", "release"}, `"release"`},
		// The 5 s a query to Prometheus may take was fixed (issue: a slow
		// Prometheus blocked the controller).
		{"prometheus timeout zero", []string{"--repo", repo.Dir, "--prometheus", "http://127.0.0.1:9", "--prometheus-timeout", "0s"}, "--prometheus-timeout 0s: want a positive duration"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...)
			code, _, stderr := run(context.Background(), args...)
			if code != cli.ExitUsage {
				t.Fatalf("exit status: got %d, want %d (stderr %q)", code, cli.ExitUsage, stderr)
			}
			if !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("stderr: got %q, want it to name %s", stderr, tc.want)
			}
		})
	}
}

// TestWatchCorruptLastKnownGood: watch starts anyway, says so on stderr, and
// replaces the file with the next good version.
func TestWatchCorruptLastKnownGood(t *testing.T) {
	t.Parallel()
	_, p := serveExample(t)
	ctx := t.Context()

	lkg := filepath.Join(t.TempDir(), "checkout.json")
	if err := os.WriteFile(lkg, []byte("{this is not a last-known-good file"), 0o644); err != nil {
		t.Fatal(err)
	}
	wctx, stopWatch := context.WithCancel(ctx)
	done := make(chan int, 1)
	var stdout, stderr *syncBuffer
	ready := make(chan struct{})
	go func() {
		var code int
		stdout, stderr = &syncBuffer{}, &syncBuffer{}
		close(ready)
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
		code = cli.Main(wctx, []string{"watch", "--nats", p.ClientURL(), "--config", "payments/checkout", "--instance", "web-1", "--lkg", lkg, "--trusted-key", p.PublicKey}, io, func(string) string { return "" })
		done <- code
	}()
	<-ready
	poll.Until(t, "watch's first line", poll.Patience, func() (bool, string) {
		s := stdout.String()
		return strings.Contains(s, "\n"), fmt.Sprintf("stdout %q", s)
	})
	// status counts the report web-1 sends (clients spread reports a little
	// after an apply, so poll while the watcher runs).
	statusRE := regexp.MustCompile(`(?m)^payments/checkout\s+v1\s+1/1 instances`)
	poll.Until(t, "status with payments/checkout v1 1/1 instances", poll.Patience, func() (bool, string) {
		code, out, errOut := run(ctx, "status", "--nats", p.ClientURL(), "payments/checkout")
		return code == 0 && statusRE.MatchString(out.String()), fmt.Sprintf("exit %d, stdout %q, stderr %q", code, out, errOut)
	})
	code, out, _ := run(ctx, "status", "--nats", p.ClientURL(), "--output", "json")
	var st []struct {
		Config    string `json:"config"`
		Instances int    `json:"instances"`
		OnLatest  int    `json:"on_latest"`
	}
	if err := json.Unmarshal([]byte(out.String()), &st); code != 0 || err != nil || len(st) != 12 {
		// 7 configs, and search/suggest's variant index and 4 variants.
		t.Errorf("status --output json: exit %d, %v, %d configs; want 12 configs", code, err, len(st))
	}
	// A single server is its own region: --instances lists its instances'
	// own reports, asking no region.
	code, out, errOut := run(ctx, "status", "--nats", p.ClientURL(), "payments/checkout", "--instances")
	if code != 0 || !regexp.MustCompile(`(?m)^payments/checkout\s+web-1\s+-\s+v1\s+-\s+healthy`).MatchString(out.String()) {
		t.Errorf("status --instances: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	stopWatch()
	if code := <-done; code != 0 {
		t.Fatalf("watch exit status %d; stderr %q", code, stderr)
	}
	var line struct {
		Instance string `json:"instance"`
		Config   string `json:"config"`
		Version  uint64 `json:"version"`
		Checksum string `json:"checksum"`
	}
	first, _, _ := strings.Cut(stdout.String(), "\n")
	if err := json.Unmarshal([]byte(first), &line); err != nil {
		t.Fatalf("watch printed %q, want a JSON line: %v", first, err)
	}
	if line.Instance != "web-1" || line.Config != "payments/checkout" || line.Version != 1 || len(line.Checksum) != 64 {
		t.Errorf("applied line: got %+v, want web-1 on payments/checkout v1 with a checksum", line)
	}
	if !strings.Contains(strings.ToLower(stderr.String()), "last-known-good") {
		t.Errorf("stderr does not mention the corrupt last-known-good file: %q", stderr)
	}
	b, err := os.ReadFile(lkg)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), line.Checksum) && !strings.Contains(string(b), `"currency":"EUR"`) {
		t.Errorf("last-known-good file was not replaced with v1: %.200s", b)
	}

}

// TestNoCUERepo holds the commands that read --repo on disk to one usage
// error for a directory without cue.mod/: exit 2, the directory named, and
// the hint (flags eval's also names --published).
func TestNoCUERepo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		args []string
		hint string
	}{
		{[]string{"compile"}, "hint: point --repo at the directory that holds cue.mod/\n"},
		{[]string{"explain", "payments/checkout"}, "hint: point --repo at the directory that holds cue.mod/\n"},
		{[]string{"gen", "go", "payments"}, "hint: point --repo at the directory that holds cue.mod/\n"},
		{[]string{"flags", "eval", "growth/flags", "new-checkout"}, "hint: point --repo at the directory that holds cue.mod/, or pass --published\n"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := run(context.Background(), append(tc.args, "--repo", dir)...)
			want := dir + " is not a CUE config repo: no cue.mod/ directory\n" + tc.hint
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), want) || stdout.String() != "" {
				t.Errorf("%s without cue.mod/: exit %d, stdout %q, stderr %q; want exit %d and %q", tc.args[0], code, stdout, stderr, cli.ExitUsage, want)
			}
		})
	}
}
