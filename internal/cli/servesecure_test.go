package cli_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestServeRefusesOpenNonLoopback: an embedded server reachable beyond
// this host without credentials is refused at once, saying what to do.
func TestServeRefusesOpenNonLoopback(t *testing.T) {
	for _, listen := range []string{"0.0.0.0:4222", ":4222", "[::]:4222", "192.0.2.10:4222", "nats.example.com:4222"} {
		t.Run(listen, func(t *testing.T) {
			data := t.TempDir()
			code, _, stderr := run(context.Background(), "serve", "--repo", t.TempDir(), "--data", data, "--listen", listen)
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), "--secure") || !strings.Contains(stderr.String(), listen) {
				t.Errorf("exit %d, stderr %q; want %d naming %s and --secure", code, stderr, cli.ExitUsage, listen)
			}
			if _, err := os.Stat(filepath.Join(data, "jetstream")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("a refused serve created its store: %v", err)
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"secure and insecure", []string{"--secure", "--insecure"}, "--insecure"},
		{"namespace without secure", []string{"--namespace", "payments"}, "--secure"},
		{"secure with external nats", []string{"--secure", "--nats", "nats://127.0.0.1:1"}, "nats-config"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := run(context.Background(), append([]string{"serve", "--data", t.TempDir(), "--listen", "127.0.0.1:0"}, tc.args...)...)
			if code != cli.ExitUsage || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want %d naming %s", code, stderr, cli.ExitUsage, tc.want)
			}
		})
	}
}

// TestServeInsecureWarns: --insecure lets the embedded server listen
// beyond loopback, and says so loudly on every start.
func TestServeInsecureWarns(t *testing.T) {
	// Not a repository: serve stops right after deciding how to listen.
	code, _, stderr := run(context.Background(), "serve", "--repo", t.TempDir(), "--data", t.TempDir(), "--listen", "0.0.0.0:0", "--insecure")
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "WARN") || !strings.Contains(stderr.String(), "--insecure") {
		t.Errorf("exit %d, stderr %q; want the repository refused after a warning naming --insecure", code, stderr)
	}
}

// nonLoopback is an address of this machine beyond loopback, or
// 127.0.0.1 when it has none (the server then listens on loopback, with
// the same generated configuration).
func nonLoopback(t *testing.T) string {
	t.Helper()
	addrs, err := net.InterfaceAddrs()
	if err == nil {
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil && !ipn.IP.IsLoopback() && !ipn.IP.IsLinkLocalUnicast() {
				return ipn.IP.String()
			}
		}
	}
	t.Logf("no non-loopback address: the secure server listens on 127.0.0.1")
	return "127.0.0.1"
}

