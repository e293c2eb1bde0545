package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/flags/ofrep"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/nodetest"
)

var ofrepAddrRE = regexp.MustCompile(`OFREP at (\S+)/ofrep/v1/`)

// ofrepClient posts OFREP requests to an agent, over TCP or its socket.
type ofrepClient struct {
	base string
	hc   *http.Client
}

func agentOFREPClient(t *testing.T, stderr *syncBuffer) ofrepClient {
	t.Helper()
	var where string
	await(t, "the agent's OFREP address", func() bool {
		m := ofrepAddrRE.FindStringSubmatch(stderr.String())
		if m != nil {
			where = m[1]
		}
		return m != nil
	})
	if path, ok := strings.CutPrefix(where, "unix:"); ok {
		return ofrepClient{base: "http://agent", hc: &http.Client{Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, "unix", path)
			}}}}
	}
	return ofrepClient{base: where, hc: http.DefaultClient}
}

func (c ofrepClient) eval(t *testing.T, key, body string, header ...string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.base+"/ofrep/v1/evaluate/flags/"+key, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %q: %v", key, b, err)
	}
	return resp.StatusCode, m
}

// TestAgentOFREP: the agent serves growth/flags over OFREP from its own
// verified copy, as `flags eval` evaluates it (docs/FLAGS.md's user-1 at
// position 97837), on loopback and on a Unix socket; a new version reaches
// it; with tokens, payments' token does not read growth.
func TestAgentOFREP(t *testing.T) {
	repo := exampleRepo(t)
	p := startPipeline(t, repo)
	tokens := filepath.Join(t.TempDir(), "tokens")
	payments, growth := strings.Repeat("p", 40), strings.Repeat("g", 40)
	if err := os.WriteFile(tokens, []byte("payments "+payments+"\ngrowth "+growth+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "ofrep.sock")
	// Each --dir is one the agent makes: under umask 0 a test's temporary
	// directory is writable by all, and the agent refuses that.
	_, tcpErr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-tcp", "--trusted-key", p.PublicKey,
		"--config", "growth/flags", "--config", "payments/checkout", "--dir", t.TempDir(), "--ofrep", "127.0.0.1:0", "--ofrep-insecure-local")
	_, sockErr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-sock", "--trusted-key", p.PublicKey,
		"--config", "growth/flags", "--dir", t.TempDir(), "--ofrep", "unix:"+sock, "--ofrep-tokens", tokens)
	tcp, unix := agentOFREPClient(t, tcpErr), agentOFREPClient(t, sockErr)
	user1 := `{"context": {"targetingKey": "user-1"}}`
	bearer := []string{"Authorization", "Bearer " + growth}

	await(t, "growth/flags over OFREP", func() bool { code, _ := tcp.eval(t, "growth/flags/new-checkout", user1); return code == 200 })
	for name, c := range map[string]struct {
		cl     ofrepClient
		header []string
	}{"loopback": {tcp, nil}, "socket": {unix, bearer}} {
		t.Run(name, func(t *testing.T) {
			await(t, "growth/flags", func() bool {
				code, _ := c.cl.eval(t, "growth/flags/new-checkout", user1, c.header...)
				return code == 200
			})
			_, got := c.cl.eval(t, "growth/flags/new-checkout", user1, c.header...)
			md := got["metadata"].(map[string]any)
			if got["value"] != false || got["variant"] != "off" || got["reason"] != "SPLIT" || md["position"] != 97837.0 || md["version"] != 1.0 {
				t.Errorf("new-checkout for user-1: %v; want false, off, SPLIT at 97837 of growth/flags@1", got)
			}
			code, got := c.cl.eval(t, "growth/flags/results-per-page", `{"context": {"targetingKey": "u", "plan": "pro"}}`, c.header...)
			if code != 200 || got["value"] != 50.0 || got["reason"] != "TARGETING_MATCH" {
				t.Errorf("results-per-page for pro: %d %v", code, got)
			}
			if code, got := c.cl.eval(t, "growth/flags/nope", user1, c.header...); code != 404 || got["errorCode"] != ofrep.CodeFlagNotFound {
				t.Errorf("unknown flag: %d %v", code, got)
			}
		})
	}
	t.Run("docs/FLAGS.md's Node example", func(t *testing.T) {
		src, want := flagsDocNodeExample(t)
		dir := nodetest.Install(t)
		got := nodetest.Run(t.Context(), t, dir, src, "OFREP_ENDPOINT="+tcp.base)
		if got != want {
			t.Errorf("the example printed %q; the doc says %q", got, want)
		}
	})
	t.Run("a config that is not a flag set is not served", func(t *testing.T) {
		if code, got := tcp.eval(t, "payments/checkout/currency", user1); code != 404 || got["errorCode"] != ofrep.CodeFlagNotFound {
			t.Errorf("payments/checkout: %d %v, want 404", code, got)
		}
	})
	t.Run("another namespace's token", func(t *testing.T) {
		if code, _ := unix.eval(t, "growth/flags/new-checkout", user1, "Authorization", "Bearer "+payments); code != 403 {
			t.Errorf("payments' token on growth: %d, want 403", code)
		}
		if code, _ := unix.eval(t, "growth/flags/new-checkout", user1); code != 401 {
			t.Errorf("no token: %d, want 401", code)
		}
	})

	// Raising the rollout to 100% reaches both agents as version 2.
	path := filepath.Join(repo.Dir, "growth", "flags", "flags.cue")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(string(b), `weights: [{variant: "on", weight: 20000}, {variant: "off", weight: 80000}]`,
		`weights: [{variant: "on", weight: 100000}, {variant: "off", weight: 0}]`, 1)
	repo.CommitFiles("growth: new checkout for everyone", map[string]string{"growth/flags/flags.cue": src})
	p.Tailer.Wake()
	for name, c := range map[string]struct {
		cl     ofrepClient
		header []string
	}{"loopback": {tcp, nil}, "socket": {unix, bearer}} {
		await(t, name+": version 2 over OFREP", func() bool {
			_, got := c.cl.eval(t, "growth/flags/new-checkout", user1, c.header...)
			return got["value"] == true && got["metadata"].(map[string]any)["version"] == 2.0
		})
	}
}

