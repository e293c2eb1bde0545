package gittest

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// Real Git servers on loopback for a bare repository: smart HTTP by the real
// `git http-backend`, SSH by a minimal x/crypto/ssh server running the real
// `git upload-pack`. Remote tests of the tailer and of serve's credentials
// share them.

// HTTPBackend returns a handler running `git http-backend` as CGI under
// /git/: the repository is at /git/<base name of bare>.
func HTTPBackend(t testing.TB, bare string) http.Handler {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("find git: %v (the smart HTTP server needs git installed)", err)
	}
	return &cgi.Handler{
		Path: filepath.Join(strings.TrimSpace(string(out)), "git-http-backend"),
		Root: "/git",
		Env:  []string{"GIT_PROJECT_ROOT=" + filepath.Dir(bare), "GIT_HTTP_EXPORT_ALL=1"},
	}
}

// SSHServer is a running SSH Git server that accepts one client key.
type SSHServer struct {
	URL     string // ssh://git@127.0.0.1:<port><bare>
	Addr    string // 127.0.0.1:<port>
	Client  ssh.Signer
	HostKey ssh.PublicKey
}

// ServeSSH serves bare over SSH on loopback until the test ends, accepting
// only the client key client (nil: a newly made one, in SSHServer.Client).
func ServeSSH(t testing.TB, bare string, client ssh.Signer) *SSHServer {
	t.Helper()
	host := NewSSHKey(t)
	if client == nil {
		client = NewSSHKey(t)
	}
	cfg := &ssh.ServerConfig{PublicKeyCallback: func(_ ssh.ConnMetadata, k ssh.PublicKey) (*ssh.Permissions, error) {
		if bytes.Equal(k.Marshal(), client.PublicKey().Marshal()) {
			return nil, nil
		}
		return nil, errors.New("unknown key")
	}}
	cfg.AddHostKey(host)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() { serveSSH(conn, cfg) })
		}
	})
	addr := ln.Addr().String()
	return &SSHServer{URL: "ssh://git@" + addr + bare, Addr: addr, Client: client, HostKey: host.PublicKey()}
}

// NewSSHKey makes an ed25519 SSH key.
func NewSSHKey(t testing.TB) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// WriteSSHKey writes a new ed25519 private key in OpenSSH format (as
// ssh-keygen writes it) to path, 0600, and returns its signer.
func WriteSSHKey(t testing.TB, path string) ssh.Signer {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	blk, err := ssh.MarshalPrivateKey(priv, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, pem.EncodeToMemory(blk), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// KnownHostsLine is the server's line for a known_hosts file.
func (s *SSHServer) KnownHostsLine() string {
	return knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey) + "\n"
}

func serveSSH(conn net.Conn, cfg *ssh.ServerConfig) {
	defer conn.Close()
	sc, chans, reqs, err := ssh.NewServerConn(conn, cfg)
	if err != nil {
		return // a client with the wrong key, or a closed listener
	}
	defer sc.Close()
	go ssh.DiscardRequests(reqs)
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "session only")
			continue
		}
		ch, creqs, err := nc.Accept()
		if err != nil {
			return
		}
		go func() {
			defer ch.Close()
			for req := range creqs {
				if req.Type != "exec" {
					req.Reply(false, nil)
					continue
				}
				var cmd struct{ Command string }
				if err := ssh.Unmarshal(req.Payload, &cmd); err != nil || !strings.HasPrefix(cmd.Command, "git-upload-pack ") {
					req.Reply(false, nil)
					return
				}
				req.Reply(true, nil)
				path := strings.Trim(strings.TrimPrefix(cmd.Command, "git-upload-pack "), "'")
				c := exec.Command("git", "upload-pack", path)
				c.Stdin, c.Stdout, c.Stderr = ch, ch, ch.Stderr()
				status := uint32(0)
				if err := c.Run(); err != nil {
					status = 1
				}
				ch.CloseWrite()
				ch.SendRequest("exit-status", false, binary.BigEndian.AppendUint32(nil, status))
				return
			}
		}()
	}
}

// RequireBasicAuth wraps h so that it answers only requests with HTTP basic
// auth user:password, as a Git host asking for a token does (401 with a
// challenge otherwise).
func RequireBasicAuth(h http.Handler, user, password string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != user || p != password {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