// TestServeSecure: serve --secure on a non-loopback address refuses
// anonymous connections and commands; the operator's and a service's
// generated passwords, over TLS with the generated CA, work.
func TestServeSecure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	repo := exampleRepo(t)
	data := t.TempDir()
	addr := natstest.FreeAddrOn(t, nonLoopback(t))
	// A directory made beforehand (a copy, a config tool) with an open
	// mode: serve makes it 0700 as it would have made it; it left it open.
	if err := os.Mkdir(filepath.Join(data, cli.EmbeddedSecretsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	secrets := filepath.Join(data, cli.EmbeddedSecretsDir)
	url := "tls://" + addr
	ca := filepath.Join(secrets, "ca.pem")
	// docs/SECURITY.md's lines, as written, with this test's repository,
	// directories and address for the doc's: its serve, then the operator's
	// status and a service's watch, which copied to the service's host its
	// namespace's password file, ca.pem and trusted-keys.
	serveLine, status, watch := securityDocLines(t, map[string]string{
		"https://github.com/acme/configs.git": repo.Dir,
		"/var/lib/cuecast":                    data,
		"0.0.0.0:4222":                        addr,
		"tls://cuecast.example.com:4222":      url,
		"$S/operator.password":                filepath.Join(secrets, "operator.password"),
		"$S/ca.pem":                           ca,
		"svc-payments.password":               filepath.Join(secrets, "svc-payments.password"),
		"ca.pem":                              ca,
		"trusted-keys":                        filepath.Join(data, "trusted-keys"),
	})
	serveDone := make(chan struct{})
	go func() {
		defer close(serveDone)
		code, _, errOut := run(ctx, append(serveLine, "--interval", "20ms")...)
		if code != 0 {
			t.Errorf("serve: exit %d: %s", code, errOut)
		}
	}()
	defer func() { cancel(); <-serveDone }()
	login := func(user string) []string {
		return []string{"--nats", url, "--user", user, "--password-file", filepath.Join(secrets, user+".password"), "--tls-ca", ca}
	}
	poll.Until(t, "status as the operator", 30*time.Second, func() (bool, string) {
		code, o, e := run(ctx, append([]string{"status", "search/ranking"}, login("operator")...)...)
		return code == 0 && strings.Contains(o.String(), "search/ranking"), o.String() + e.String()
	})
	// A refused login or certificate says which, not "is serve running?".
	bad := filepath.Join(t.TempDir(), "bad.password")
	if err := os.WriteFile(bad, []byte("not-the-operator-password-0123456789"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a wrong password", []string{"--nats", url, "--user", "operator", "--password-file", bad, "--tls-ca", ca}, "the server refused the login"},
		{"no CA", []string{"--nats", url, "--user", "operator", "--password-file", filepath.Join(secrets, "operator.password")}, "TLS with the server failed"},
	} {
		code, _, errOut := run(ctx, append([]string{"status"}, tc.args...)...)
		if code != cli.ExitFailure || !strings.Contains(errOut.String(), tc.want) || strings.Contains(errOut.String(), "is `cuecast serve` running") {
			t.Errorf("status with %s: exit %d, stderr %q; want %d saying %q", tc.name, code, errOut, cli.ExitFailure, tc.want)
		}
	}
	for _, f := range []string{"operator.password", "distributor.password", "svc-search.password", "ca-key.pem", "server-key.pem", "nats.conf"} {
		if fi, err := os.Stat(filepath.Join(secrets, f)); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", f, err)
		}
	}
	// docs/SECURITY.md: the directory 0700, every file in it 0600.
	if fi, err := os.Stat(secrets); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%s: %v, want mode 0700", secrets, err)
	}
	entries, err := os.ReadDir(secrets)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if fi, err := e.Info(); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("%s: %v, want mode 0600", e.Name(), err)
		}
	}

	// Anyone else is refused: without a login, with a wrong one, without TLS.
	for _, tc := range []struct {
		name string
		opts []nats.Option
		url  string
	}{
		{"anonymous over TLS", []nats.Option{nats.RootCAs(ca)}, url},
		{"anonymous in plain text", nil, "nats://" + addr},
		{"wrong password", []nats.Option{nats.RootCAs(ca), nats.UserInfo("operator", "guess")}, url},
		{"without the CA", []nats.Option{nats.UserInfo("operator", "guess")}, url},
	} {
		nc, err := nats.Connect(tc.url, append(tc.opts, nats.Timeout(5*time.Second), nats.MaxReconnects(0))...)
		if err == nil {
			nc.Close()
			t.Errorf("%s: connected", tc.name)
		}
	}
	// Plain text for real: nats.go upgrades to TLS when the server asks,
	// so the case above fails on the CA. Spoken by hand, the operator's own
	// password in clear gets no PONG: the server wants TLS first.
	pass, err := os.ReadFile(filepath.Join(secrets, "operator.password"))
	if err != nil {
		t.Fatal(err)
	}
	answer := plainConnect(t, addr, "operator", strings.TrimSpace(string(pass)))
	if !strings.Contains(answer, `"tls_required":true`) || strings.Contains(answer, "PONG") {
		t.Errorf("plain-text CONNECT with the operator's password answered %q; want TLS required and no PONG", answer)
	}
	for _, args := range [][]string{
		{"status", "--nats", url, "--tls-ca", ca},
		{"rollout", "audit", "search/ranking", "--nats", url, "--tls-ca", ca},
		{"rollback", "search/ranking", "--to", "1", "--reason", "x", "--nats", url, "--tls-ca", ca},
		{"status", "--nats", "nats://" + addr},
	} {
		if code, _, _ := run(ctx, args...); code == 0 {
			t.Errorf("%v without a login: exit 0", args)
		}
	}

	// A service of search reads its namespace's mirror in the embedded
	// server, keeping a last-known-good file; then the doc's service.
	out := filepath.Join(t.TempDir(), "ranking.json")
	runWatchUntilCounted(ctx, t, append([]string{"watch", "--namespace-mirror", "--config", "search/ranking", "--instance", "search-canary-1", "--lkg", out,
		"--trusted-keys-file", filepath.Join(data, "trusted-keys")}, login("svc-search")...),
		append([]string{"status", "search/ranking"}, login("operator")...), "search/ranking")
	runWatchUntilCounted(ctx, t, watch, status, "payments/checkout")

	// Without --namespace-mirror the service user may read nothing: watch
	// says so with what to add, not in nats.go's bare lines.
	nctx, stopNoMirror := context.WithCancel(ctx)
	noMirror := &syncBuffer{}
	noMirrorDone := make(chan struct{})
	go func() {
		defer close(noMirrorDone)
		cli.Main(nctx, append([]string{"watch", "--config", "search/ranking", "--instance", "search-canary-2",
			"--trusted-keys-file", filepath.Join(data, "trusted-keys")}, login("svc-search")...),
			&iostreams.IOStreams{In: strings.NewReader(""), Out: noMirror, ErrOut: noMirror}, func(string) string { return "" })
	}()
	poll.Until(t, "watch without --namespace-mirror saying what to add", 30*time.Second, func() (bool, string) {
		s := noMirror.String()
		return strings.Contains(s, "watch search-canary-2: NATS: nats: permissions violation") && strings.Contains(s, "add --namespace-mirror"), s
	})
	stopNoMirror()
	<-noMirrorDone
}

