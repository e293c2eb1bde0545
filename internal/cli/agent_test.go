package cli_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

func startPipeline(t *testing.T, repo *gittest.Repo) *pipeline.Pipeline {
	t.Helper()
	p, _ := pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir})
	return p
}

// serveExample is a serve over a copy of configs-example, and the copy
// (for the tests that commit to it).
func serveExample(t *testing.T) (*gittest.Repo, *pipeline.Pipeline) {
	t.Helper()
	repo := exampleRepo(t)
	return repo, startPipeline(t, repo)
}

// startCmd runs a long-lived command (agent, watch) until the test ends.
func startCmd(t *testing.T, args ...string) (stdout, stderr *syncBuffer) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stdout, stderr = &syncBuffer{}, &syncBuffer{}
	done := make(chan int, 1)
	go func() {
		io := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
		done <- cli.Main(ctx, args, io, func(string) string { return "" })
	}()
	t.Cleanup(func() {
		cancel()
		if code := <-done; code != 0 {
			t.Errorf("%s exited %d; stderr %q", args[0], code, stderr)
		}
	})
	return stdout, stderr
}

func await(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, 20*time.Second, func() (bool, string) { return cond(), "not so" })
}

// awaitReport waits for instance's report of cfg to be what ok wants.
func awaitReport(t *testing.T, p *pipeline.Pipeline, cfg cuecast.ConfigPath, instance, what string, stderr fmt.Stringer, ok func(cuecast.Report) bool) {
	t.Helper()
	poll.Until(t, what, poll.Patience, func() (bool, string) {
		rs, err := p.Distributor.Reports(t.Context(), cfg)
		if err != nil {
			return false, err.Error()
		}
		for _, r := range rs {
			if r.Instance == instance {
				return ok(r), fmt.Sprintf("%+v; agent stderr %q", r, stderr)
			}
		}
		return false, fmt.Sprintf("no report among %+v; agent stderr %q", rs, stderr)
	})
}

func fileContains(path, want string) func() bool {
	return func() bool {
		b, err := os.ReadFile(path)
		return err == nil && strings.Contains(string(b), want)
	}
}

func TestAgentWritesFilesAndRunsExec(t *testing.T) {
	t.Parallel()
	repo, p := serveExample(t)
	out := t.TempDir()
	log := filepath.Join(t.TempDir(), "reloads")
	stdout, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-1",
		"--trusted-key", p.PublicKey, "--metrics", "127.0.0.1:0",
		"--config", "payments/checkout", "--config", "search/ranking", "--dir", out,
		"--exec", `echo "$CUECAST_CONFIG $CUECAST_VERSION $CUECAST_FILE" >> `+log)

	checkout := filepath.Join(out, "payments", "checkout.json")
	await(t, "both files", func() bool {
		return fileContains(checkout, `"currency":"EUR"`)() && fileContains(filepath.Join(out, "search", "ranking.json"), "{")()
	})
	await(t, "a reload after the first files", fileContains(log, " 1 "))

	path := filepath.Join(repo.Dir, "payments", "checkout", "checkout.cue")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	repo.CommitFiles("checkout: bill in dollars", map[string]string{
		"payments/checkout/checkout.cue": strings.Replace(string(b), `"EUR"`, `"USD"`, 1),
	})
	p.Tailer.Wake()
	await(t, "the changed file", fileContains(checkout, `"currency":"USD"`))
	await(t, "a reload naming v2", fileContains(log, "payments/checkout 2 "+checkout))
	if !strings.Contains(stdout.String(), `"config":"payments/checkout","version":2`) {
		t.Errorf("stdout lacks the written line for v2: %q", stdout)
	}
	// The agent exports what it runs as a Go service's client does
	// (client/prominfo), for joining the service's series to its version.
	info := fmt.Sprintf(`cuecast_config_info{bucket="%d",config="payments/checkout",cuecast_instance="sidecar-1",variant="",version="2"} 1`,
		cuecast.Cohort("payments", "sidecar-1"))
	await(t, "the info series of v2 at /metrics", func() bool { return strings.Contains(agentMetrics(t, stderr.String()), info) })
	// The last-known-good copies live beside, not in, the service's files.
	if _, err := os.Stat(filepath.Join(out, ".cuecast", "payments", "checkout.lkg")); err != nil {
		t.Errorf("last-known-good copy: %v", err)
	}

	// A config deleted on main disappears from the directory.
	repo.Remove("search/ranking")
	repo.Commit("search: retire ranking")
	p.Tailer.Wake()
	await(t, "ranking.json removed", func() bool {
		_, err := os.Stat(filepath.Join(out, "search", "ranking.json"))
		return os.IsNotExist(err)
	})
}

