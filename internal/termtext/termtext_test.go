package termtext

import "testing"

// TestLine: every control a terminal obeys comes out as a visible escape,
// and text that is only text (accents, CJK, emoji, a backslash) comes out
// as it went in.
func TestLine(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"plain", "checkout: bill in dollars", "checkout: bill in dollars"},
		{"utf-8 and emoji", "Zoë 李 🚀 — ok", "Zoë 李 🚀 — ok"},
		{"empty", "", ""},
		{"backslash kept", `C:\path`, `C:\path`},
		{"SGR colour", "\x1b[31mred\x1b[0m", `\x1b[31mred\x1b[0m`},
		{"OSC title with BEL", "\x1b]0;pwned\a", `\x1b]0;pwned\x07`},
		{"carriage return overwrite", "v9\rv9 approved by security", `v9\rv9 approved by security`},
		{"newline in a one-line field", "a\nb", `a\nb`},
		{"tab", "a\tb", `a\tb`},
		{"NUL and DEL", "a\x00b\x7fc", `a\x00b\x7fc`},
		{"C1 CSI as UTF-8", "a\u009b31mb", `a\u009b31mb`},
		{"C1 NEL", "a\u0085b", `a\u0085b`},
		{"raw 0x9b byte, not UTF-8", "a\x9b31mb", `a\x9b31mb`},
		{"bidi override", "admin\u202egpj.exe", `admin\u202egpj.exe`},
		{"bidi embeddings and isolates", "\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069", `\u202a\u202b\u202c\u202d\u2066\u2067\u2068\u2069`},
		{"next to bidi range kept", "\u2029\u202f\u2065\u206a", "\u2029\u202f\u2065\u206a"},
		{"U+00A0 kept", "a\u00a0b", "a\u00a0b"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.in); got != tc.want {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