// securityDocLines is docs/SECURITY.md's `serve --secure` line and the
// `status` and `watch` lines after it, as cuecast's arguments, each word
// that subst names replaced (every one of them must occur: a doc that no
// longer says one fails here rather than run something else).
func securityDocLines(t *testing.T, subst map[string]string) (serve, status, watch []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(repoRoot(t), "docs", "SECURITY.md"))
	if err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	var lines [][]string
	for _, l := range commandLines(markdownCode(string(b))) {
		words := shellWords(l)
		if len(words) == 0 || !slices.Contains([]string{"serve", "status", "watch"}, words[0]) || !slices.Contains(words, "--secure") && !slices.Contains(words, "--password-file") {
			continue
		}
		for i, w := range words {
			if v, ok := subst[w]; ok {
				words[i], used[w] = v, true
			}
		}
		lines = append(lines, words)
	}
	for w := range subst {
		if !used[w] {
			t.Errorf("docs/SECURITY.md's serve --secure lines no longer say %q; update securityDocLines' caller", w)
		}
	}
	if len(lines) != 3 || lines[0][0] != "serve" || lines[1][0] != "status" || lines[2][0] != "watch" {
		t.Fatalf("docs/SECURITY.md's serve --secure lines: got %q, want serve, status and watch", lines)
	}
	return lines[0], lines[1], lines[2]
}

// runWatchUntilCounted runs watch (cuecast's arguments) until status
// counts its instance on v1 of config, then stops it.
func runWatchUntilCounted(ctx context.Context, t *testing.T, watch, status []string, config string) {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	log := &syncBuffer{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Every login costs the server a bcrypt comparison, which under
		// -race on a busy machine may outlast a connect timeout: start the
		// watch again until the test ends it.
		for wctx.Err() == nil {
			code := cli.Main(wctx, watch, &iostreams.IOStreams{In: strings.NewReader(""), Out: log, ErrOut: log}, func(string) string { return "" })
			fmt.Fprintf(log, "--- watch exited %d\n", code)
		}
	}()
	poll.Until(t, "the watch applying "+config+" and status counting it", 30*time.Second, func() (bool, string) {
		code, o, e := run(ctx, status...)
		ok := code == 0 && regexp.MustCompile(`(?m)^`+regexp.QuoteMeta(config)+`\s+v1\s+1/1 instances`).MatchString(o.String())
		return ok, o.String() + e.String() + "\nwatch: " + log.String()
	})
	stop()
	<-done
}

