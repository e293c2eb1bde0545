package scalesim

import (
	"fmt"
	"io"
	"os"
	"runtime"
	"syscall"
	"testing"
)

// busyRole is the child that keeps every core busy at the lowest priority
// (StartBusy).
const busyRole = "busy"

// busyMain spins one thread per core, each at nice 19, until in closes
// and the process exits with them: any other process that wants a core
// takes it at once (a nice-0 thread weighs 68 times a nice-19 one), but
// no core is ever idle.
func busyMain(in io.Reader, out io.Writer) int {
	for range runtime.NumCPU() {
		go func() {
			runtime.LockOSThread() // the thread keeps its nice: it never runs other goroutines
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, syscall.Gettid(), 19); err != nil {
				fmt.Fprintln(os.Stderr, "scalesim busy: nice:", err)
				os.Exit(1)
			}
			//lint:ignore SA5002 spinning at nice 19 is this child's whole job
			for {
			}
		}()
	}
	fmt.Fprintln(out, "ready")
	_, _ = io.Copy(io.Discard, in)
	return 0
}

// StartBusy keeps every core busy at nice 19 until Stop (busyMain), for
// measurements of CPU time that must not depend on how busy the box is.
// A Go process at rest spends about a quarter more CPU on an idle box
// than on a busy one: the hub at rest, 65 and 59 ms a heartbeat on an
// idle box, 47 ms with both cores busy at nice 19 (12-05, C). The
// simulated fleet keeps the box the busier the larger it is, so without
// this the smallest fleet read highest, for the box's sake.
func StartBusy(tb testing.TB) *Server {
	tb.Helper()
	b := startChild(tb, "busy", roleEnv+"="+busyRole)
	b.line(tb, "ready")
	return b
}