// flagsDocNodeExample returns docs/FLAGS.md's Node example ("Other
// languages", "### Node") and the output the doc says it prints.
func flagsDocNodeExample(t *testing.T) (src, output string) {
	t.Helper()
	_, node, ok := strings.Cut(readDoc(t, "FLAGS.md"), "\n### Node\n")
	if !ok {
		t.Fatal("docs/FLAGS.md has no ### Node section")
	}
	_, code, ok1 := strings.Cut(node, "```js\n")
	code, rest, ok2 := strings.Cut(code, "```\n")
	_, out, ok3 := strings.Cut(rest, "```\n")
	out, _, ok4 := strings.Cut(out, "```\n")
	if !ok1 || !ok2 || !ok3 || !ok4 {
		t.Fatal("docs/FLAGS.md's ### Node section: want a js block and its output block")
	}
	return code, out
}

// TestAgentOFREPAnotherUser: the attacker is another user of the agent's
// host (docs/SECURITY.md, "An OFREP caller"). Every user of a host can
// connect to a loopback port, so an agent on TCP serves OFREP only with
// --ofrep-tokens (or --ofrep-insecure-local; without either it does not
// start: TestAgentUsage), and a caller without a token is refused. A Unix
// socket is its owner's and its group's alone (mode 0660), made in a
// private directory and renamed into place, so no other user can connect
// even in the moment between creating and restricting it. The agents run
// under umask 0, and as root the test tries the socket as another user
// (nobody), in a directory that user may enter.
func TestAgentOFREPAnotherUser(t *testing.T) {
	// Not parallel: the umask is the process's.
	old := syscall.Umask(0)
	t.Cleanup(func() { syscall.Umask(old) })
	repo := exampleRepo(t)
	p := startPipeline(t, repo)
	tokens := filepath.Join(t.TempDir(), "tokens")
	growth := strings.Repeat("g", 40)
	if err := os.WriteFile(tokens, []byte("growth "+growth+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sockDir := t.TempDir()
	sock := filepath.Join(sockDir, "ofrep.sock")
	// A socket left by an agent that did not stop cleanly is replaced.
	stale, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	stale.(*net.UnixListener).SetUnlinkOnClose(false)
	stale.Close()
	// Registered before the agents start, so it runs after they stop.
	t.Cleanup(func() {
		if _, err := os.Lstat(sock); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the agent left its socket behind: %v", err)
		}
	})
	// Each --dir is one the agent makes: under umask 0 a test's temporary
	// directory is writable by all, and the agent refuses that.
	_, tcpErr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-tcp", "--trusted-key", p.PublicKey,
		"--config", "growth/flags", "--dir", filepath.Join(t.TempDir(), "out"), "--ofrep", "127.0.0.1:0", "--ofrep-tokens", tokens)
	_, sockErr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-sock", "--trusted-key", p.PublicKey,
		"--config", "growth/flags", "--dir", filepath.Join(t.TempDir(), "out"), "--ofrep", "unix:"+sock)
	tcp, unix := agentOFREPClient(t, tcpErr), agentOFREPClient(t, sockErr)
	user1 := `{"context": {"targetingKey": "user-1"}}`
	await(t, "growth/flags over OFREP", func() bool {
		code, _ := tcp.eval(t, "growth/flags/new-checkout", user1, "Authorization", "Bearer "+growth)
		return code == 200
	})

	t.Run("TCP without a token", func(t *testing.T) {
		for _, h := range [][]string{nil, {"Authorization", "Bearer " + strings.Repeat("x", 40)}, {"X-API-Key", ""}} {
			if code, _ := tcp.eval(t, "growth/flags/new-checkout", user1, h...); code != 401 {
				t.Errorf("single evaluation with %q: %d, want 401", h, code)
			}
		}
		resp, err := http.Post(tcp.base+"/ofrep/v1/evaluate/flags", "application/json", strings.NewReader(user1))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 || strings.Contains(string(body), "new-checkout") {
			t.Errorf("bulk evaluation without a token: %d %q, want 401 and no flags", resp.StatusCode, body)
		}
	})
	t.Run("the socket's mode", func(t *testing.T) {
		fi, err := os.Lstat(sock)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != 0o660 {
			t.Errorf("%s: mode %v, want a socket with mode 0660 (srw-rw----)", sock, fi.Mode())
		}
		entries, err := os.ReadDir(sockDir)
		if err != nil {
			t.Fatal(err)
		}
		if len(entries) != 1 {
			var names []string
			for _, e := range entries {
				names = append(names, e.Name())
			}
			t.Errorf("%s holds %q; want only ofrep.sock (the private directory it was made in is gone)", sockDir, names)
		}
		await(t, "growth/flags over the socket", func() bool { code, _ := unix.eval(t, "growth/flags/new-checkout", user1); return code == 200 })
	})
	t.Run("another user on the socket", func(t *testing.T) {
		if os.Geteuid() != 0 {
			t.Skip("only root can run a process as another user here; the socket's mode is checked above")
		}
		dialAs := otherUserDialer(t, sockDir)
		// The control: a socket anyone may use, in the same directory, is
		// reached, so a refusal below is the agent socket's mode.
		open := filepath.Join(sockDir, "open.sock")
		l, err := net.Listen("unix", open)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		if err := os.Chmod(open, 0o666); err != nil {
			t.Fatal(err)
		}
		if code, out := dialAs(open); code != 0 {
			t.Fatalf("the control: another user could not reach a 0666 socket beside the agent's (exit %d, %s); the test proves nothing", code, out)
		}
		if code, out := dialAs(sock); code != 13 {
			t.Errorf("another user on the agent's socket: exit %d (%s), want 13 (permission denied)", code, out)
		}
	})
	t.Run("a path that is not a socket", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "app.conf")
		if err := os.WriteFile(path, []byte("mine"), 0o644); err != nil {
			t.Fatal(err)
		}
		// Run like startCmd, but stopped here: an agent that took the path
		// over would not exit by itself.
		ctx, cancel := context.WithCancel(t.Context())
		dir := filepath.Join(t.TempDir(), "out") // the agent's own (umask 0)
		stderr, done := &syncBuffer{}, make(chan int, 1)
		go func() {
			streams := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: stderr}
			done <- cli.Main(ctx, []string{"agent", "--nats", p.ClientURL(), "--instance", "sidecar-file", "--trusted-key", p.PublicKey,
				"--config", "growth/flags", "--dir", dir, "--ofrep", "unix:" + path}, streams, func(string) string { return "" })
		}()
		code := -1
		await(t, "the agent to refuse the path or serve on it", func() bool {
			select {
			case code = <-done:
				return true
			default:
				return strings.Contains(stderr.String(), "OFREP at")
			}
		})
		cancel()
		if code == -1 {
			code = <-done
		}
		if b, _ := os.ReadFile(path); code == 0 || string(b) != "mine" || !strings.Contains(stderr.String(), "not a socket") {
			t.Errorf("got exit %d, %s holds %q, stderr %q; want a failure saying it is not a socket, and the file kept", code, path, b, stderr)
		}
	})
}

