package flags

import (
	"crypto/sha256"
	"encoding"
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
	return positionParts(salt, ".", value, nil)
}

// positionParts is the position of a + b + c + tail, hashed without
// building the string: an input that fits a stack buffer is hashed in
// one call, a longer one streamed through that buffer, so no salt or
// targeting key, however long, allocates.
func positionParts(a, b, c string, tail []byte) int {
	var buf [128]byte
	n := len(a) + len(b) + len(c) + len(tail)
	if n <= maxOneBlock {
		p := append(append(append(append(buf[:0], a...), b...), c...), tail...)
		if first4, ok := oneBlock(p); ok {
			return positionOfSum(first4[:])
		}
	}
	if n <= len(buf) {
		p := append(append(append(append(buf[:0], a...), b...), c...), tail...)
		sum := sha256.Sum256(p)
		return positionOfSum(sum[:4])
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
	return positionOfSum(h.Sum(sum[:0])[:4])
}

// maxOneBlock is the longest message SHA-256 pads into a single 64-byte
// block (a 0x80 byte and the 8-byte length follow it).
const maxOneBlock = 55

// oneBlock returns the first 4 bytes of SHA-256(msg) for a message of at
// most maxOneBlock bytes, the usual salt + "." + key: it pads the block
// itself and writes it whole, so the hash compresses it straight from
// this buffer, and reads the digest's first word from the saved state
// (after the last block the state is the digest), skipping Sum256's
// copies of the state and of the padding, about a tenth of a rollout's
// evaluation (BENCHMARKS.md, "Flags"). ok is false if the hash does not
// save its state in the documented layout; the caller then uses Sum256.
// TestLongInputsDoNotAllocate checks every length against Sum256.
func oneBlock(msg []byte) (first4 [4]byte, ok bool) {
	var blk [64]byte
	n := copy(blk[:], msg)
	blk[n] = 0x80
	binary.BigEndian.PutUint64(blk[56:], uint64(n)*8)
	h := sha256.New()
	h.Write(blk[:])
	ba, ok := h.(encoding.BinaryAppender)
	if !ok {
		return first4, false
	}
	var st [128]byte
	// "sha\x03", then the eight state words big-endian: the first is the
	// digest's first 4 bytes.
	out, err := ba.AppendBinary(st[:0])
	if err != nil || len(out) < 8 || string(out[:4]) != "sha\x03" {
		return first4, false
	}
	copy(first4[:], out[4:8])
	return first4, true
}

func positionOfSum(first4 []byte) int {
	return int(uint64(binary.BigEndian.Uint32(first4)) * Whole >> 32)
}

// positionOf buckets attribute v under prefix (salt + "."): a string as
// is, an integer (or an integral float within ±2^53) in decimal. Anything
// else cannot be bucketed: ok is false.
func positionOf(prefix string, v any) (pos int, ok bool) {
	var num [24]byte
	var b []byte
	switch x := v.(type) {
	case string:
		return positionParts(prefix, x, "", nil), true
	case int:
		b = strconv.AppendInt(num[:0], int64(x), 10)
	case int32:
		b = strconv.AppendInt(num[:0], int64(x), 10)
	case int64:
		b = strconv.AppendInt(num[:0], x, 10)
	case uint:
		b = strconv.AppendUint(num[:0], uint64(x), 10)
	case uint32:
		b = strconv.AppendUint(num[:0], uint64(x), 10)
	case uint64:
		b = strconv.AppendUint(num[:0], x, 10)
	case float64:
		if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
			return 0, false
		}
		b = strconv.AppendInt(num[:0], int64(x), 10)
	default:
		return 0, false
	}
	return positionParts(prefix, "", "", b), true
}
