package compiler

import (
	"testing"
)

func TestSecretName(t *testing.T) {
	tests := []struct {
		label string
		want  bool
	}{
		{"password", true},
		{"db_password", true},
		{"dbPassword", true},
		{"DB-PASSWD", true},
		{"client_secret", true},
		{"clientSecret", true},
		{"apiKey", true},
		{"api_key", true},
		{"apikey", true},
		{"key", true},
		{"access_token", true},
		{"refreshToken", true},
		{"token_ttl", true},
		{"monkey", false},
		{"keyspace", false},
		{"cache_keys", false},
		{"secretary", false},
		{"title", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := secretName(tt.label); got != tt.want {
			t.Errorf("secretName(%q) = %v, want %v", tt.label, got, tt.want)
		}
	}
}

func TestHighEntropy(t *testing.T) {
	tests := []struct {
		s    string
		want bool
	}{
		{"x7Kp2mQ9vL4tR8wZ3nB6", true},
		{"a3f1c9e27b5d40861f2e", true},
		{"correct horse battery staple", false},  // spaces: prose
		{"vault:payments/stripe#api_key", false}, // no digits: a reference
		{"user:{id}:profile", false},
		{"aaaaaaaaaaaaaaaa1111", false}, // long but repetitive
		{"short1A", false},
		{"2026-11-30T01:15:00Z", false},
	}
	for _, tt := range tests {
		if got := highEntropy(tt.s); got != tt.want {
			t.Errorf("highEntropy(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func TestSecretPatterns(t *testing.T) {
	tests := []struct {
		s    string
		want string // lint ID, "" for none
	}{
		{"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn", IDSecretPrivateKey},
		{"-----BEGIN PRIVATE KEY-----", IDSecretPrivateKey},
		{"-----BEGIN PUBLIC KEY-----", ""},
		{"AKIAIOSFODNN7EXAMPLE", IDSecretAWSKey},
		{"id=ASIAIOSFODNN7EXAMPLE;", IDSecretAWSKey},
		{"AKIAIOSFODNN7EXAMPL", ""}, // one short
		{"ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789", IDSecretGitHubToken},
		{"github_pat_11ABCDEFG0123456789_abcdefghijklmnop", IDSecretGitHubToken},
		{"ghp_short", ""},
		{"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U", IDSecretJWT},
		{"eyJhbGciOiJIUzI1NiJ9", ""},
	}
	pats := secretPatterns()
	for _, tt := range tests {
		got := ""
		for _, p := range pats {
			if p.re.MatchString(tt.s) {
				got = p.id
				break
			}
		}
		if got != tt.want {
			t.Errorf("%q matched %q, want %q", tt.s, got, tt.want)
		}
	}
}

func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"AKIAIOSFODNN7EXAMPLE": `"AKIA…"`,
		"short":                `"…"`,
	} {
		if got := redact(in); got != want {
			t.Errorf("redact(%q) = %s, want %s", in, got, want)
		}
	}
}

func TestFirstInvalidUTF8(t *testing.T) {
	tests := []struct {
		in        string
		line, col int
	}{
		{"\xff", 1, 1},
		{"ab\xff", 1, 3},
		{"a\nb\nc\xe9d", 3, 2},
		{"é\n\xc3", 2, 1}, // truncated sequence at the end
	}
	for _, tt := range tests {
		line, col := firstInvalidUTF8([]byte(tt.in))
		if line != tt.line || col != tt.col {
			t.Errorf("firstInvalidUTF8(%q) = %d:%d, want %d:%d", tt.in, line, col, tt.line, tt.col)
		}
	}
}

func TestSplitSchema(t *testing.T) {
	tests := []struct {
		in       string
		imp, def string
		ok       bool
	}{
		{"example.com/configs/schemas#Payments", "example.com/configs/schemas", "#Payments", true},
		{"example.com/configs/schemas", "", "", false},
		{"#Payments", "", "", false},
		{"example.com/x#", "", "", false},
	}
	for _, tt := range tests {
		imp, def, ok := splitSchema(tt.in)
		if imp != tt.imp || def != tt.def || ok != tt.ok {
			t.Errorf("splitSchema(%q) = %q, %q, %v; want %q, %q, %v", tt.in, imp, def, ok, tt.imp, tt.def, tt.ok)
		}
	}
}

func TestComparePos(t *testing.T) {
	tests := []struct {
		a, b string
		want int // sign
	}{
		{"schemas/a.cue:7:9", "schemas/a.cue:19:9", -1},
		{"schemas/a.cue:7:28", "schemas/a.cue:7:7", 1},
		{"a.cue:9:1", "b.cue:1:1", -1},
		{"x.cue:3:3", "x.cue:3:3", 0},
	}
	for _, tt := range tests {
		got := comparePos(tt.a, tt.b)
		if (got < 0) != (tt.want < 0) || (got > 0) != (tt.want > 0) {
			t.Errorf("comparePos(%q, %q) = %d, want sign %d", tt.a, tt.b, got, tt.want)
		}
	}
}
