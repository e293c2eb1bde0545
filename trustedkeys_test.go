package cuecast_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
)

// TestParseTrustedKeys: the trusted-keys format docs/PROTOCOL.md §6 gives,
// which the client and serve both read through ParseTrustedKeys. A file
// with no key parses to none without an error; each caller decides what
// that means (client.ErrNoTrustedKeys, serve adding its key).
func TestParseTrustedKeys(t *testing.T) {
	const (
		a = "AB43KVROR7TFJ6KAPCYRF2FJROTZAH4FHLTJLPWX4DRZCC5NASLGIFW3"
		// a seed is not a public key
		seed = "SAAACAQDAQCQMBYIBEFAWDANBYHRAEISCMKBKFQXDAMRUGY4DUPB6IFO3A"
	)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := kp.PublicKey()
	for _, tt := range []struct {
		name, file string
		want       []string
		err        string // a substring of the error; "" for none
	}{
		{"empty", "", nil, ""},
		{"comments and blank lines only", "# header\n\n   \n#" + a + "\n", nil, ""},
		{"one key", a + "\n", []string{a}, ""},
		{"no final newline, CRLF, indented", "  " + a + "\r\n" + b, []string{a, b}, ""},
		{"first field only", a + " serve-1 2026-12-04\n", []string{a}, ""},
		{"in order, each once", b + "\n# rotation\n" + a + "\n" + b + "\n", []string{b, a}, ""},
		{"a seed", a + "\n\n" + seed + "\n", nil, `line 3: "` + seed + `" is not a public key`},
		{"not a key", "# x\nnope\n", nil, `line 2: "nope" is not a public key`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cuecast.ParseTrustedKeys([]byte(tt.file), nkeys.FromPublicKey)
			if tt.err == "" && err != nil || tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)) {
				t.Fatalf("got error %v, want %q", err, tt.err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("got %q, want %q", got, tt.want)
			}
		})
	}
}
