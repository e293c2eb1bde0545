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
		u := parse(p)
		switch {
		case u.at < 0:
		case u.password:
			parts[i] = u.scheme + u.user + ":***" + u.rest[u.at:]
		case u.scheme != "":
			parts[i] = u.scheme + "***" + u.rest[u.at:]
		}
	}
	return strings.Join(parts, ",")
}

// Error is err with the secrets of urls (those URLs takes out) replaced by
// "***" wherever its text has them: a transport's error quotes the URL it
// was given. errors.Is and errors.As see err unchanged.
func Error(err error, urls string) error {
	if err == nil {
		return nil
	}
	var secrets []string
	for _, p := range strings.Split(urls, ",") {
		if u := parse(p); u.secret != "" {
			secrets = append(secrets, u.secret)
		}
	}
	if len(secrets) == 0 {
		return err
	}
	return &scrubbed{err: err, secrets: secrets}
}

// url is one URL cut where its secret is: rest follows the scheme, and its
// userinfo ends at rest[at] ('@'; at is -1 without one).
type url struct {
	scheme, rest, user string
	at                 int
	password           bool
	secret             string // the password, or with a scheme a bare user
}

func parse(p string) url {
	u := url{rest: p, at: -1}
	if j := strings.Index(p, "://"); j >= 0 {
		u.scheme, u.rest = p[:j+3], p[j+3:]
	}
	authority := u.rest
	if j := strings.IndexAny(u.rest, "/?#"); j >= 0 {
		authority = u.rest[:j]
	}
	if u.at = strings.LastIndex(authority, "@"); u.at < 0 {
		return u
	}
	var password string
	u.user, password, u.password = strings.Cut(authority[:u.at], ":")
	switch {
	case u.password:
		u.secret = password
	case u.scheme != "":
		u.secret = u.user
	}
	return u
}

type scrubbed struct {
	err     error
	secrets []string
}

func (e *scrubbed) Error() string {
	s := e.err.Error()
	for _, x := range e.secrets {
		s = strings.ReplaceAll(s, x, "***")
	}
	return s
}

func (e *scrubbed) Unwrap() error { return e.err }
