package compiler

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"cuelang.org/go/cue"
)

// secretPattern is a credential format recognised anywhere in a string.
type secretPattern struct {
	id   string
	what string
	re   *regexp.Regexp
}

// secretPatterns are the formats with a recognisable shape. They are built
// once per Compile rather than held in package state, which keeps the
// package free of globals; regexp.Regexp is safe for concurrent use.
func secretPatterns() []secretPattern {
	return []secretPattern{
		{IDSecretPrivateKey, "a private key block", regexp.MustCompile(`-----BEGIN ([A-Z0-9]+ )*PRIVATE KEY( BLOCK)?-----`)},
		{IDSecretAWSKey, "an AWS access key ID", regexp.MustCompile(`\b(AKIA|ASIA|AGPA|AIDA|AROA|ANPA|ANVA|AIPA)[0-9A-Z]{16}\b`)},
		{IDSecretGitHubToken, "a GitHub token", regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b`)},
		{IDSecretJWT, "a JSON Web Token", regexp.MustCompile(`\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{10,}`)},
	}
}

// lintLabel checks one exported field name against the credential formats
// (entropy alone would flag every hash-keyed map, so it is not used here).
func lintLabel(v cue.Value, label string, pats []secretPattern, report func(Error)) {
	for _, p := range pats {
		if !p.re.MatchString(label) {
			continue
		}
		allowed, attrErr := allowedBy(v)
		if attrErr != nil || !allowed(p.id) {
			e := positionError(v, "")
			e.ID = p.id
			e.Message = fmt.Sprintf("field name %s in %s looks like %s", redact(label), parentPath(v), p.what)
			e.Fix = fixFor(p.id)
			report(e)
		}
	}
}

// redact keeps enough of a secret for its owner to find it and not enough
// to use it: error messages end up in CI logs and PR comments.
func redact(s string) string {
	r := []rune(s)
	if len(r) <= 8 {
		return `"…"`
	}
	return strconv.Quote(string(r[:4]) + "…")
}

// parentPath is the path of the struct holding v, or "the top level".
func parentPath(v cue.Value) string {
	sels := v.Path().Selectors()
	if len(sels) <= 1 {
		return "the top level"
	}
	return cue.MakePath(sels[:len(sels)-1]...).String()
}

// lintString checks one exported string value. A field can opt out with
// @cuecast(allow="<lint ID or secret>", reason="<why>").
func lintString(v cue.Value, label, s string, pats []secretPattern, report func(Error)) {
	var hits []string
	var whats []string
	for _, p := range pats {
		if p.re.MatchString(s) {
			hits = append(hits, p.id)
			whats = append(whats, p.what)
		}
	}
	if len(hits) == 0 && secretName(label) && highEntropy(s) {
		hits = append(hits, IDSecretHighEntropy)
		whats = append(whats, fmt.Sprintf("a high-entropy string in a field named %q", label))
	}
	if len(hits) == 0 {
		return
	}
	at := positionError(v, "")
	allowed, attrErr := allowedBy(v)
	if attrErr != nil {
		e := at
		e.ID, e.Message, e.Fix = attrErr.id, attrErr.msg, fixFor(attrErr.id)
		report(e)
		return
	}
	for i, id := range hits {
		if allowed(id) {
			continue
		}
		e := at
		e.ID = id
		e.Message = fmt.Sprintf("field %s looks like %s", pathString(v, label), whats[i])
		e.Fix = fixFor(id)
		report(e)
	}
}

func pathString(v cue.Value, label string) string {
	if p := v.Path().String(); p != "" {
		return p
	}
	return label
}

type attrError struct{ id, msg string }

// allowedBy reads the @cuecast attribute of v's field.
func allowedBy(v cue.Value) (func(id string) bool, *attrError) {
	a := v.Attribute("cuecast")
	if a.Err() != nil {
		return func(string) bool { return false }, nil
	}
	allow, found, _ := a.Lookup(0, "allow")
	if !found {
		return func(string) bool { return false }, nil
	}
	allow = unquote(allow)
	reason, _, _ := a.Lookup(0, "reason")
	if strings.TrimSpace(unquote(reason)) == "" {
		return nil, &attrError{IDLintAllowNoReason, fmt.Sprintf("@cuecast(allow=%q) needs a reason", allow)}
	}
	var ids []string
	for _, id := range strings.Split(allow, ",") {
		id = strings.TrimSpace(id)
		if id != "secret" && !strings.HasPrefix(id, "secret/") {
			return nil, &attrError{IDLintAllowUnknownID, fmt.Sprintf("@cuecast(allow=%q): %q is not a secret lint ID", allow, id)}
		}
		ids = append(ids, id)
	}
	return func(id string) bool {
		for _, a := range ids {
			if a == "secret" || a == id {
				return true
			}
		}
		return false
	}, nil
}

func unquote(s string) string {
	s = strings.TrimSpace(s)
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}

// secretName reports whether a field name suggests a credential: one of its
// words (split at '_', '-', '.' and lower-to-upper case changes) is
// password, secret, token or key, or ends in one of them ("apikey").
func secretName(label string) bool {
	for _, w := range words(label) {
		for _, s := range []string{"password", "passwd", "secret", "token", "key"} {
			if w == s || (len(w) > len(s) && strings.HasSuffix(w, s) && s != "key") {
				return true
			}
		}
		if w == "apikey" || w == "privatekey" || w == "accesskey" || w == "secretkey" {
			return true
		}
	}
	return false
}

func words(s string) []string {
	var out []string
	var cur strings.Builder
	prevLower := false
	for _, r := range s {
		switch {
		case !unicode.IsLetter(r) && !unicode.IsDigit(r):
			if cur.Len() > 0 {
				out = append(out, cur.String())
				cur.Reset()
			}
			prevLower = false
			continue
		case unicode.IsUpper(r) && prevLower:
			out = append(out, cur.String())
			cur.Reset()
		}
		cur.WriteRune(unicode.ToLower(r))
		prevLower = unicode.IsLower(r)
	}
	if cur.Len() > 0 {
		out = append(out, cur.String())
	}
	return out
}

// highEntropy reports whether s looks machine-generated: at least 16
// characters, no spaces, letters and digits mixed, and over 3.5 bits of
// Shannon entropy per character. Words, URLs without keys and references
// like "vault:payments/stripe" stay under it.
func highEntropy(s string) bool {
	if len(s) < 16 || strings.ContainsAny(s, " \t\n") {
		return false
	}
	var letters, digits bool
	counts := make(map[rune]int)
	n := 0
	for _, r := range s {
		counts[r]++
		n++
		letters = letters || unicode.IsLetter(r)
		digits = digits || unicode.IsDigit(r)
	}
	if !letters || !digits {
		return false
	}
	var h float64
	for _, c := range counts {
		p := float64(c) / float64(n)
		h -= p * math.Log2(p)
	}
	return h > 3.5
}
