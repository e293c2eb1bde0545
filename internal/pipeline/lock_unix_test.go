//go:build unix

package pipeline

import (
	"errors"
	"syscall"
	"testing"
)

// TestDataDirFreeAfterClose: a pipeline closed in this process gives its
// data directory up at once, even while another copy of the lock file's
// descriptor lives on. A child this process forks (another goroutine's
// exec) holds a copy from fork until exec; the flock is the open file's,
// so closing ours left it held, and a pipeline restarted in the same
// process was refused as "in use by another cuecast process" naming its
// own PID (TestDemoPath, under load, beside tests that exec).
func TestDataDirFreeAfterClose(t *testing.T) {
	dir := t.TempDir()
	f, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	child, err := syscall.Dup(int(f.Fd())) // what a forked child holds until it execs
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(child)
	unlockDataDir(f)
	g, err := lockDataDir(dir)
	if err != nil {
		t.Fatalf("lock again after close, a copy of the descriptor still open: %v", err)
	}
	unlockDataDir(g)
	// The lock itself still refuses a second holder.
	h, err := lockDataDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer unlockDataDir(h)
	if _, err := lockDataDir(dir); !errors.Is(err, ErrDataDirLocked) {
		t.Fatalf("second lock while held: %v, want ErrDataDirLocked", err)
	}
}