// TestConnectionEnvironment: $NATS_URL is every --nats flag's default and
// $CUECAST_NATS_CREDS the default of --creds.
func TestConnectionEnvironment(t *testing.T) {
	creds := filepath.Join(t.TempDir(), "missing.creds")
	env := map[string]string{"NATS_URL": "nats://127.0.0.1:1", "CUECAST_NATS_CREDS": creds}
	for _, tc := range []struct {
		name string
		args []string
		env  []string
		want string
	}{
		{"NATS_URL", []string{"status"}, []string{"NATS_URL"}, "127.0.0.1:1"},
		{"CUECAST_NATS_CREDS", []string{"status", "--nats", "nats://127.0.0.1:1"}, []string{"CUECAST_NATS_CREDS"}, "missing.creds"},
		{"--nats wins over NATS_URL", []string{"rollout", "audit", "a/b", "--nats", "nats://127.0.0.1:2"}, []string{"NATS_URL"}, "127.0.0.1:2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stdout, stderr := &syncBuffer{}, &syncBuffer{}
			io := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
			code := cli.Main(context.Background(), tc.args, io, func(k string) string {
				if slices.Contains(tc.env, k) {
					return env[k]
				}
				return ""
			})
			if code == 0 || !strings.Contains(stderr.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want a failure naming %s", code, stderr, tc.want)
			}
		})
	}
}

// TestServeSecureWildcardListen: the documented `serve --listen
// 0.0.0.0:4222 --secure` (and [::]) starts, although no certificate can
// name an unspecified address: serve's own connection and the URL it
// prints use a loopback address its certificate holds, and a client
// verifies the server with ca.pem.
func TestServeSecureWildcardListen(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, any, loopback string }{
		{"ipv4", "0.0.0.0", "127.0.0.1"},
		{"ipv6", "::", "::1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", net.JoinHostPort(tc.loopback, "0"))
			if err != nil {
				t.Skipf("no %s loopback on this machine: %v", tc.name, err)
			}
			ln.Close()
			_, port, _ := net.SplitHostPort(natstest.FreeAddrOn(t, tc.loopback))
			ctx, cancel := context.WithCancel(t.Context())
			repo, data := exampleRepo(t), t.TempDir()
			serveDone := make(chan struct{})
			var serveOut string
			go func() {
				defer close(serveDone)
				code, _, errOut := run(ctx, "serve", "--repo", repo.Dir, "--data", data, "--interval", "20ms",
					"--listen", net.JoinHostPort(tc.any, port), "--secure")
				serveOut = errOut.String()
				if code != 0 {
					t.Errorf("serve --listen %s --secure: exit %d: %s", net.JoinHostPort(tc.any, port), code, errOut)
				}
			}()
			defer func() { cancel(); <-serveDone }()
			secrets := filepath.Join(data, cli.EmbeddedSecretsDir)
			url := "tls://" + net.JoinHostPort(tc.loopback, port)
			poll.Until(t, "search/ranking published, in status as the operator over TLS with ca.pem", 30*time.Second, func() (bool, string) {
				select {
				case <-serveDone:
					t.Fatalf("serve stopped: %s", serveOut)
				default:
				}
				code, o, e := run(ctx, "status", "search/ranking", "--nats", url, "--user", "operator",
					"--password-file", filepath.Join(secrets, "operator.password"), "--tls-ca", filepath.Join(secrets, "ca.pem"))
				return code == 0 && strings.Contains(o.String(), "search/ranking"), o.String() + e.String()
			})
		})
	}
}

// TestServeAnswersWhatItAnnounces: serve's "dashboard at" line is what a
// person or a supervisor waits for, so the operations server answers by
// the time it is printed. The probe asks for the dashboard while serve is
// still writing the line (its Write returns only after the answer), so
// nothing serve does after announcing can make the answer right. Before
// the fix the operations server was opened only after the line, and
// answered "not ready: starting" in between: TestRunbookDamagedStream's
// webhook push, sent the moment serve announced itself, got that 503
// once in a run instead of the 403 it tests.
func TestServeAnswersWhatItAnnounces(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	probe := &announceProbe{announced: regexp.MustCompile(`cuecast serve: dashboard at (http://\S+/) `), done: cancel}
	errOut := &syncBuffer{}
	streams := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: io.MultiWriter(errOut, probe)}
	args := []string{"serve", "--repo", repo.Dir, "--data", t.TempDir(),
		"--listen", natstest.FreeAddr(t), "--http", natstest.FreeAddr(t), "--interval", "50ms"}
	served := make(chan int, 1)
	go func() { served <- cli.Main(ctx, args, streams, func(string) string { return "" }) }()
	if code := poll.Receive(t, "serve's exit once the probe has asked (it stops serve)", poll.Patience, served); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, errOut)
	}
	probe.mu.Lock()
	defer probe.mu.Unlock()
	if probe.url == "" {
		t.Fatalf("serve never said where its dashboard is\n%s", errOut)
	}
	if probe.err != nil || probe.code != http.StatusOK {
		t.Errorf("GET %s as serve announced it: %d %q (%v), want 200: the dashboard it names", probe.url, probe.code, probe.body, probe.err)
	}
}

