package natstest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// unjudgedFront stands before target and ends its first logins unjudged,
// as a loaded server does: the first with "-ERR 'Authentication Timeout'"
// after reading the CONNECT, the second by closing before the PONG. Later
// connections pass to target.
func unjudgedFront(t *testing.T, target string) string {
	t.Helper()
	ln := localListener(t)
	go func() {
		for n := 0; ; n++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if n >= 2 {
				go proxy(c, target)
				continue
			}
			go func() {
				defer c.Close()
				if _, err := io.WriteString(c, `INFO {"server_id":"NFRONT","version":"2.15.2","proto":1,"headers":true,"max_payload":1048576}`+"\r\n"); err != nil {
					return
				}
				if _, err := bufio.NewReader(c).ReadString('\n'); err != nil { // CONNECT
					return
				}
				if n == 0 {
					_, _ = io.WriteString(c, "-ERR 'Authentication Timeout'\r\n")
				}
			}()
		}
	}()
	return "nats://" + ln.Addr().String()
}

func proxy(c net.Conn, target string) {
	defer c.Close()
	up, err := net.Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	go func() { _, _ = io.Copy(up, c); up.Close() }()
	_, _ = io.Copy(c, up)
}

// TestDialAsksAgainWhenUnjudged: a login that times out or is closed before
// it was judged is asked again and succeeds; nats.Connect alone fails on
// the first; a refused login (wrong password) returns the refusal at once,
// never taken for a timeout.
func TestDialAsksAgainWhenUnjudged(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "auth.conf")
	if err := os.WriteFile(conf, []byte("host: \"127.0.0.1\"\nport: -1\nauthorization { users: [{user: \"u\", password: \"p\"}] }\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := StartConf(conf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	target := srv.Addr().String()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()

	_, err = nats.Connect(unjudgedFront(t, target), nats.UserInfo("u", "p"))
	if err == nil || !Unjudged(err) {
		t.Fatalf("nats.Connect through an unjudging front: %v, want an unjudged login", err)
	}
	nc, err := Dial(ctx, unjudgedFront(t, target), nats.UserInfo("u", "p"))
	if err != nil {
		t.Fatalf("Dial through two unjudged logins: %v", err)
	}
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	nc.Close()

	_, err = Dial(ctx, unjudgedFront(t, target), nats.UserInfo("u", "wrong"))
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("Dial with a wrong password: %v, want %v", err, nats.ErrAuthorization)
	}
	if Unjudged(err) {
		t.Errorf("a refusal (%v) counted as unjudged", err)
	}
}
