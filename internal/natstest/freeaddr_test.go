package natstest

import (
	"net"
	"strconv"
	"testing"
)

// TestFreeAddrIsOutsideTheEphemeralRange: FreeAddr's ports are below the
// kernel's ephemeral range, which the kernel hands to any socket binding
// port 0 or connecting out, as it did to another test's socket between
// FreeAddr and serve's listen (TestRunbookDamagedStream, under load).
func TestFreeAddrIsOutsideTheEphemeralRange(t *testing.T) {
	low := ephemeralLow()
	if low <= freeLow {
		t.Skipf("no ephemeral range to keep out of here (first port %d)", low)
	}
	for range 20 {
		addr := FreeAddr(t)
		_, p, err := net.SplitHostPort(addr)
		if err != nil {
			t.Fatal(err)
		}
		port, _ := strconv.Atoi(p)
		if port < freeLow || port >= low {
			t.Fatalf("FreeAddr gave %s: want a port in [%d, %d), below the ephemeral range", addr, freeLow, low)
		}
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("FreeAddr's %s is not free: %v", addr, err)
		}
		ln.Close()
	}
}
