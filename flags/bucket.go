package flags

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"strconv"
	"strings"
)

// Position is the bucket position of value under salt, in [0, Whole): the
// first 4 bytes of SHA-256 of the UTF-8 bytes of salt + "." + value, read
// big-endian, times Whole, shifted right by 32. Integer arithmetic only,
// so every language (JavaScript's doubles included) computes the same.
// It does not depend on any weights: raising a rollout only adds positions.
func Position(salt, value string) int {
	return positionParts(salt, ".", value, nil)
}

// positionParts is the position of a + b + c + tail.
func positionParts(a, b, c string, tail []byte) int {
	return int(uint64(firstWord(a, b, c, tail)) * Whole >> 32)
}

// firstWord is the first 4 bytes, big-endian, of the SHA-256 of a + b + c
// + tail, hashed without building the string: an input that fits a stack
// buffer is hashed in one call, a longer one streamed through that buffer,
// so no salt or targeting key, however long, allocates.
func firstWord(a, b, c string, tail []byte) uint32 {
	n := len(a) + len(b) + len(c) + len(tail)
	if haveSHANI && n <= maxOneBlock {
		return firstWordOneBlock(a, b, c, tail, n)
	}
	var buf [128]byte
	if n <= len(buf) {
		p := append(append(append(append(buf[:0], a...), b...), c...), tail...)
		sum := sha256.Sum256(p)
		return binary.BigEndian.Uint32(sum[:4])
	}
	h := sha256.New()
	for _, s := range [...]string{a, b, c} {
		for s != "" {
			n := copy(buf[:], s)
			h.Write(buf[:n])
			s = s[n:]
		}
	}
	h.Write(tail)
	var sum [sha256.Size]byte
	return binary.BigEndian.Uint32(h.Sum(sum[:0])[:4])
}

// maxOneBlock is the longest input whose padded message is one SHA-256
// block: the input, the 0x80 byte and the 8-byte length in 64 bytes.
const maxOneBlock = 64 - 1 - 8

// firstWordOneBlock is firstWord for an input of n <= maxOneBlock bytes
// on a CPU with the SHA extensions: the block padded here and hashed by
// firstWordSHANI, which computes the first word only. crypto/sha256 gives
// the same word, but its general path (a digest to set up, copies in and
// out, the padding written through Write) costs more than the 64 rounds
// themselves, and an evaluation of a rollout is mostly this hash
// (BENCHMARKS.md, "Flags"). TestFirstWordAgreesWithSHA256 holds it to
// crypto/sha256 at every length. The build tag purego leaves it out.
func firstWordOneBlock(a, b, c string, tail []byte, n int) uint32 {
	var block [64]byte
	p := append(append(append(append(block[:0], a...), b...), c...), tail...)
	block[len(p)] = 0x80
	binary.BigEndian.PutUint64(block[56:], uint64(n)*8)
	return firstWordSHANI(&block)
}

// positionOf buckets attribute v under prefix (salt + "."): a string as
// is, an integer (of any Go type, or a json.Number written as one) in
// decimal, a float (float32, float64, any other json.Number) in decimal
// when integral and within ±2^53. Anything else cannot be bucketed: ok is
// false. A value buckets the same whatever type carries it, so the CLI's
// json.Number 42 and a service's int 42 get the same position.
func positionOf(prefix string, v any) (pos int, ok bool) {
	var num [24]byte
	var b []byte
	switch x := v.(type) {
	case string:
		return positionParts(prefix, x, "", nil), true
	case int:
		b = strconv.AppendInt(num[:0], int64(x), 10)
	case int8:
		b = strconv.AppendInt(num[:0], int64(x), 10)
	case int16:
		b = strconv.AppendInt(num[:0], int64(x), 10)
	case int32:
		b = strconv.AppendInt(num[:0], int64(x), 10)
	case int64:
		b = strconv.AppendInt(num[:0], x, 10)
	case uint:
		b = strconv.AppendUint(num[:0], uint64(x), 10)
	case uint8:
		b = strconv.AppendUint(num[:0], uint64(x), 10)
	case uint16:
		b = strconv.AppendUint(num[:0], uint64(x), 10)
	case uint32:
		b = strconv.AppendUint(num[:0], uint64(x), 10)
	case uint64:
		b = strconv.AppendUint(num[:0], x, 10)
	case float32:
		if b, ok = appendFloatKey(num[:0], float64(x)); !ok {
			return 0, false
		}
	case float64:
		if b, ok = appendFloatKey(num[:0], x); !ok {
			return 0, false
		}
	case json.Number:
		if b, ok = appendNumberKey(num[:0], string(x)); !ok {
			return 0, false
		}
	default:
		return 0, false
	}
	return positionParts(prefix, "", "", b), true
}

// appendFloatKey appends the decimal of x when x is integral and within
// ±2^53, where every integer is exact in a double (and so in every
// language's numbers).
func appendFloatKey(dst []byte, x float64) ([]byte, bool) {
	if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
		return nil, false
	}
	return strconv.AppendInt(dst, int64(x), 10), true
}

// appendNumberKey appends the decimal a JSON number buckets as: an integer
// literal that fits 64 bits as that integer (beyond ±2^53 too, as the Go
// integer holding it would), any other number as a float.
func appendNumberKey(dst []byte, s string) ([]byte, bool) {
	if isIntLiteral(s) {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return strconv.AppendInt(dst, n, 10), true
		}
		if n, err := strconv.ParseUint(s, 10, 64); err == nil {
			return strconv.AppendUint(dst, n, 10), true
		}
	}
	x, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return nil, false
	}
	return appendFloatKey(dst, x)
}

// isIntLiteral reports whether s is an optional minus and digits.
func isIntLiteral(s string) bool {
	s = strings.TrimPrefix(s, "-")
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
