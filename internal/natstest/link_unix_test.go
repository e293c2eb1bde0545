//go:build unix

package natstest

import (
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/cuecast/cuecast/internal/poll"
)

// TestLinkAcceptsAfterRunningOutOfFiles: a Link whose process runs out of
// file descriptors refuses what it cannot take and accepts again once
// there are some. Its accept loop ended at the first error, so a test that
// ran out (5,000 instances through a Link) lost the link for good.
func TestLinkAcceptsAfterRunningOutOfFiles(t *testing.T) {
	l := StartLink(t, echo(t))
	var was syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
		t.Fatal(err)
	}
	// A descriptor's number must be below the limit, and a new one takes
	// the lowest free: the limit goes just above the lowest free now, and
	// the check below keeps every descriptor under it taken but the
	// client's.
	probe, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	free := probe.Fd()
	probe.Close()
	low := was
	low.Cur = uint64(free) + 1
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &low); err != nil {
		t.Fatal(err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &was); err != nil {
				t.Fatal(err)
			}
		}
	}
	defer restore()
	// Every descriptor free below the limit is taken and one given back
	// for the client's socket, so the link has none to accept with; again
	// at each check, because another goroutine of this test binary (a
	// server of an earlier test still closing its sockets) may free one,
	// which the link's Accept then took (under go test -p 3 it did, and
	// this test waited for a failed accept that never came).
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close()
		}
	}()
	poll.Until(t, "the link out of files", poll.Patience, func() (bool, string) {
		if n := l.acceptErrs.Load(); n > 0 {
			return true, ""
		}
		for {
			f, err := os.Open(os.DevNull)
			if err != nil {
				break
			}
			held = append(held, f)
		}
		if n := len(held); n > 0 {
			held[n-1].Close()
			held = held[:n-1]
		}
		if c, err := net.Dial("tcp", l.Addr()); err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return false, "no failed accept yet"
	})
	restore()
	if got, err := roundTrip(dial(t, l), []byte("ping")); err != nil || string(got) != "ping" {
		t.Fatalf("through the link after running out of files: got %q, %v", got, err)
	}
}
