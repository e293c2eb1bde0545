package cli_test

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/webtest"
)

// ofrepTokensFile writes a tokens file giving token to growth.
func ofrepTokensFile(t *testing.T, token string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ofrep-tokens")
	if err := os.WriteFile(file, []byte("growth "+token+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// httpDo sends method url with a bearer token (none when empty) and returns
// the status and body.
func httpDo(t *testing.T, method, url, token, body string) (int, string) {
	t.Helper()
	code, b := webtest.Do(t, webtest.Request{Method: method, URL: url, Token: token, Body: body})
	return code, string(b)
}

// TestServeOFREPListener: with --ofrep, OFREP has a listener of its own,
// so that services reach the flags without reaching the operations
// server's reads, which need no token: there, /api/overview and the
// dashboard are 404 and OFREP answers a token; --http no longer serves
// OFREP.
func TestServeOFREPListener(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	token := strings.Repeat("g", 40)
	_, stderr, _ := startServe(t, repo.Dir, t.TempDir(), "--http", "127.0.0.1:0", "--ofrep", "127.0.0.1:0",
		"--ofrep-tokens", ofrepTokensFile(t, token), "--interval", "50ms")
	// serve writes the addresses after the NATS line startServe waits for.
	ofrepLine := regexp.MustCompile(`cuecast serve: OFREP at (http://\S+)/ofrep/v1/ .*\n`)
	await(t, "serve's OFREP line", func() bool { return ofrepLine.MatchString(stderr.String()) })
	at := ofrepLine.FindStringSubmatch(stderr.String())
	dash := regexp.MustCompile(`dashboard at (http://\S+)/ `).FindStringSubmatch(stderr.String())
	if at == nil || dash == nil || at[1] == dash[1] {
		t.Fatalf("serve said no OFREP address apart from the dashboard's:\n%s", stderr)
	}
	if strings.Contains(stderr.String(), "without a token") {
		t.Errorf("warned of reads without a token although OFREP has its own listener:\n%s", stderr)
	}
	flag := "/ofrep/v1/evaluate/flags/growth/flags/new-checkout"
	ctx := `{"context": {"targetingKey": "user-1"}}`
	poll.Until(t, "growth/flags over the OFREP listener", poll.Patience, func() (bool, string) {
		code, body := httpDo(t, http.MethodPost, at[1]+flag, token, ctx)
		return code == 200, body
	})
	if code, body := httpDo(t, http.MethodPost, at[1]+flag, "", ctx); code != 401 {
		t.Errorf("OFREP listener without a token: %d %q, want 401", code, body)
	}
	for _, path := range []string{"/api/overview", "/api/versions/growth/flags?version=1", "/", "/metrics"} {
		if code, body := httpDo(t, http.MethodGet, at[1]+path, "", ""); code != 404 {
			t.Errorf("GET %s on the OFREP listener: %d %.200q, want 404", path, code, body)
		}
	}
	if code, body := httpDo(t, http.MethodPost, dash[1]+flag, token, ctx); code != 404 {
		t.Errorf("OFREP on --http beside --ofrep: %d %.200q, want 404", code, body)
	}
	req, err := http.NewRequest(http.MethodPost, at[1]+flag, strings.NewReader(ctx))
	if err != nil {
		t.Fatal(err)
	}
	req.Host = "rebind.attacker.test"
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusMisdirectedRequest {
		t.Errorf("OFREP listener as rebind.attacker.test: %s, want 421", res.Status)
	}
}

// TestServeWarnsOFREPOnHTTP: OFREP on --http, as before --ofrep, still
// works, but whoever reaches it for the flags reads every config without
// a token: serve says so at start, naming --ofrep.
func TestServeWarnsOFREPOnHTTP(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	_, stderr, _ := startServe(t, repo.Dir, t.TempDir(), "--http", "127.0.0.1:0",
		"--ofrep-tokens", ofrepTokensFile(t, strings.Repeat("g", 40)))
	// The warning follows the NATS line startServe waits for.
	await(t, "a warning that OFREP's callers read every config without a token, naming --ofrep ADDR", func() bool {
		s := stderr.String()
		return strings.Contains(s, "warning: OFREP callers reaching --http") && strings.Contains(s, "without a token") && strings.Contains(s, "--ofrep ADDR")
	})
}

// TestServeOFREPUsage: --ofrep serves the tokens' flags, so it needs them,
// and the operations server that samples them.
func TestServeOFREPUsage(t *testing.T) {
	t.Parallel()
	tokens := ofrepTokensFile(t, strings.Repeat("g", 40))
	open := ofrepTokensFile(t, strings.Repeat("g", 40))
	if err := os.Chmod(open, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--http", "127.0.0.1:0", "--ofrep", "127.0.0.1:0"}, "--ofrep-tokens"},
		{[]string{"--ofrep", "127.0.0.1:0", "--ofrep-tokens", tokens}, "--http"},
		{[]string{"--http", "127.0.0.1:0", "--ofrep", "8080", "--ofrep-tokens", tokens}, "--ofrep"},
		{[]string{"--http", "127.0.0.1:0", "--http-max-conns", "0"}, "--http-max-conns 0: want 1 or more"},
		{[]string{"--http-max-conns", "64"}, "--http-max-conns needs --http"},
		// Written under the usual umask: other users of the host could
		// read its tokens (ofrep.ReadTokensFile).
		{[]string{"--http", "127.0.0.1:0", "--ofrep-tokens", open}, "chmod 600 " + open},
	} {
		streams, _, errOut := iostreams.Test()
		args := append([]string{"serve", "--repo", t.TempDir(), "--data", t.TempDir()}, c.args...)
		if code := cli.Main(context.Background(), args, streams, func(string) string { return "" }); code != cli.ExitUsage || !strings.Contains(errOut.String(), c.want) {
			t.Errorf("serve %v: exit %d, stderr %q; want exit %d naming %s", c.args, code, errOut, cli.ExitUsage, c.want)
		}
	}
}
