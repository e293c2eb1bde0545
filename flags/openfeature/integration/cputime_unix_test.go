//go:build unix

package integration_test

import (
	"syscall"
	"time"
)

// processCPU is the process's user and system CPU time so far: every
// thread's, the garbage collector's included.
func processCPU() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
