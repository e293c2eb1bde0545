package tailer_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/tailer"
)

// sshGitServer serves the bare repository over SSH on loopback
// (gittest.ServeSSH) and returns the ssh:// URL and the client's auth, which
// pins the server's host key.
func sshGitServer(t *testing.T, bare string) (string, transport.AuthMethod) {
	t.Helper()
	srv := gittest.ServeSSH(t, bare, nil)
	auth := &gitssh.PublicKeys{User: "git", Signer: srv.Client,
		HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.FixedHostKey(srv.HostKey)}}
	return srv.URL, auth
}

// TestSSHWrongKey: a key the server does not accept is ErrAuth.
func TestSSHWrongKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	url, _ := sshGitServer(t, e.repo.Bare())
	auth := &gitssh.PublicKeys{User: "git", Signer: gittest.NewSSHKey(t),
		HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.InsecureIgnoreHostKey()}}
	_, err := tailer.New(e.ctx, tailer.Config{Repo: url, DataDir: t.TempDir(), Auth: auth}, e.js, e.dist, e.dist)
	if !errors.Is(err, tailer.ErrAuth) {
		t.Fatalf("New with a wrong key: got %v, want ErrAuth", err)
	}
}

// TestSSHHostKeyNotKnown: a server whose host key known_hosts does not list
// (unknown, or listed with another key: someone in between) is ErrHostKey,
// not an authentication failure, and nothing is fetched.
func TestSSHHostKeyNotKnown(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	srv := gittest.ServeSSH(t, e.repo.Bare(), nil)
	impostor := &gittest.SSHServer{Addr: srv.Addr, HostKey: gittest.NewSSHKey(t).PublicKey()}
	for name, known := range map[string]string{"unknown": "", "changed": impostor.KnownHostsLine()} {
		t.Run(name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "known_hosts")
			if err := os.WriteFile(file, []byte(known), 0o600); err != nil {
				t.Fatal(err)
			}
			cb, err := gitssh.NewKnownHostsCallback(file)
			if err != nil {
				t.Fatal(err)
			}
			auth := &gitssh.PublicKeys{User: "git", Signer: srv.Client, HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: cb}}
			_, err = tailer.New(e.ctx, tailer.Config{Repo: srv.URL, DataDir: t.TempDir(), Auth: auth}, e.js, e.dist, e.dist)
			if !errors.Is(err, tailer.ErrHostKey) {
				t.Fatalf("New against a host key known_hosts does not list: got %v, want ErrHostKey", err)
			}
		})
	}
}