// otherUserDialer returns a function that runs dial-unix (TestMain) as the
// user nobody (uid and gid 65534, no other groups) on a socket path, with
// its exit code and output. The test binary is linked into a directory
// nobody may read, and dir and its parent (test directories, 0700) are
// opened for it to enter.
func otherUserDialer(t *testing.T, dir string) func(sock string) (int, string) {
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "dial-unix")
	if err := os.Link(self, bin); err != nil {
		b, rerr := os.ReadFile(self)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err := os.WriteFile(bin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(bin) })
	return func(sock string) (int, string) {
		cmd := exec.CommandContext(t.Context(), bin, sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return 0, string(out)
		case errors.As(err, &exit):
			return exit.ExitCode(), string(out)
		default:
			t.Fatalf("run dial-unix as nobody: %v", err)
			return -1, ""
		}
	}
}

// TestAgentOFREPPending: an agent serves OFREP before its watches deliver,
// so a config whose first version has not come (here growth/flagz, which
// no version exists for: a misspelt --config) answers its keys, and a bulk
// evaluation, 500 GENERAL naming it, never the FLAG_NOT_FOUND or the bulk
// answer without its flags that an SDK takes for the truth; growth/flags
// beside it answers once it has come.
func TestAgentOFREPPending(t *testing.T) {
	_, p := serveExample(t)
	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar", "--trusted-key", p.PublicKey,
		"--config", "growth/flags", "--config", "growth/flagz", "--dir", t.TempDir(), "--ofrep", "127.0.0.1:0", "--ofrep-insecure-local")
	c := agentOFREPClient(t, stderr)
	user1 := `{"context": {"targetingKey": "user-1"}}`
	await(t, "growth/flags over OFREP", func() bool { code, _ := c.eval(t, "growth/flags/new-checkout", user1); return code == 200 })
	// The agent says why it waits for growth/flagz; the OFREP error names
	// it.
	await(t, "the agent's word on growth/flagz", func() bool {
		return strings.Contains(stderr.String(), "config growth/flagz does not exist")
	})

	want := "not ready: waiting for the first version of growth/flagz"
	code, got := c.eval(t, "growth/flagz/new-checkout", user1)
	if code != 500 || got["errorCode"] != ofrep.CodeGeneral || got["errorDetails"] != want || got["key"] != "growth/flagz/new-checkout" {
		t.Errorf("a key of growth/flagz: %d %v, want 500 GENERAL %q", code, got, want)
	}
	resp, err := c.hc.Post(c.base+"/ofrep/v1/evaluate/flags", "application/json", strings.NewReader(user1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var bulk map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&bulk); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 500 || bulk["errorCode"] != ofrep.CodeGeneral || bulk["errorDetails"] != want {
		t.Errorf("bulk: %d %v, want 500 GENERAL %q", resp.StatusCode, bulk, want)
	}
}

