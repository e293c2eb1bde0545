package cuecast

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nkeys"
)

// TestPointerSigningBytes holds SigningBytes to the layout docs/PROTOCOL.md
// §6 gives, written as a format string: the bytes every client in every
// language rebuilds.
func TestPointerSigningBytes(t *testing.T) {
	at := time.Date(2026, 11, 30, 3, 4, 5, 6, time.UTC)
	for _, p := range []Pointer{
		{},
		{Config: "payments/checkout", Subject: "cc.payments.p.7.checkout", Revision: 1764558245123456789, Version: 7, Seq: 104,
			Checksum: Checksum([]byte("x")), Size: 1234, Commit: "9fceb02d", Deleted: true, Rollback: true, SetAt: at,
			Inline: true, Rollout: "r", Reason: "why", Signature: "s"},
		{Config: "a/b", Subject: "cc.a.i.web-1.b", Revision: 1<<64 - 1, Version: 1<<64 - 1, Seq: 1<<64 - 1, Size: -1, SetAt: at.Add(-100 * 365 * 24 * time.Hour)},
	} {
		want := fmt.Appendf(nil, "cuecast-pointer-v3\n%s\n%s\n%d\n%d\n%d\n%s\n%d\n%s\n%t\n%t\n%d\n",
			p.Config, p.Subject, p.Revision, p.Version, p.Seq, p.Checksum, p.Size, p.Commit, p.Deleted, p.Rollback, p.SetAt.UnixNano())
		if got := p.SigningBytes(); string(got) != string(want) {
			t.Errorf("SigningBytes(%+v):\n got %q\nwant %q", p, got, want)
		}
	}
}

// TestPointerSigningVector is the check value docs/PROTOCOL.md §6 gives for
// an implementation in another language: the seed, the pointer, its signing
// bytes and their SHA-256, and the signature (ed25519 is deterministic).
func TestPointerSigningVector(t *testing.T) {
	const (
		seed   = "SAAACAQDAQCQMBYIBEFAWDANBYHRAEISCMKBKFQXDAMRUGY4DUPB6IFO3A"
		pub    = "AB43KVROR7TFJ6KAPCYRF2FJROTZAH4FHLTJLPWX4DRZCC5NASLGIFW3"
		bytes  = "cuecast-pointer-v3\npayments/checkout\ncc.payments.p.all.checkout\n1764558245123456789\n7\n104\na03c8657a575356de5937110fc9038dafa42d659089628586aa8f8d73924cd16\n11\n9fceb02d0ae598e95dc970b74767f19372d61af8\nfalse\nfalse\n1796094245123456789\n"
		digest = "a154480ef1eca24b31c4eefbe9859060417334b2d932718f96334919c1967119"
		sig    = "p_TzkX7ZVAIBnqiodct2hHvao0fMiThwUr7pQI4QXhJRgOaFyAaSe5rbDMht6rI1GSd-2SuMf62Y6kGweKLzAg"
	)
	p := Pointer{Config: "payments/checkout", Subject: "cc.payments.p.all.checkout", Revision: 1764558245123456789,
		Version: 7, Seq: 104, Checksum: Checksum([]byte(`{"limit":5}`)), Size: 11, Commit: "9fceb02d0ae598e95dc970b74767f19372d61af8",
		SetAt: time.Date(2026, 12, 1, 3, 4, 5, 123456789, time.UTC)}
	b := p.SigningBytes()
	if string(b) != bytes {
		t.Fatalf("signing bytes:\n got %q\nwant %q", b, bytes)
	}
	if h := sha256.Sum256(b); hex.EncodeToString(h[:]) != digest {
		t.Fatalf("sha256 of the signing bytes: got %x, want %s", h, digest)
	}
	kp, err := nkeys.FromSeed([]byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := kp.PublicKey(); got != pub {
		t.Fatalf("public key: got %s, want %s", got, pub)
	}
	s, err := kp.Sign(b)
	if err != nil {
		t.Fatal(err)
	}
	if got := base64.RawURLEncoding.EncodeToString(s); got != sig {
		t.Fatalf("signature: got %s, want %s", got, sig)
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

// TestRevisionNeedsExactIntegers holds docs/PROTOCOL.md §4.2 to its word:
// the pointer §6 shows, decoded as a parser that reads every number as a
// double would, has another revision, and so other signing bytes; decoded
// as exact integers it has the documented ones.
func TestRevisionNeedsExactIntegers(t *testing.T) {
	doc, err := os.ReadFile("docs/PROTOCOL.md")
	if err != nil {
		t.Fatal(err)
	}
	var line string
	for l := range strings.Lines(string(doc)) {
		if strings.HasPrefix(l, "`{\"config\":\"payments/checkout\"") {
			line = strings.Trim(strings.TrimSpace(l), "`")
			break
		}
	}
	if line == "" {
		t.Fatal("docs/PROTOCOL.md §6 shows no check-value pointer")
	}
	var exact Pointer
	if err := json.Unmarshal([]byte(line), &exact); err != nil {
		t.Fatal(err)
	}
	if exact.Revision <= 1<<53 {
		t.Fatalf("the documented revision %d is not above 2^53: §4.2's warning would be moot", exact.Revision)
	}
	var doubles map[string]any
	if err := json.Unmarshal([]byte(line), &doubles); err != nil {
		t.Fatal(err)
	}
	rounded := exact
	rounded.Revision = uint64(doubles["rev"].(float64))
	if rounded.Revision == exact.Revision || string(rounded.SigningBytes()) == string(exact.SigningBytes()) {
		t.Fatalf("a double keeps the revision %d exactly: §4.2's warning is wrong", exact.Revision)
	}
}
