package client

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// TestReportError: the service's reason (WithApplyError) follows the
// watcher's own error, which stays first for the gates, and is cut to
// MaxApplyError bytes on a rune boundary: every heartbeat carries it.
func TestReportError(t *testing.T) {
	long := strings.Repeat("é", MaxApplyError) // two bytes a rune
	for _, tc := range []struct {
		name, own, why, want string
	}{
		{"nothing", "", "", ""},
		{"own only", "version 3: decode: bad", "", "version 3: decode: bad"},
		{"service only", "", "write payments/checkout.json: no space left on device", "write payments/checkout.json: no space left on device"},
		{"both", "version 3: decode: bad", "--exec failed: exit status 1", "version 3: decode: bad; --exec failed: exit status 1"},
		{"long", "", long, long[:MaxApplyError-len("…")-1] + "…"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := reportError(tc.own, tc.why)
			if got != tc.want {
				t.Errorf("reportError(%q, %q) = %q, want %q", tc.own, tc.why, got, tc.want)
			}
			if len(got) > len(tc.own)+len("; ")+MaxApplyError || !utf8.ValidString(got) {
				t.Errorf("reportError = %q: %d bytes, valid UTF-8 %v; want at most %d of the service's, valid", got, len(got), utf8.ValidString(got), MaxApplyError)
			}
		})
	}
}
