package tailer_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	gitconfig "github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/tailer"
)

// TestRemote follows a bare repository through a clone in the data directory,
// over file://, over smart HTTP served by the real `git http-backend`, and
// over SSH with the real `git upload-pack`.
func TestRemote(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		url  func(t *testing.T, bare string) (string, transport.AuthMethod)
	}{
		{name: "file", url: func(t *testing.T, bare string) (string, transport.AuthMethod) { return "file://" + bare, nil }},
		{name: "smart http", url: func(t *testing.T, bare string) (string, transport.AuthMethod) {
			return gitHTTPBackend(t, bare), nil
		}},
		{name: "ssh", url: sshGitServer},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.repo
			c1 := r.CommitFiles("initial", baseRepo())
			bare := r.Bare()
			url, auth := tt.url(t, bare)
			data := t.TempDir()
			cfg := tailer.Config{Repo: url, DataDir: data, ID: "remote", Auth: auth}
			tl := e.tailer(cfg)
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3})

			// A pushed commit is fetched and published.
			c2 := r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
			push(t, r.Git)
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})

			// A restarted tailer reuses its clone and publishes nothing twice.
			c3 := r.CommitFiles("a2", map[string]string{"pay/a/a.cue": config("a", true, 2)})
			push(t, r.Git)
			tl = e.tailer(cfg)
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})
			if _, err := os.Stat(filepath.Join(data, "repos", "remote", "HEAD")); err != nil {
				t.Errorf("clone not in the data directory: %v", err)
			}

			// A force push halts, as for a local repository.
			setBranch(t, r, "main", c2)
			r.Write(map[string]string{"pay/a/a.cue": config("a", true, 1)})
			n1 := r.CommitFiles("rewritten", map[string]string{"web/c/c.cue": config("c", true, 5)})
			push(t, r.Git)
			if _, err := tl.Poll(e.ctx); !errors.Is(err, tailer.ErrRewrite) {
				t.Fatalf("Poll after force push: got %v, want ErrRewrite", err)
			}
			if err := tl.AcceptRewrite(e.ctx, n1); err != nil {
				t.Fatal(err)
			}
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2})
			wantHistory(t, e, map[cuecast.ConfigPath][]string{
				"pay/a": {at(1, c1), at(2, c3), at(3, n1)},
				"pay/b": {at(1, c1), at(2, c2)},
				"web/c": {at(1, c1), at(2, n1)},
			})
		})
	}
}

func push(t *testing.T, r *git.Repository) {
	t.Helper()
	err := r.Push(&git.PushOptions{RemoteName: "origin", Force: true,
		RefSpecs: []gitconfig.RefSpec{"+refs/heads/main:refs/heads/main"}})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		t.Fatalf("push: %v", err)
	}
}

// gitHTTPBackend serves the bare repository over smart HTTP on loopback with
// the real Git server program, run as CGI.
func gitHTTPBackend(t *testing.T, bare string) string {
	t.Helper()
	srv := httptest.NewServer(gittest.HTTPBackend(t, bare))
	t.Cleanup(srv.Close)
	return srv.URL + "/git/" + filepath.Base(bare)
}

// TestRemoteAuth: a remote behind HTTP basic auth needs Config.Auth; without
// it, or with a wrong password, New fails with ErrAuth.
func TestRemoteAuth(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	bare := e.repo.Bare()
	srv := httptest.NewServer(gittest.RequireBasicAuth(gittest.HTTPBackend(t, bare), "x-access-token", "t0ken"))
	t.Cleanup(srv.Close)
	url := srv.URL + "/git/" + filepath.Base(bare)
	tests := []struct {
		name string
		auth transport.AuthMethod
		err  error
	}{
		{name: "none", err: tailer.ErrAuth},
		{name: "wrong", auth: &githttp.BasicAuth{Username: "x-access-token", Password: "nope"}, err: tailer.ErrAuth},
		{name: "right", auth: &githttp.BasicAuth{Username: "x-access-token", Password: "t0ken"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := tailer.Config{Repo: url, DataDir: t.TempDir(), Auth: tt.auth, Logger: e.log}
			tl, err := tailer.New(e.ctx, cfg, e.js, e.dist, e.dist)
			if !errors.Is(err, tt.err) {
				t.Fatalf("New: got %v, want %v", err, tt.err)
			}
			if err == nil {
				wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3})
			}
		})
	}
}

// TestRemoteTokenInURLNotPrinted: a token or password in the repository URL
// (https://TOKEN@host/…, https://user:PASSWORD@host/…) appears in no error,
// log line or stored state: they end up in terminals, CI logs and status
// output. It follows the remote all the same.
func TestRemoteTokenInURLNotPrinted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	bare := e.repo.Bare()
	srv := httptest.NewServer(gittest.RequireBasicAuth(gittest.HTTPBackend(t, bare), "x-access-token", "t0kenSECRET"))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	tests := []struct {
		name, url, secret string
		err               error
	}{
		{name: "password", url: "http://x-access-token:t0kenSECRET@" + host + "/git/" + filepath.Base(bare), secret: "t0kenSECRET"},
		{name: "wrong password", url: "http://x-access-token:wr0ngSECRET@" + host + "/git/" + filepath.Base(bare), secret: "wr0ngSECRET", err: tailer.ErrAuth},
		{name: "bare token", url: "http://ghTOKEN123@" + host + "/git/" + filepath.Base(bare), secret: "ghTOKEN123", err: tailer.ErrAuth},
		{name: "unreachable", url: "https://ghTOKEN123@127.0.0.1:1/acme/x.git", secret: "ghTOKEN123", err: errors.New("any")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var logs bytes.Buffer
			cfg := tailer.Config{Repo: tt.url, DataDir: t.TempDir(), Logger: slog.New(slog.NewTextHandler(&logs, nil))}
			var printed []string
			if err := tailer.CheckRepo(e.ctx, cfg); err != nil {
				printed = append(printed, err.Error())
			}
			tl, err := tailer.New(e.ctx, cfg, e.js, e.dist, e.dist)
			switch {
			case tt.err == nil && err != nil:
				t.Fatalf("New: %v", err)
			case tt.err != nil && err == nil:
				t.Fatalf("New: no error, want one")
			case err != nil:
				if !errors.Is(err, tt.err) && tt.err.Error() != "any" {
					t.Errorf("New: %v, want %v", err, tt.err)
				}
				printed = append(printed, err.Error())
			default:
				wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3})
				st, err := tl.State(e.ctx)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := json.Marshal(st)
				printed = append(printed, string(b))
			}
			printed = append(printed, logs.String())
			for _, p := range printed {
				if strings.Contains(p, tt.secret) {
					t.Errorf("printed the secret %s: %s", tt.secret, p)
				}
			}
		})
	}
}
