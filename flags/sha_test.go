package flags

import (
	"crypto/sha256"
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// TestFirstWordAgreesWithSHA256: firstWord gives the first word of
// crypto/sha256's digest for inputs of every length up to past its stack
// buffer, split between its parts in every way, with bytes of every
// value: on a CPU with the SHA extensions the inputs of one block go
// through firstWordSHANI, the rest (and all of them elsewhere) through
// crypto/sha256.
func TestFirstWordAgreesWithSHA256(t *testing.T) {
	t.Logf("SHA extensions: %v", haveSHANI)
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 200; n++ {
		for range 50 {
			in := make([]byte, n)
			for i := range in {
				in[i] = byte(rng.UintN(256))
			}
			i := rng.IntN(n + 1)
			j := i + rng.IntN(n-i+1)
			k := j + rng.IntN(n-j+1)
			sum := sha256.Sum256(in)
			want := binary.BigEndian.Uint32(sum[:4])
			if got := firstWord(string(in[:i]), string(in[i:j]), string(in[j:k]), in[k:]); got != want {
				t.Fatalf("%d bytes %x: first word %08x, crypto/sha256 gives %08x", n, in, got, want)
			}
		}
	}
}

func FuzzFirstWord(f *testing.F) {
	f.Add("checkout-v2.", "user-1")
	f.Fuzz(func(t *testing.T, a, b string) {
		sum := sha256.Sum256([]byte(a + b))
		if got, want := firstWord(a, b, "", nil), binary.BigEndian.Uint32(sum[:4]); got != want {
			t.Fatalf("%q+%q: %08x, crypto/sha256 gives %08x", a, b, got, want)
		}
	})
}

// BenchmarkPosition: a targeting key's position, on the path Evaluate
// takes and through crypto/sha256 alone.
func BenchmarkPosition(b *testing.B) {
	b.Run("evaluate-path", func(b *testing.B) {
		for b.Loop() {
			positionParts("checkout-v2.", "user-2", "", nil)
		}
	})
	b.Run("crypto-sha256", func(b *testing.B) {
		var buf [64]byte
		for b.Loop() {
			p := append(append(buf[:0], "checkout-v2."...), "user-2"...)
			sum := sha256.Sum256(p)
			_ = int(uint64(binary.BigEndian.Uint32(sum[:4])) * Whole >> 32)
		}
	})
}
