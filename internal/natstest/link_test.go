package natstest

import (
	"bytes"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"
)

// localListener listens on a free local port until the test ends.
func localListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// echo serves TCP connections that send back what they read.
func echo(t *testing.T) string {
	t.Helper()
	ln := localListener(t)
	go func() {
		for {
			c, err := ln.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil { // out of files (TestLinkAcceptsAfterRunningOutOfFiles)
				time.Sleep(10 * time.Millisecond)
				continue
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, l *Link) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes b and reads it back whole.
func roundTrip(c net.Conn, b []byte) ([]byte, error) {
	errc := make(chan error, 1)
	go func() { _, err := c.Write(b); errc <- err }()
	got := make([]byte, len(b))
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.ReadFull(c, got)
	if werr := <-errc; err == nil {
		err = werr
	}
	return got, err
}

// TestLinkDelay: a round trip through a delayed link takes at least both
// one-way delays (a lower bound only: a loaded machine only adds), and
// jittered chunks arrive whole and in order.
func TestLinkDelay(t *testing.T) {
	l := StartLink(t, echo(t))
	l.Delay(30*time.Millisecond, 20*time.Millisecond, 0)
	c := dial(t, l)
	began := time.Now()
	if got, err := roundTrip(c, []byte("ping")); err != nil || string(got) != "ping" {
		t.Fatalf("round trip: %q, %v", got, err)
	}
	if took := time.Since(began); took < 50*time.Millisecond {
		t.Errorf("round trip took %s through 30ms up and 20ms down", took)
	}

	l.Delay(time.Millisecond, time.Millisecond, 5*time.Millisecond)
	payload := make([]byte, 1<<20)
	if _, err := rand.Read(payload); err != nil {
		t.Fatal(err)
	}
	got, err := roundTrip(c, payload)
	if err != nil {
		t.Fatalf("1 MiB through a jittered link: %v", err)
	}
	if !bytes.Equal(got, payload) {
		t.Fatalf("1 MiB through a jittered link came back reordered or damaged")
	}

	l.Delay(0, 0, 0)
	if got, err := roundTrip(c, []byte("pong")); err != nil || string(got) != "pong" {
		t.Fatalf("round trip without delay: %q, %v", got, err)
	}
}

// TestLinkResetCut: Reset aborts the open connection and a new one goes
// through; Cut also refuses new ones until Heal.
func TestLinkResetCut(t *testing.T) {
	l := StartLink(t, echo(t))
	c := dial(t, l)
	if _, err := roundTrip(c, []byte("a")); err != nil {
		t.Fatal(err)
	}
	if n := l.Reset(); n != 1 {
		t.Errorf("Reset reset %d connections, want 1", n)
	}
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a reset connection: %v, want it closed", err)
	}
	if got, err := roundTrip(dial(t, l), []byte("b")); err != nil || string(got) != "b" {
		t.Fatalf("new connection after Reset: %q, %v", got, err)
	}

	l.Cut()
	if _, err := roundTrip(dial(t, l), []byte("c")); err == nil {
		t.Fatal("a connection through a cut link carried data")
	}
	l.Heal()
	if got, err := roundTrip(dial(t, l), []byte("d")); err != nil || string(got) != "d" {
		t.Fatalf("new connection after Heal: %q, %v", got, err)
	}
}

// TestLinkResetAfter: an armed reset lets exactly its budget through, tears
// the stream there, and disarms itself.
func TestLinkResetAfter(t *testing.T) {
	l := StartLink(t, echo(t))
	c := dial(t, l)
	l.ResetAfter(10)
	got, err := roundTrip(c, bytes.Repeat([]byte("x"), 100))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("100 bytes through a link armed to reset after 10: %v, want the connection reset", err)
	}
	if n := bytes.Count(got, []byte("x")); n > 10 {
		t.Errorf("%d bytes came back through a link armed to reset after 10", n)
	}
	if got, err := roundTrip(dial(t, l), []byte("after")); err != nil || string(got) != "after" {
		t.Fatalf("new connection after the armed reset fired: %q, %v", got, err)
	}

	l.ResetAfter(5)
	l.ResetAfter(-1)
	if got, err := roundTrip(dial(t, l), []byte("disarmed")); err != nil || string(got) != "disarmed" {
		t.Fatalf("through a disarmed link: %q, %v", got, err)
	}
}

// TestLinkStall: a stalled direction holds its data while the other flows,
// delivers it in order once unstalled, and a cut ends a stalled connection.
func TestLinkStall(t *testing.T) {
	ln := localListener(t)
	accepted := make(chan net.Conn, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.Cleanup(func() { c.Close() })
			accepted <- c
		}
	}()
	l := StartLink(t, ln.Addr().String())
	c := dial(t, l)
	srv := <-accepted

	l.Stall(false, true) // the way back is held
	if _, err := c.Write([]byte("up")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 2)
	_ = srv.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(srv, got); err != nil || string(got) != "up" {
		t.Fatalf("the open direction carried %q, %v", got, err)
	}
	if _, err := srv.Write([]byte("do")); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Write([]byte("wn")); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the stalled direction delivered %q, %v", got[:n], err)
	}
	l.Unstall()
	got = make([]byte, 4)
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "down" {
		t.Fatalf("after Unstall: %q, %v, want what was held, in order", got, err)
	}

	l.Stall(true, false)
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	l.Cut() // must end the stalled connection, and Close must not hang on it
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(got); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("read on a cut stalled connection: %v, want it closed", err)
	}
	l.Close()
}

// TestLinkStallBackOn: the way back flows until a chunk sent up carries
// the marker; from then on it is held (the answer to that chunk
// included) while the way up flows, until Unstall.
func TestLinkStallBackOn(t *testing.T) {
	l := StartLink(t, echo(t))
	c := dial(t, l)
	l.StallBackOn([]byte("MARK"))
	if got, err := roundTrip(c, []byte("before")); err != nil || string(got) != "before" {
		t.Fatalf("before the marker: %q, %v", got, err)
	}
	if _, err := c.Write([]byte("the MARK")); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, 8)
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if n, err := c.Read(got); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("the answer to the marked chunk came back: %q, %v", got[:n], err)
	}
	l.Unstall()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "the MARK" {
		t.Fatalf("after Unstall: %q, %v, want the held answer", got, err)
	}
	if got, err := roundTrip(c, []byte("again MARK")); err != nil || string(got) != "again MARK" {
		t.Fatalf("a second marked chunk, the marker spent: %q, %v", got, err)
	}
}