// TestAgentOFREPRefusesWhatItCannotEvaluate: a verified version of a flag
// set this build cannot evaluate (a newer cuecast's schema) left the
// agent's OFREP serving the version before, said on stderr only, while the
// instance reported itself healthy on the new version: a rollout went on
// to every host, whose SDKs all evaluated the old flags. Now the agent
// refuses it as a service's evaluator does (docs/FLAGS.md, "In a
// service"): the instance keeps the version it has, reports the new one
// failed, and takes the next version it can evaluate.
func TestAgentOFREPRefusesWhatItCannotEvaluate(t *testing.T) {
	repo, p := serveExample(t)
	dir := t.TempDir()
	_, stderr := startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar", "--trusted-key", p.PublicKey, "--heartbeat", "1s",
		"--config", "growth/flags", "--dir", dir, "--ofrep", "127.0.0.1:0", "--ofrep-insecure-local")
	c := agentOFREPClient(t, stderr)
	user1 := `{"context": {"targetingKey": "user-1"}}`
	await(t, "growth/flags over OFREP", func() bool { code, _ := c.eval(t, "growth/flags/new-checkout", user1); return code == 200 })

	// A newer cuecast's flag set: growth without #FlagSet, whose schema
	// field pins cuecast.flags/v1.
	manifest, err := os.ReadFile(filepath.Join(repo.Dir, "cuecast.cue"))
	if err != nil {
		t.Fatal(err)
	}
	repo.Edit("cuecast.cue", "\tschema:      \"github.com/cuecast/cuecast/schemas#FlagSet\"\n", "")
	repo.CommitFiles("growth: a flag set of cuecast.flags/v2", map[string]string{
		"growth/flags/flags.cue": "package flags\n\nschema: \"cuecast.flags/v2\"\nflags: {}\n",
	})
	p.Tailer.Wake()
	awaitReport(t, p, "growth/flags", "sidecar", "sidecar reporting version 2 failed", stderr, func(r cuecast.Report) bool {
		return r.Version == 1 && strings.Contains(r.LastError, "version 2: validation hook: ") &&
			strings.Contains(r.LastError, "unsupported flag schema")
	})
	if code, got := c.eval(t, "growth/flags/new-checkout", user1); code != 200 || got["metadata"].(map[string]any)["version"] != 1.0 {
		t.Errorf("new-checkout: %d %v, want version 1's answer", code, got)
	}
	if fileContains(filepath.Join(dir, "growth", "flags.json"), "cuecast.flags/v2")() {
		t.Error("growth/flags.json holds the version refused")
	}

	// A version it can evaluate is taken.
	repo.CommitFiles("growth: back to cuecast.flags/v1", map[string]string{
		"cuecast.cue":            string(manifest),
		"growth/flags/flags.cue": "package flags\n\nflags: b: {type: \"bool\", variants: {on: true, off: false}, on: true, offVariant: \"off\", defaultVariant: \"on\"}\n",
	})
	p.Tailer.Wake()
	awaitReport(t, p, "growth/flags", "sidecar", "sidecar reporting version 3 healthy", stderr, func(r cuecast.Report) bool {
		return r.Version == 3 && r.Healthy && r.LastError == ""
	})
	if code, got := c.eval(t, "growth/flags/b", user1); code != 200 || got["value"] != true {
		t.Errorf("b: %d %v, want true", code, got)
	}
}
