package web

import (
	"net/url"

	"github.com/go-git/go-git/v5"

	"github.com/cuecast/cuecast/ci"
)

// GitHubCommitURL returns a function linking a commit to its page on GitHub
// when repo is a GitHub repository (ci.ParseGitHubRepo), or a local clone
// whose "origin" remote is one. It returns nil otherwise.
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

// githubBase is "https://github.com/<owner>/<repo>" for a GitHub clone URL,
// or "" when u is not one.
func githubBase(u string) string {
	owner, name, ok := ci.ParseGitHubRepo(u)
	if !ok {
		return ""
	}
	return "https://github.com/" + owner + "/" + name
}
