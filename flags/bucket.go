package flags

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"strconv"
)

// Position is the bucket position of value under salt, in [0, Whole): the
// first 4 bytes of SHA-256 of the UTF-8 bytes of salt + "." + value, read
// big-endian, times Whole, shifted right by 32. Integer arithmetic only,
// so every language (JavaScript's doubles included) computes the same.
// It does not depend on any weights: raising a rollout only adds positions.
func Position(salt, value string) int {
	var buf [128]byte
	b := append(buf[:0], salt...)
	b = append(b, '.')
	b = append(b, value...)
	return position(b)
}

func position(b []byte) int {
	sum := sha256.Sum256(b)
	return int(uint64(binary.BigEndian.Uint32(sum[:4])) * Whole >> 32)
}

// positionOf buckets attribute v under prefix (salt + "."): a string as
// is, an integer (or an integral float within ±2^53) in decimal. Anything
// else cannot be bucketed: ok is false.
func positionOf(prefix string, v any) (pos int, ok bool) {
	var buf [128]byte
	b := append(buf[:0], prefix...)
	switch x := v.(type) {
	case string:
		b = append(b, x...)
	case int:
		b = strconv.AppendInt(b, int64(x), 10)
	case int32:
		b = strconv.AppendInt(b, int64(x), 10)
	case int64:
		b = strconv.AppendInt(b, x, 10)
	case uint:
		b = strconv.AppendUint(b, uint64(x), 10)
	case uint32:
		b = strconv.AppendUint(b, uint64(x), 10)
	case uint64:
		b = strconv.AppendUint(b, x, 10)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		b = strconv.AppendInt(b, int64(x), 10)
	default:
		return 0, false
	}
	return position(b), true
}
