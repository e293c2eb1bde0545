package cli_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestAgentExec: what --exec is given and what a timeout leaves behind.
// The agent here keeps a variant (search/ranking, env=prod), which it
// writes at the config's file: $CUECAST_FILE named the variant's path
// instead, a file that does not exist, so a reload script reading it
// failed and the instance went unhealthy. The command inherited the
// agent's environment with $CUECAST_NATS_PASSWORD in it, and then with
// $CUECAST_GIT_TOKEN, $GITHUB_TOKEN and the like. And a timed-out
// command's children lived on: only the shell was killed.
// Not parallel: it sets the agent's environment (t.Setenv).
func TestAgentExec(t *testing.T) {
	const secret = "S3cret-in-the-environment"
	// Every variable cuecast reads a secret from, each with the secret in it.
	for _, name := range []string{"CUECAST_NATS_PASSWORD", "CUECAST_GIT_TOKEN", "CUECAST_GIT_SSH_PASSPHRASE", "CUECAST_OPERATOR_TOKEN",
		"CUECAST_WEBHOOK_SECRET", "GITHUB_TOKEN"} {
		t.Setenv(name, secret+"-"+name)
	}
	t.Setenv("CUECAST_PROMETHEUS_URL", "http://prom:"+secret+"@127.0.0.1:1")
	t.Setenv("NATS_URL", "nats://agent:"+secret+"@127.0.0.1:1")
	repo := variantRepo(t)
	p := startPipeline(t, repo)
	out, logs := t.TempDir(), t.TempDir()
	env, child := filepath.Join(logs, "env"), filepath.Join(logs, "child")
	// The first run (v1) records its environment and starts a child that
	// would outlive it; the timeout ends both.
	script := `env > ` + env + `.tmp && mv ` + env + `.tmp ` + env + `; sleep 300 & echo $! > ` + child + `; wait`
	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-1", "--trusted-key", p.PublicKey, "--heartbeat", "1s",
		"--config", "search/ranking", "--dir", out, "--variant", "env=prod", "--exec", script, "--exec-timeout", "1s")
	want := filepath.Join(out, "search", "ranking.json")
	await(t, "the prod variant at the config's file", fileContains(want, `"env":"prod"`))
	await(t, "the command's environment", func() bool { _, err := os.Stat(env); return err == nil })
	b, err := os.ReadFile(env)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "CUECAST_FILE="+want+"\n") {
		t.Errorf("$CUECAST_FILE is not %s, the file the agent wrote:\n%s", want, grepLines(string(b), "CUECAST_"))
	}
	if strings.Contains(string(b), secret) {
		t.Errorf("the command got the agent's secrets:\n%s", grepLines(string(b), secret))
	}
	await(t, "the timeout said", func() bool { return strings.Contains(stderr.String(), "--exec") })
	pid := 0
	await(t, "the child's pid", func() bool {
		b, err := os.ReadFile(child)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && pid > 0
	})
	await(t, "the timed-out command's child gone", func() bool { return !running(pid) })
	// Why the instance is unhealthy reaches its report, and status, without
	// the command, which may hold a secret.
	awaitReport(t, p, "search/ranking/env=prod", "sidecar-1", "sidecar-1 reporting the failed --exec", stderr, func(r cuecast.Report) bool {
		return !r.Healthy && r.LastError == "--exec timed out after 1s"
	})
	poll.Until(t, "status showing why sidecar-1 is unhealthy", poll.Patience, func() (bool, string) {
		_, out, errOut := run(t.Context(), "status", "--nats", p.ClientURL(), "search/ranking/env=prod")
		return strings.Contains(out.String(), "sidecar-1 on v1: --exec timed out after 1s"), out.String() + errOut.String()
	})
}

// grepLines is the lines of s that hold sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// running says whether process pid exists and is not a zombie (a killed
// orphan whose parent, PID 1 here, does not reap it still has an entry).
func running(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	// pid (comm) state …: the state follows the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}
