//go:build linux

// Package diskfull gives tests a real file system to fill: a small tmpfs,
// mounted for the test. Mounting needs root or CAP_SYS_ADMIN; elsewhere
// the test is skipped, saying why.
package diskfull

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size bytes on a new directory, unmounted at
// cleanup, and returns the directory.
func Mount(t testing.TB, size int) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d", size)); err != nil {
		if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
			t.Skipf("cannot mount a small tmpfs to fill (%v): run as root, or with CAP_SYS_ADMIN", err)
		}
		t.Fatalf("mount tmpfs on %s: %v", dir, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// Fill writes a file in dir until its file system has no space left, and
// returns the file's path: remove it to free the space.
func Fill(t testing.TB, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for _, n := range []int{len(buf), 4096, 1} {
		for {
			_, err := f.Write(buf[:n])
			if errors.Is(err, syscall.ENOSPC) {
				break
			}
			if err != nil {
				t.Fatalf("fill %s: %v", dir, err)
			}
		}
	}
	return path
}
