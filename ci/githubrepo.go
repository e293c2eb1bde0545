package ci

import (
	"net/url"
	"strings"
)

// ParseGitHubRepo returns the owner and name of the GitHub repository a
// clone URL names: https://github.com/OWNER/NAME(.git), ssh:// or git://
// URLs on github.com, or the scp-like git@github.com:OWNER/NAME.git. ok is
// false for any other URL or path.
func ParseGitHubRepo(u string) (owner, name string, ok bool) {
	var path string
	if user, rest, scp := strings.Cut(u, "@github.com:"); scp && !strings.Contains(user, "/") {
		path = rest
	} else {
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http" && pu.Scheme != "ssh" && pu.Scheme != "git") ||
			!strings.EqualFold(pu.Hostname(), "github.com") {
			return "", "", false
		}
		path = strings.TrimPrefix(pu.Path, "/")
	}
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	owner, name, ok = strings.Cut(path, "/")
	if !ok || owner == "" || name == "" || strings.Contains(name, "/") {
		return "", "", false
	}
	return owner, name, true
}
