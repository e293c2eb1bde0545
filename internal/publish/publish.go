// Package publish is how cuecast hands a commit it made to the people who
// review it: pushing a branch to the repository's remote and opening a
// GitHub pull request for it. `cuecast revert` and the mutator (`cuecast
// set`, the HTTP API) share it.
package publish

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/google/go-github/v60/github"

	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/internal/redact"
)

// GitHub names where a pull request goes and how to log in.
type GitHub struct {
	// APIURL is the API root; empty or https://api.github.com for github.com.
	APIURL string
	Token  string
	// Owner and Name are the repository (OWNER/NAME).
	Owner, Name string
}

// RemoteURL returns the first URL of remote in r.
func RemoteURL(r *git.Repository, remote string) (string, error) {
	rem, err := r.Remote(remote)
	if err != nil {
		return "", fmt.Errorf("remote %q: %w", remote, err)
	}
	return rem.Config().URLs[0], nil
}

// TokenAuth is the authentication for pushing to url with a GitHub token:
// basic auth over HTTPS, nothing for local and SSH remotes (the agent
// answers those).
func TokenAuth(url, token string) transport.AuthMethod {
	if strings.HasPrefix(url, "https://") && token != "" {
		return &githttp.BasicAuth{Username: "x-access-token", Password: token}
	}
	return nil
}

// Repo returns the OWNER/NAME a pull request goes to: repo when set
// ("OWNER/NAME"), else the one the remote URL names on GitHub.
func Repo(repo, remoteURL string) (owner, name string, err error) {
	owner, name, ok := strings.Cut(repo, "/")
	if repo == "" {
		if owner, name, ok = ci.ParseGitHubRepo(remoteURL); !ok {
			return "", "", fmt.Errorf("cannot tell the GitHub repository from remote URL %s", redact.URLs(remoteURL))
		}
	}
	if !ok || owner == "" || name == "" {
		return "", "", fmt.Errorf("GitHub repository %q is not OWNER/NAME", repo)
	}
	return owner, name, nil
}

// Push pushes branch of r to the same branch of remote. A branch already up
// to date is not an error.
func Push(ctx context.Context, r *git.Repository, remote string, branch plumbing.ReferenceName, auth transport.AuthMethod) error {
	spec := config.RefSpec(fmt.Sprintf("%s:%s", branch, branch))
	err := r.PushContext(ctx, &git.PushOptions{RemoteName: remote, RefSpecs: []config.RefSpec{spec}, Auth: auth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("push %s to %s: %w", branch.Short(), remote, err)
	}
	return nil
}

// DeleteBranch deletes branch from remote: a branch pushed for a pull
// request that could not be opened. A branch already gone is not an error.
func DeleteBranch(ctx context.Context, r *git.Repository, remote string, branch plumbing.ReferenceName, auth transport.AuthMethod) error {
	spec := config.RefSpec(":" + branch.String())
	err := r.PushContext(ctx, &git.PushOptions{RemoteName: remote, RefSpecs: []config.RefSpec{spec}, Auth: auth})
	if err != nil && !errors.Is(err, git.NoErrAlreadyUpToDate) {
		return fmt.Errorf("delete %s from %s: %w", branch.Short(), remote, err)
	}
	return nil
}

// Withdraw deletes branch, pushed for a pull request that was not opened,
// from remote, and says what became of it, for the error that follows: a
// branch left there, with no pull request, would make the retry's push of
// a new commit to it fail. gone is false when it is still there.
func Withdraw(ctx context.Context, r *git.Repository, remote string, branch plumbing.ReferenceName, auth transport.AuthMethod) (said string, gone bool) {
	if err := DeleteBranch(ctx, r, remote, branch, auth); err != nil {
		return fmt.Sprintf("%s stays on %s (%v): delete it (git push %s --delete %s) before trying again",
			branch.Short(), remote, err, remote, branch.Short()), false
	}
	return fmt.Sprintf("%s was deleted from %s again", branch.Short(), remote), true
}

// PullRequest opens a pull request from head into base on gh's repository.
func PullRequest(ctx context.Context, gh GitHub, head, base, title, body string) (*github.PullRequest, error) {
	c := github.NewClient(&http.Client{Timeout: 30 * time.Second}).WithAuthToken(gh.Token)
	if gh.APIURL != "" && gh.APIURL != "https://api.github.com" {
		var err error
		if c, err = c.WithEnterpriseURLs(gh.APIURL, gh.APIURL); err != nil {
			return nil, fmt.Errorf("GitHub API URL %s: %w", gh.APIURL, err)
		}
	}
	pr, _, err := c.PullRequests.Create(ctx, gh.Owner, gh.Name, &github.NewPullRequest{
		Title: github.String(title), Head: github.String(head), Base: github.String(base), Body: github.String(body),
	})
	if err != nil {
		return nil, fmt.Errorf("open pull request on %s/%s: %w", gh.Owner, gh.Name, err)
	}
	return pr, nil
}
