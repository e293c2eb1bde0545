package cuecast_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
)

// The rules as they were written before the checks became loops: the
// oracle the loops must agree with on every string.
var (
	segmentRule  = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]*$`)
	instanceRule = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)
)

func TestNameChecksMatchTheirRules(t *testing.T) {
	check := func(s string) {
		t.Helper()
		if got, want := cuecast.ValidSegment(s), segmentRule.MatchString(s); got != want {
			t.Errorf("ValidSegment(%q) = %v, want %v", s, got, want)
		}
		if got, want := cuecast.ValidateInstance(s) == nil, instanceRule.MatchString(s); got != want {
			t.Errorf("ValidateInstance(%q) accepts: %v, want %v", s, got, want)
		}
	}
	for _, s := range []string{"", "a", "-", "_", "a-", "a_", "-a", "_a", "A", "aB", "0", "09az", "a.b", "a b", "a\n", "\na", "é",
		"a*", "a>", "a/b", "a=b", strings.Repeat("a", 128), strings.Repeat("a", 129), strings.Repeat("Z", 128) + "\n"} {
		check(s)
	}
	// Every string of up to three bytes over an alphabet with each class's
	// edges and their neighbours.
	const alphabet = "az09AZ_-`{/:@[.=\n\x00\xff"
	var all func(prefix string, n int)
	all = func(prefix string, n int) {
		check(prefix)
		if n == 0 {
			return
		}
		for i := range len(alphabet) {
			all(prefix+alphabet[i:i+1], n-1)
		}
	}
	all("", 3)
	// Longer ones, mostly valid with one byte of any value somewhere.
	r := rand.New(rand.NewPCG(1, 2))
	for range 20_000 {
		b := make([]byte, 1+r.IntN(140))
		for i := range b {
			b[i] = "abcxyz0189_-AQZ"[r.IntN(15)]
		}
		if r.IntN(2) == 0 {
			b[r.IntN(len(b))] = byte(r.IntN(256))
		}
		check(string(b))
	}
}
