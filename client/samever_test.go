package client

import (
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
)

// TestSameVersionOtherChecksumIsRefused: a signed pointer naming the
// version served with another checksum is refused without reading the
// version: reported in refused, which health gates ignore, not in
// last_error, which made an honest instance look failing to apply it
// (docs/PROTOCOL.md §4.3). The instance keeps what it serves.
func TestSameVersionOtherChecksumIsRefused(t *testing.T) {
	ws, sign := memoFleet(t, 1, true)
	w := ws[0]
	w.handle(benchPointerMsgWith(t, w, cuecast.Pointer{Config: "payments/checkout", Version: 2, Seq: 20}, 2, sign))
	before := w.Current()
	if before.Version != 2 {
		t.Fatalf("version %d (%s %s), want 2", before.Version, w.lastErr, w.refused)
	}
	w.handle(benchPointerMsgWith(t, w, cuecast.Pointer{Config: "payments/checkout", Version: 2, Seq: 30}, 3, sign))
	if s := w.Current(); s.Version != 2 || s.Checksum != before.Checksum {
		t.Errorf("serving v%d %s, want v2 %s kept", s.Version, s.Checksum, before.Checksum)
	}
	if w.lastErr != "" || !strings.Contains(w.refused, "version 2: pointer: ") || !strings.Contains(w.refused, "checksum") {
		t.Errorf("last_error %q, refused %q; want the pointer refused, not an apply failure", w.lastErr, w.refused)
	}
}
