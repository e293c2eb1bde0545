package httpsrv_test

import (
	"bufio"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/httpsrv"
	"github.com/cuecast/cuecast/internal/poll"
)

// logLines is a slog destination that hands each line to the test.
type logLines chan string

func (l logLines) Write(p []byte) (int, error) {
	select {
	case l <- string(p):
	default:
	}
	return len(p), nil
}

// serve serves h under lim on a loopback port until the test ends; it
// returns the address, the server's log lines and each accepted connection's
// remote address.
func serve(t *testing.T, h http.Handler, lim httpsrv.Limits) (addr string, logs logLines, accepted chan string) {
	t.Helper()
	logs, accepted = make(logLines, 100), make(chan string, 100)
	srv := httpsrv.New(h, lim, slog.New(slog.NewTextHandler(logs, nil)))
	srv.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted <- c.RemoteAddr().String()
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), logs, accepted
}

var ok = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") })

// dribble opens a connection to addr and sends the start of a request's
// headers, never their end, as a slowloris client does.
func dribble(t *testing.T, addr string) net.Conn {
	return send(t, addr, "GET / HTTP/1.1\r\nHost: "+addr+"\r\nX-Slow: a")
}

// send opens a connection to addr, closed when the test ends, and writes
// text on it.
func send(t *testing.T, addr, text string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, text); err != nil {
		t.Fatal(err)
	}
	return c
}

// get asks addr for / on a connection of its own, in the background; it
// sends the status, or why none came.
func get(addr string) <-chan string {
	got := make(chan string, 1)
	go func() {
		cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		res, err := cl.Get("http://" + addr + "/")
		if err != nil {
			got <- err.Error()
			return
		}
		res.Body.Close()
		got <- res.Status
	}()
	return got
}

// closedByServer reads c in the background and says what ended the read:
// the server closing the connection (EOF), or what it sent.
func closedByServer(c net.Conn) <-chan string {
	got := make(chan string, 1)
	go func() {
		b, err := io.ReadAll(c)
		got <- string(b) + "|" + errString(err)
	}()
	return got
}

func errString(err error) string {
	if err == nil {
		return "EOF"
	}
	return err.Error()
}

// TestConnectionCap: a local client holding MaxConns connections with
// unfinished headers makes the next connection wait, not take another
// goroutine; the server says so in its log, and the waiting client is
// answered once a connection is freed. Headers are given an hour, so only
// the cap can hold the legitimate client back.
func TestConnectionCap(t *testing.T) {
	addr, logs, accepted := serve(t, ok, httpsrv.Limits{MaxConns: 2, ReadHeaderTimeout: time.Hour})
	a := dribble(t, addr)
	dribble(t, addr)
	for range 2 {
		poll.Receive(t, "the attacker's connections accepted", poll.Patience, accepted)
	}
	answer := get(addr)
	select {
	case got := <-answer:
		t.Fatalf("a client beyond the cap got %q while the attacker held every connection; want it to wait", got)
	case line := <-logs:
		if !strings.Contains(line, "connection limit") || !strings.Contains(line, "max_conns=2") {
			t.Errorf("log: %s, want the connection limit reached with max_conns=2", line)
		}
	case <-time.After(poll.Patience):
		t.Fatal("neither an answer nor a log line about the connection limit")
	}
	a.Close()
	if got := poll.Receive(t, "the answer once a connection was freed", poll.Patience, answer); got != "200 OK" {
		t.Errorf("got %q, want 200 OK", got)
	}
}

// TestSlowloris: more slowloris connections than the cap, each sending the
// start of its headers and never the end; each is closed after
// ReadHeaderTimeout without an answer, and a legitimate client that came
// after them is answered.
func TestSlowloris(t *testing.T) {
	addr, _, _ := serve(t, ok, httpsrv.Limits{MaxConns: 2, ReadHeaderTimeout: 50 * time.Millisecond})
	var ended []<-chan string
	for range 4 {
		ended = append(ended, closedByServer(dribble(t, addr)))
	}
	answer := get(addr)
	for i, e := range ended {
		if got := poll.Receive(t, "the slowloris connection closed", poll.Patience, e); got != "|EOF" {
			t.Errorf("slowloris connection %d: read %q, want closed with nothing sent", i, got)
		}
	}
	if got := poll.Receive(t, "the legitimate client's answer", poll.Patience, answer); got != "200 OK" {
		t.Errorf("got %q, want 200 OK", got)
	}
}

// TestWriteTimeout: a client that asks for a long reply and never reads
// it holds its connection only until a write has waited WriteTimeout; the
// write fails, the connection closes, and with it the only slot (MaxConns
// 1) goes to the next client.
func TestWriteTimeout(t *testing.T) {
	writeErr := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/big" {
			io.WriteString(w, "ok")
			return
		}
		chunk := make([]byte, 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				writeErr <- err
				return
			}
		}
	})
	addr, _, _ := serve(t, h, httpsrv.Limits{MaxConns: 1, WriteTimeout: 50 * time.Millisecond})
	send(t, addr, "GET /big HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	if err := poll.Receive(t, "the write to a client that does not read failing", poll.Patience, writeErr); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("write: %v, want a timeout", err)
	}
	if got := poll.Receive(t, "the next client's answer", poll.Patience, get(addr)); got != "200 OK" {
		t.Errorf("got %q, want 200 OK", got)
	}
}

// TestIdleTimeout: a keep-alive connection that sends nothing after its
// answer is closed after IdleTimeout.
func TestIdleTimeout(t *testing.T) {
	addr, _, _ := serve(t, ok, httpsrv.Limits{IdleTimeout: 50 * time.Millisecond})
	c := send(t, addr, "GET / HTTP/1.1\r\nHost: "+addr+"\r\n\r\n")
	br := bufio.NewReader(c)
	res, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Close {
		t.Fatalf("%s, close %v: want 200 on a kept connection", res.Status, res.Close)
	}
	ended := make(chan string, 1)
	go func() {
		b, err := io.ReadAll(br)
		ended <- string(b) + "|" + errString(err)
	}()
	if got := poll.Receive(t, "the idle connection closed", poll.Patience, ended); got != "|EOF" {
		t.Errorf("idle connection: read %q, want closed with nothing sent", got)
	}
}

// TestMaxHeaderBytes: headers beyond MaxHeaderBytes are refused with 431.
func TestMaxHeaderBytes(t *testing.T) {
	addr, _, _ := serve(t, ok, httpsrv.Limits{MaxHeaderBytes: 1 << 10})
	for _, c := range []struct {
		size int
		want int
	}{{100, http.StatusOK}, {8 << 10, http.StatusRequestHeaderFieldsTooLarge}} {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/", nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Big", strings.Repeat("x", c.size))
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != c.want {
			t.Errorf("a %d-byte header: %s, want %d", c.size, res.Status, c.want)
		}
	}
}
