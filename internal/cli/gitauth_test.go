package cli_test

import (
	"context"
	"encoding/pem"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestServePrivateRepo: serve follows a private repository over https with
// a token (from a file or the environment, never a flag value) and over
// ssh with a deploy key checked against known_hosts, each against a real
// local Git server (git http-backend behind TLS and basic auth; an
// x/crypto/ssh server running git upload-pack). A wrong credential or an
// unknown host key exits 2 saying which, and creates no store (issue 33,
// item 13: nothing let serve authenticate at all).
func TestServePrivateRepo(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	bare := repo.Bare()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}

	https := httptest.NewTLSServer(gittest.RequireBasicAuth(gittest.HTTPBackend(t, bare), "x-access-token", "t0ken"))
	t.Cleanup(https.Close)
	httpsURL := https.URL + "/git/" + filepath.Base(bare)
	ca := write("ca.pem", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: https.Certificate().Raw})))
	token, wrongToken := write("token", "t0ken\n"), write("wrong-token", "guess\n")

	key := filepath.Join(dir, "deploy-key")
	ssh := gittest.ServeSSH(t, bare, gittest.WriteSSHKey(t, key))
	otherKey := filepath.Join(dir, "other-key")
	gittest.WriteSSHKey(t, otherKey)
	known := write("known_hosts", ssh.KnownHostsLine())
	impostor := &gittest.SSHServer{Addr: ssh.Addr, HostKey: gittest.NewSSHKey(t).PublicKey()}
	knownOther := write("known_hosts.other", impostor.KnownHostsLine())

	t.Run("refused", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			args []string
			want string
		}{
			{"https without credentials", []string{"--repo", httpsURL, "--git-ca", ca}, "no credentials (pass --git-token-file"},
			{"https wrong token", []string{"--repo", httpsURL, "--git-ca", ca, "--git-token-file", wrongToken}, "refused the token in " + wrongToken},
			{"https unknown CA", []string{"--repo", httpsURL, "--git-token-file", token}, "certificate"},
			{"ssh wrong key", []string{"--repo", ssh.URL, "--git-ssh-key", otherKey, "--git-known-hosts", known}, "refused the key " + otherKey},
			{"ssh host key changed", []string{"--repo", ssh.URL, "--git-ssh-key", key, "--git-known-hosts", knownOther}, "host key is not in --git-known-hosts"},
			{"ssh without known_hosts", []string{"--repo", ssh.URL, "--git-ssh-key", key, "--git-known-hosts", filepath.Join(dir, "nowhere")}, "no known_hosts"},
			{"token for ssh", []string{"--repo", ssh.URL, "--git-token-file", token}, "not an https URL"},
			{"key for https", []string{"--repo", httpsURL, "--git-ssh-key", key}, "not an ssh URL"},
			{"empty token file", []string{"--repo", httpsURL, "--git-token-file", write("empty", "\n")}, "is empty"},
		} {
			t.Run(tc.name, func(t *testing.T) {
				data := filepath.Join(t.TempDir(), "data")
				code, _, stderr := run(t.Context(), append([]string{"serve", "--data", data, "--listen", "127.0.0.1:0"}, tc.args...)...)
				if code == 0 || !strings.Contains(stderr.String(), tc.want) {
					t.Fatalf("exit %d, stderr %q; want a failure saying %q", code, stderr, tc.want)
				}
				if tc.name != "https unknown CA" && code != cli.ExitUsage {
					t.Errorf("exit %d, want %d (fixed by other credentials, not retried)", code, cli.ExitUsage)
				}
				if _, err := os.Stat(data); err == nil {
					t.Error("serve refused its repository's credentials but created --data first")
				}
			})
		}
	})

	serves := func(t *testing.T, getenv func(string) string, args ...string) {
		t.Helper()
		ctx, cancel := context.WithCancel(t.Context())
		addr := natstest.FreeAddr(t)
		done := make(chan struct{})
		go func() {
			defer close(done)
			stderr := &syncBuffer{}
			io := &iostreams.IOStreams{In: strings.NewReader(""), Out: &syncBuffer{}, ErrOut: stderr}
			if code := cli.Main(ctx, append([]string{"serve", "--data", t.TempDir(), "--listen", addr, "--interval", "50ms"}, args...), io, getenv); code != 0 {
				t.Errorf("serve: exit %d: %s", code, stderr)
			}
		}()
		defer func() { cancel(); <-done }()
		poll.Until(t, "the private repository's configs published", 30*time.Second, func() (bool, string) {
			code, o, e := run(ctx, "status", "payments/checkout", "--nats", "nats://"+addr)
			return code == 0 && strings.Contains(o.String(), "payments/checkout"), o.String() + e.String()
		})
	}
	noEnv := func(string) string { return "" }
	t.Run("https token file", func(t *testing.T) {
		serves(t, noEnv, "--repo", httpsURL, "--git-ca", ca, "--git-token-file", token)
	})
	t.Run("https token from the environment", func(t *testing.T) {
		serves(t, func(k string) string {
			if k == "CUECAST_GIT_TOKEN" {
				return "t0ken"
			}
			return ""
		}, "--repo", httpsURL, "--git-ca", ca)
	})
	t.Run("ssh deploy key", func(t *testing.T) {
		serves(t, noEnv, "--repo", ssh.URL, "--git-ssh-key", key, "--git-known-hosts", known)
	})
}
