//go:build unix

package pipeline

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// lockFile is the file in the data directory that a running pipeline holds
// an exclusive flock on, with its PID inside.
const lockFile = "serve.lock"

// lockDataDir takes the data directory for this process: two serves over one
// JetStream store would both publish, and a second one is refused at once
// naming the first one's PID. The kernel drops the lock when the process
// dies, however it dies, so a stale file never blocks a restart.
func lockDataDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, lockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		b, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			pid := string(bytes.TrimSpace(b))
			if pid == "" {
				pid = "unknown"
			}
			return nil, fmt.Errorf("data directory %s is in use by another cuecast process (pid %s); stop it, or give this one its own --data: %w", dir, pid, ErrDataDirLocked)
		}
		return nil, fmt.Errorf("lock data directory %s: %w", dir, err)
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	if _, err := f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock data directory: %w", err)
	}
	return f, nil
}

// unlockDataDir gives the data directory up (Pipeline.Close). It unlocks
// before closing: the flock belongs to the open file, which a child forked
// meanwhile by another goroutine holds a copy of until it execs, so a
// close alone could leave the directory locked against a pipeline started
// again in this process (TestDataDirFreeAfterClose).
func unlockDataDir(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}
