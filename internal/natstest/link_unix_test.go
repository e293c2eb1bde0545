//go:build unix

package natstest

import (
	"fmt"
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
	// the lowest free: with the limit just above the lowest free now, the
	// client's socket gets it and the link has none left to accept with.
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
	c, err := net.Dial("tcp", l.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The link's Accept fails (EMFILE) with this connection queued.
	poll.Until(t, "the link out of files", poll.Patience, func() (bool, string) {
		n := l.acceptErrs.Load()
		return n > 0, fmt.Sprintf("%d failed accepts", n)
	})
	restore()
	if got, err := roundTrip(dial(t, l), []byte("ping")); err != nil || string(got) != "ping" {
		t.Fatalf("through the link after running out of files: got %q, %v", got, err)
	}
}