// announceProbe asks for the dashboard inside the Write of the line that
// announces it, then stops serve (done).
type announceProbe struct {
	announced *regexp.Regexp
	done      context.CancelFunc

	mu   sync.Mutex
	url  string
	code int
	body string
	err  error
}

func (p *announceProbe) Write(b []byte) (int, error) {
	m := p.announced.FindSubmatch(b)
	if m == nil {
		return len(b), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.url != "" {
		return len(b), nil
	}
	p.url = string(m[1])
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(p.url)
	if err != nil {
		p.err = err
	} else {
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		p.code, p.body = resp.StatusCode, string(body)
	}
	p.done()
	return len(b), nil
}

// plainConnect speaks NATS by hand without TLS: INFO, CONNECT with user and
// pass in clear, PING; it returns everything the server said until it
// closed the connection or a second went by.
func plainConnect(t *testing.T, addr, user, pass string) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	connect, err := json.Marshal(map[string]any{"user": user, "pass": pass, "verbose": false, "pedantic": false, "tls_required": false})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "CONNECT %s\r\nPING\r\n", connect); err != nil {
		return "write: " + err.Error()
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	b, _ := io.ReadAll(c)
	return string(b)
}

// TestServeLogFormatJSON: with --log-format json every line serve writes on
// stderr is one JSON object (docs/OPERATIONS.md), its announcements of where
// NATS, the login, the dashboard and OFREP are included, and none of them
// holds a secret. They were plain text between the JSON records.
func TestServeLogFormatJSON(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	data := t.TempDir()
	tokens := filepath.Join(t.TempDir(), "ofrep-tokens")
	token := strings.Repeat("g", 40)
	if err := os.WriteFile(tokens, []byte("growth "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	errOut := &syncBuffer{}
	streams := &iostreams.IOStreams{In: strings.NewReader(""), Out: io.Discard, ErrOut: errOut}
	args := []string{"serve", "--log-format", "json", "--repo", repo.Dir, "--data", data, "--secure",
		"--listen", natstest.FreeAddr(t), "--http", natstest.FreeAddr(t), "--ofrep-tokens", tokens, "--interval", "50ms"}
	served := make(chan int, 1)
	go func() { served <- cli.Main(ctx, args, streams, func(string) string { return "" }) }()
	poll.Until(t, "serve announcing OFREP, its last announcement", poll.Patience, func() (bool, string) {
		return strings.Contains(errOut.String(), "/ofrep/v1/"), errOut.String()
	})
	cancel()
	if code := poll.Receive(t, "serve's exit", poll.Patience, served); code != 0 {
		t.Fatalf("serve: exit %d\n%s", code, errOut)
	}
	password, err := os.ReadFile(filepath.Join(data, cli.EmbeddedSecretsDir, "operator.password"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(strings.TrimSuffix(errOut.String(), "\n"), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("stderr line %q: %v; want one JSON object a line", line, err)
			continue
		}
		msg, _ := rec["msg"].(string)
		seen[msg]++
		if strings.Contains(line, strings.TrimSpace(string(password))) || strings.Contains(line, token) {
			t.Errorf("stderr line %q holds a secret", line)
		}
	}
	// Each announcement once, with what its text line said.
	for _, msg := range []string{"serving", "nats login", "dashboard", "ofrep"} {
		if seen[msg] != 1 {
			t.Errorf("%d records %q, want 1; stderr:\n%s", seen[msg], msg, errOut)
		}
	}
	for _, want := range []string{`"trusted_keys":`, `"password_file":`, `"tls_ca":`, `"metrics":"http://`, `"url":"http://`} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr has no %s; stderr:\n%s", want, errOut)
		}
	}
}
