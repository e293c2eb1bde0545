package tailer_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"

	"github.com/cuecast/cuecast/tailer"
)

// sshGitServer serves the bare repository over SSH on loopback: a minimal
// server (golang.org/x/crypto/ssh) that accepts one client key and runs the
// real `git upload-pack` for "exec git-upload-pack '<path>'". It returns the
// ssh:// URL and the client's auth, which pins the server's host key.
func sshGitServer(t *testing.T, bare string) (string, transport.AuthMethod) {
	t.Helper()
	signer := func() ssh.Signer {
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
	host, client := signer(), signer()
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
	auth := &gitssh.PublicKeys{User: "git", Signer: client,
		HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.FixedHostKey(host.PublicKey())}}
	return "ssh://git@" + ln.Addr().String() + bare, auth
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

// TestSSHWrongKey: a key the server does not accept is ErrAuth.
func TestSSHWrongKey(t *testing.T) {
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	url, _ := sshGitServer(t, e.repo.Bare())
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	auth := &gitssh.PublicKeys{User: "git", Signer: other,
		HostKeyCallbackHelper: gitssh.HostKeyCallbackHelper{HostKeyCallback: ssh.InsecureIgnoreHostKey()}}
	_, err = tailer.New(e.ctx, tailer.Config{Repo: url, DataDir: t.TempDir(), Auth: auth}, e.js, e.dist, e.dist)
	if !errors.Is(err, tailer.ErrAuth) {
		t.Fatalf("New with a wrong key: got %v, want ErrAuth", err)
	}
}
