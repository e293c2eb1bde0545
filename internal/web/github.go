package web

import (
	"net/url"
	"strings"

	"github.com/go-git/go-git/v5"
)

// GitHubCommitURL returns a function linking a commit to its page on GitHub
// when repo is a GitHub repository: an https, ssh or scp-like GitHub URL, or
// a local clone whose "origin" remote is one. It returns nil otherwise.
func GitHubCommitURL(repo string) func(sha string) string {
	base := githubBase(repo)
	if base == "" {
		if r, err := git.PlainOpenWithOptions(repo, &git.PlainOpenOptions{DetectDotGit: true}); err == nil {
			if rem, err := r.Remote("origin"); err == nil && len(rem.Config().URLs) > 0 {
				base = githubBase(rem.Config().URLs[0])
			}
		}
	}
	if base == "" {
		return nil
	}
	return func(sha string) string { return base + "/commit/" + url.PathEscape(sha) }
}

// githubBase turns a GitHub clone URL into "https://github.com/<owner>/<repo>",
// or "" when u is not one.
func githubBase(u string) string {
	var path string
	switch {
	case strings.HasPrefix(u, "git@github.com:"):
		path = strings.TrimPrefix(u, "git@github.com:")
	default:
		pu, err := url.Parse(u)
		if err != nil || (pu.Scheme != "https" && pu.Scheme != "http" && pu.Scheme != "ssh" && pu.Scheme != "git") ||
			!strings.EqualFold(pu.Hostname(), "github.com") {
			return ""
		}
		path = strings.TrimPrefix(pu.Path, "/")
	}
	path = strings.TrimSuffix(strings.TrimSuffix(path, "/"), ".git")
	parts := strings.Split(path, "/")
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" {
		return ""
	}
	return "https://github.com/" + parts[0] + "/" + parts[1]
}