func TestAgentSignal(t *testing.T) {
	t.Parallel()
	_, p := serveExample(t)
	dir := t.TempDir()
	marker, ready := filepath.Join(dir, "hups"), filepath.Join(dir, "ready")
	// A stand-in service that counts SIGUSR1s, and says when its trap is set.
	// Not SIGHUP: a shell started with SIGHUP ignored (under nohup, as
	// some CI runners start jobs) may not trap it, and then never records
	// the signal the agent did send.
	svc := exec.Command("sh", "-c", `trap 'echo usr1 >> `+marker+`' USR1; echo ok > `+ready+`; while :; do sleep 0.05; done`)
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Process.Kill(); svc.Wait() })
	await(t, "the service's trap", fileContains(ready, "ok"))
	stdout, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-2", "--trusted-key", p.PublicKey,
		"--config", "payments/refunds", "--dir", t.TempDir(),
		"--signal", strconv.Itoa(svc.Process.Pid)+":USR1")
	poll.Until(t, "a SIGUSR1 to the service", 20*time.Second, func() (bool, string) {
		return fileContains(marker, "usr1")(), fmt.Sprintf("agent stdout %q, stderr %q", stdout, stderr)
	})
}

func TestAgentUsage(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no config", []string{"--instance", "a", "--dir", "d"}, "no config to keep"},
		{"no dir", []string{"--instance", "a", "--config", "payments/checkout"}, "no output directory"},
		{"bad signal", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--signal", "12:BOOM"}, "unknown signal"},
		{"no pid", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--signal", "HUP"}, "no process ID"},
		{"exec and signal", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--exec", "true", "--signal", "1:HUP"}, "both given"},
		{"twice", []string{"--instance", "a", "--config", "payments/checkout", "--config", "payments/checkout", "--dir", "d"}, "given twice"},
		// A zero --exec-timeout failed every --exec with "context deadline
		// exceeded"; a negative --quiet ran as none.
		{"exec timeout zero", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--exec", "true", "--exec-timeout", "0s"}, "--exec-timeout 0s: want a positive duration"},
		{"exec timeout negative", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--exec", "true", "--exec-timeout=-1s"}, "--exec-timeout -1s: want a positive duration"},
		{"exec timeout without exec", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--exec-timeout", "5s"}, "--exec-timeout needs --exec"},
		{"quiet negative", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--quiet=-1s"}, "--quiet -1s: want 0 or more"},
		{"bad instance", []string{"--instance", "a b", "--config", "payments/checkout", "--dir", "d"}, "invalid instance id"},
		// Verification is not optional: no keys, no start.
		{"no trusted keys", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d"}, "no trusted keys"},
		{"bad trusted key", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--trusted-key", "BADKEY"}, `--trusted-key "BADKEY" is not a public key`},
		{"insecure and keys", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--insecure-skip-verify", "--trusted-keys-file", "k"}, "both given"},
		// OFREP stays on the host (agent_ofrep.go).
		{"ofrep not loopback", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "0.0.0.0:8080"}, "is not a loopback address"},
		{"ofrep no port", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "127.0.0.1"}, "write it as 127.0.0.1:PORT or unix:PATH"},
		{"ofrep empty socket", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "unix:"}, "no socket path"},
		{"ofrep tokens alone", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep-tokens", "x"}, "--ofrep-tokens needs --ofrep"},
		{"metrics host alone", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--metrics-host", "node1.internal"}, "--metrics-host names the --metrics listener"},
		{"metrics host with a scheme", []string{"--instance", "a", "--config", "payments/checkout", "--dir", "d", "--metrics", "127.0.0.1:9464", "--metrics-host", "https://node1.internal"}, "no scheme or path"},
		// Any user of the host can connect to a loopback port: without tokens
		// that is every namespace's flags, so it takes an explicit choice.
		{"ofrep tcp without tokens", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "127.0.0.1:8016"}, "any user of this host"},
		{"ofrep localhost without tokens", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "localhost:8016"}, "any user of this host"},
		{"ofrep insecure and tokens", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "127.0.0.1:8016", "--ofrep-tokens", "x", "--ofrep-insecure-local"}, "--ofrep-tokens and --ofrep-insecure-local both given"},
		{"ofrep insecure alone", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep-insecure-local"}, "--ofrep-insecure-local needs --ofrep"},
		{"ofrep insecure on a socket", []string{"--instance", "a", "--config", "growth/flags", "--dir", "d", "--ofrep", "unix:/run/app/ofrep.sock", "--ofrep-insecure-local"}, "--ofrep-insecure-local is for a TCP --ofrep"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(context.Background(), append([]string{"agent"}, tc.args...)...)
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("got exit %d, stderr %q; want %d mentioning %q", code, stderr, cli.ExitUsage, tc.want)
			}
		})
	}
}

// agentMetrics reads the /metrics of the agent whose stderr said where it
// serves them.
func agentMetrics(t *testing.T, stderr string) string {
	t.Helper()
	_, rest, ok := strings.Cut(stderr, "serving metrics on ")
	if !ok {
		t.Fatalf("agent did not say where it serves metrics: %q", stderr)
	}
	url, _, _ := strings.Cut(rest, "\n")
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
