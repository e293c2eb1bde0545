// Package redact takes secrets out of what is printed: errors end up in
// CI logs and terminals.
package redact

import "strings"

// URLs is a URL, or a comma-separated list of them (a NATS cluster), as it
// may be printed: the user information of each replaced by "***". It takes
// the whole of it, a user alone too: a NATS URL carries a token as a bare
// user, and a Git remote (https://TOKEN@github.com/…) likewise; without a
// scheme, only a user with a password is. It works whether or not the rest
// parses as a URL.
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
		// Without a scheme, a bare user is scp-like Git (git@host:path),
		// no secret; a user and password still is one.
		if at >= 0 && (scheme != "" || strings.Contains(authority[:at], ":")) {
			parts[i] = scheme + "***" + rest[at:]
		}
	}
	return strings.Join(parts, ",")
}
