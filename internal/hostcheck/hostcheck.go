// Package hostcheck decides which Host headers a local HTTP server answers,
// against DNS rebinding: a web page whose name an attacker re-resolves to
// 127.0.0.1 reaches a loopback port from a browser on the host, same-origin
// with whatever answers there, and sends its own name as Host. A server
// that answers only the names it is known by leaves the page nothing to
// read. The agent's --ofrep and serve's --http use it.
package hostcheck

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
)

// Allow is the set of Host headers a server answers, whatever their port.
// A nil *Allow answers every Host.
type Allow struct {
	loopback bool     // loopback addresses and localhost
	names    []string // lower case, without a port
}

// LoopbackOnly answers requests to a loopback address or localhost only.
func LoopbackOnly() *Allow { return &Allow{loopback: true} }

// ForBind is the Allow of a server listening on bind (HOST:PORT) that is
// also known by names (a reverse proxy's public name, an SSH tunnel's). On
// a loopback bind: loopback addresses, localhost and names. On any other
// bind: names and the bind's own host; without names, nil (every Host),
// since anything on that network reaches the server without a browser's
// help. It returns an error for a bind that is not HOST:PORT or a name
// that is not a host name or address.
func ForBind(bind string, names []string) (*Allow, error) {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return nil, fmt.Errorf("%q: want HOST:PORT: %w", bind, err)
	}
	a := &Allow{loopback: IsLoopback(host)}
	for _, n := range names {
		name, err := cleanName(n)
		if err != nil {
			return nil, err
		}
		a.names = append(a.names, name)
	}
	if a.loopback {
		return a, nil
	}
	if len(a.names) == 0 {
		return nil, nil
	}
	if ip := net.ParseIP(host); host != "" && (ip == nil || !ip.IsUnspecified()) {
		a.names = append(a.names, strings.ToLower(strings.Trim(host, "[]")))
	}
	return a, nil
}

// cleanName is n as Allows compares it: lower case, without a port or
// brackets. A URL, a path or an empty name is refused.
func cleanName(n string) (string, error) {
	name := n
	if h, _, err := net.SplitHostPort(n); err == nil {
		name = h
	}
	name = strings.ToLower(strings.Trim(name, "[]"))
	if name == "" || strings.ContainsAny(n, "/@?# \t") {
		return "", fmt.Errorf("host name %q: want a name or address, like cuecast.example (no scheme or path)", n)
	}
	return name, nil
}

// Allows reports whether a request whose Host header is host (with or
// without a port) may be answered.
func (a *Allow) Allows(host string) bool {
	if a == nil {
		return true
	}
	h := hostOnly(host)
	if a.loopback && IsLoopback(h) {
		return true
	}
	return slices.Contains(a.names, strings.ToLower(h))
}

// Names describes what a answers, for a refusal's message.
func (a *Allow) Names() string {
	var s []string
	if a.loopback {
		s = append(s, "127.0.0.1", "[::1]", "localhost")
	}
	return strings.Join(append(s, a.names...), ", ")
}

// Guard serves h only requests a allows; any other it hands to refuse,
// which answers 421 Misdirected Request in its protocol's words.
func Guard(h http.Handler, a *Allow, refuse func(w http.ResponseWriter, r *http.Request, msg string)) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.Allows(r.Host) {
			refuse(w, r, fmt.Sprintf("host %q: this server answers requests to %s only", r.Host, a.Names()))
			return
		}
		h.ServeHTTP(w, r)
	})
}

// IsLoopback reports whether a Host header or a bind address's host, with
// or without a port, names a loopback address or localhost.
func IsLoopback(host string) bool {
	host = hostOnly(host)
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func hostOnly(host string) string {
	if h, _, err := net.SplitHostPort(host); err == nil {
		return h
	}
	return strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
}
