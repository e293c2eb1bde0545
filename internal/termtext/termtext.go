// Package termtext renders text that came from a repository (a commit's
// author and subject, a file name, a reason) for a terminal or a CI log.
// Whoever can commit chooses those bytes, and a terminal obeys the control
// sequences among them: colours, a window title, a carriage return that
// writes over what was printed before, a bidi override that reorders it.
// It imports nothing of cuecast's, so that every layer may use it
// (layering_test.go).
package termtext

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// Line is s for a one-line field of text output: C0 controls (newline and
// tab too: a field must not start a line or a column of its own), DEL, C1
// controls, the Unicode bidi overrides and isolates, and bytes that are not
// UTF-8 (an 8-bit terminal reads 0x9b as CSI) are written as visible
// escapes such as \x1b, \r and \u202e. Everything else is kept as it is.
func Line(s string) string {
	i := 0
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		if unsafe(r, n) {
			break
		}
		i += n
	}
	if i == len(s) {
		return s // the common case: nothing to escape, nothing allocated
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:i])
	for i < len(s) {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case !unsafe(r, n):
			b.WriteString(s[i : i+n])
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x80:
			fmt.Fprintf(&b, `\x%02x`, r)
		default:
			fmt.Fprintf(&b, `\u%04x`, r)
		}
		i += n
	}
	return b.String()
}

// unsafe reports whether the rune r, n bytes long in its string, is one
// Line escapes.
func unsafe(r rune, n int) bool {
	switch {
	case r == utf8.RuneError && n == 1: // not UTF-8
		return true
	case r < 0x20, r == 0x7f: // C0, DEL
		return true
	case r >= 0x80 && r <= 0x9f: // C1
		return true
	case r >= 0x202a && r <= 0x202e, r >= 0x2066 && r <= 0x2069: // bidi embeddings, overrides, isolates
		return true
	}
	return false
}
