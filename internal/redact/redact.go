// Package redact takes secrets out of what is printed: errors end up in
// CI logs and terminals. It imports nothing of cuecast's, so that every
// layer may use it (layering_test.go).
package redact

import "strings"

// URLs is a URL, or a comma-separated list of them (a NATS cluster), as it
// may be printed, whether or not it parses: a password in it replaced by
// "***" (user:***@host), and a user alone too where there is a scheme
// (***@host), since a NATS URL carries a token as a bare user and a Git
// remote (https://TOKEN@github.com/…) likewise. Without a scheme a bare
// user is scp-like Git (git@host:path), no secret, and is kept.
func URLs(urls string) string {
	parts := strings.Split(urls, ",")
	for i, p := range parts {
		scheme, rest := "", p
		if j := strings.Index(p, "://"); j >= 0 {
			scheme, rest = p[:j+3], p[j+3:]
		}
		authority := rest
		if j := strings.IndexAny(rest, "/?#"); j >= 0 {
			authority = rest[:j]
		}
		at := strings.LastIndex(authority, "@")
		if at < 0 {
			continue
		}
		switch user, _, password := strings.Cut(authority[:at], ":"); {
		case password:
			parts[i] = scheme + user + ":***" + rest[at:]
		case scheme != "":
			parts[i] = scheme + "***" + rest[at:]
		}
	}
	return strings.Join(parts, ",")
}
