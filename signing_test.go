package cuecast

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestPointerSigningBytes holds SigningBytes to the layout docs/PROTOCOL.md
// §6 gives, written as a format string: the bytes every client in every
// language rebuilds.
func TestPointerSigningBytes(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 4, 5, 6, time.UTC)
	for _, p := range []Pointer{
		{},
		{Config: "payments/checkout", Version: 7, Seq: 104, Checksum: Checksum([]byte("x")), Size: 1234,
			Commit: "9fceb02d", Deleted: true, Rollback: true, SetAt: at, Inline: true, Rollout: "r", Reason: "why", Signature: "s"},
		{Config: "a/b", Version: 1<<64 - 1, Seq: 1<<64 - 1, Size: -1, SetAt: at.Add(-100 * 365 * 24 * time.Hour)},
	} {
		want := fmt.Appendf(nil, "cuecast-pointer-v2\n%s\n%d\n%d\n%s\n%d\n%s\n%t\n%t\n%d\n",
			p.Config, p.Version, p.Seq, p.Checksum, p.Size, p.Commit, p.Deleted, p.Rollback, p.SetAt.UnixNano())
		if got := p.SigningBytes(); string(got) != string(want) {
			t.Errorf("SigningBytes(%+v):\n got %q\nwant %q", p, got, want)
		}
	}
}

func BenchmarkPointerSigningBytes(b *testing.B) {
	p := Pointer{Config: "payments/checkout", Version: 7, Seq: 104, Checksum: Checksum([]byte("x")), Size: 1234,
		Commit: "9fceb02d0ae598e95dc970b74767f19372d61af8", SetAt: time.Now()}
	for b.Loop() {
		p.SigningBytes()
	}
}

func TestChecksumMatches(t *testing.T) {
	b := []byte(`{"limit":5}`)
	sum := Checksum(b)
	for _, tc := range []struct {
		name string
		b    []byte
		want string
		ok   bool
	}{
		{"same", b, sum, true},
		{"other content", []byte(`{"limit":6}`), sum, false},
		{"upper-case hex", b, strings.ToUpper(sum), false},
		{"truncated", b, sum[:63], false},
		{"empty want", b, "", false},
		{"empty content", nil, Checksum(nil), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ChecksumMatches(tc.b, tc.want); got != tc.ok {
				t.Fatalf("ChecksumMatches(%q, %q) = %v, want %v", tc.b, tc.want, got, tc.ok)
			}
		})
	}
}
