package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/google/go-github/v60/github"
	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/publish"
	"github.com/cuecast/cuecast/internal/revert"
)

// RevertOptions are the flags of `cuecast revert`.
type RevertOptions struct {
	Commit     string
	Repo       string
	Push       bool
	GitHubPR   bool
	Remote     string
	GitHubRepo string
	APIURL     string
	Token      string
	Output     string
}

// revertResult is what revert did, which it prints: for people, or as one
// JSON object with --output json.
type revertResult struct {
	// Commit is the revert commit, Reverted the commit it reverts.
	Commit   string `json:"commit"`
	Reverted string `json:"reverted"`
	Branch   string `json:"branch"`
	Subject  string `json:"subject"`
	// Pushed: Branch was pushed to Remote.
	Pushed      bool          `json:"pushed"`
	Remote      string        `json:"remote,omitempty"`
	PullRequest *revertPRJSON `json:"pull_request,omitempty"`
}

type revertPRJSON struct {
	Number int    `json:"number"`
	URL    string `json:"url"`
}

func (res revertResult) write(w io.Writer, output string) error {
	if output == "json" {
		return writeJSON(w, res)
	}
	fmt.Fprintf(w, "created %s on %s: %s\n", cuecast.ShortCommit(res.Commit), res.Branch, res.Subject)
	if !res.Pushed {
		fmt.Fprintf(w, "push it (git push, or cuecast revert --push) and the pipeline rolls it out as a new version\n")
		return nil
	}
	fmt.Fprintf(w, "pushed %s to %s\n", res.Branch, res.Remote)
	if pr := res.PullRequest; pr != nil {
		fmt.Fprintf(w, "opened pull request #%d: %s\n", pr.Number, pr.URL)
	}
	return nil
}

func newRevertCmd(env *Env, runF func(*cobra.Command, *RevertOptions) error) *cobra.Command {
	opts := &RevertOptions{}
	cmd := &cobra.Command{
		Use:   "revert COMMIT [--repo DIR] [--push | --github-pr]",
		Short: "Make the revert commit for a config change: Git is the rollback",
		Long: `Revert creates, on the current branch of --repo, a commit restoring the content
COMMIT's first parent had for every file COMMIT changed. When a later commit changed one
of those files too, it refuses (reverting would silently undo that later work): revert
the later commit first, or edit by hand.

Once the revert reaches main, the tailer publishes it as a new version whose content
equals the one before COMMIT; if an emergency rollback pinned the config to that
version, the pin lifts by itself.

--push pushes the branch to --remote. --github-pr instead commits on a new branch
cuecast/revert-<commit>, pushes it and opens a pull request with the GitHub API
(token from $GITHUB_TOKEN, repository from --github-repo, $GITHUB_REPOSITORY or the
remote's URL, API root from $GITHUB_API_URL).

A revert that cannot be published is taken back whole: when the push or the pull
request fails, the branch and the work tree are where they were before the command
(untracked files untouched), the cuecast/revert-<commit> branch is deleted, and from
the remote too when its push had succeeded; the error says so. Fix the cause (pull,
when the remote moved on) and run the same command again. If deleting the pushed
branch fails as well, the error names it: delete it before the retry.`,
		Example: `  cuecast revert 3f9c2a1 --repo ~/src/configs
  cuecast revert 3f9c2a1 --repo . --github-pr`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return usageErrorf("cuecast revert COMMIT --repo DIR", "revert takes one COMMIT, got %d arguments", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.Commit = args[0]
			if err := validateOutput(opts.Output, "text", "json"); err != nil {
				return err
			}
			if opts.Push && opts.GitHubPR {
				return usageErrorf("--github-pr pushes its own branch", "--push and --github-pr exclude each other")
			}
			githubFromEnv(env, &opts.Token, &opts.GitHubRepo, &opts.APIURL)
			if runF != nil {
				return runF(c, opts)
			}
			return revertRun(c.Context(), env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Repo, "repo", ".", "the config repository (a work tree, on the branch to revert on)")
	cmd.Flags().BoolVar(&opts.Push, "push", false, "push the branch to --remote after committing")
	cmd.Flags().BoolVar(&opts.GitHubPR, "github-pr", false, "commit on a new branch, push it and open a pull request")
	cmd.Flags().StringVar(&opts.Remote, "remote", "origin", "remote to push to")
	cmd.Flags().StringVar(&opts.GitHubRepo, "github-repo", "", "OWNER/NAME for --github-pr (default $GITHUB_REPOSITORY or the remote's URL)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "output format: text or json")
	cmd.Flags().StringVar(&opts.APIURL, "github-api-url", "", "GitHub API root (default $GITHUB_API_URL or https://api.github.com)")
	return cmd
}

func revertRun(ctx context.Context, env *Env, opts *RevertOptions) error {
	r, err := gitfs.Open(opts.Repo) // also a linked worktree
	if err != nil {
		return &UsageError{Err: fmt.Errorf("open repository %s: %w", opts.Repo, err), Hint: "point --repo at the config repository's work tree"}
	}
	target, err := r.ResolveRevision(plumbing.Revision(opts.Commit))
	if err != nil {
		return &UsageError{Err: fmt.Errorf("find commit %s in %s: %w", opts.Commit, opts.Repo, err), Hint: "name a commit on the branch (a hash or a prefix of one)"}
	}
	wt, err := r.Worktree()
	if err != nil {
		return &UsageError{Err: fmt.Errorf("open work tree of %s: %w", opts.Repo, err), Hint: "revert needs a work tree, not a bare repository"}
	}
	st, err := wt.Status()
	if err != nil {
		return fmt.Errorf("read status of %s: %w", opts.Repo, err)
	}
	for name, fs := range st {
		if fs.Worktree != git.Untracked || fs.Staging != git.Untracked {
			return &UsageError{Err: fmt.Errorf("work tree of %s has uncommitted changes (%s, …)", opts.Repo, name), Hint: "commit or stash them first"}
		}
	}
	head, err := r.Head()
	if err != nil {
		return fmt.Errorf("read HEAD of %s: %w", opts.Repo, err)
	}
	if !head.Name().IsBranch() {
		return &UsageError{Err: fmt.Errorf("HEAD of %s is detached", opts.Repo), Hint: "check out the branch to revert on (main)"}
	}
	sig, err := signature(env, r)
	if err != nil {
		return err
	}
	// Everything a push or a pull request needs is checked before the
	// work tree changes: a failure after the push left a branch behind that
	// the retry then refused ("already exists").
	var remoteURL string
	var remoteAuthMethod transport.AuthMethod
	var ghOwner, ghName string
	if opts.GitHubPR && opts.Token == "" {
		return usageErrorf("export GITHUB_TOKEN with pull-request write access", "--github-pr needs a GitHub token")
	}
	if opts.Push || opts.GitHubPR {
		if remoteURL, remoteAuthMethod, err = remoteAuth(r, opts); err != nil {
			return err
		}
	}
	if opts.GitHubPR {
		if ghOwner, ghName, err = githubTarget(opts, remoteURL); err != nil {
			return err
		}
	}
	base := head.Name()
	branch := base
	if opts.GitHubPR {
		branch = plumbing.NewBranchReferenceName("cuecast/revert-" + cuecast.ShortCommit(target.String()))
		if err := wt.Checkout(&git.CheckoutOptions{Branch: branch, Create: true}); err != nil {
			return fmt.Errorf("create branch %s: %w", branch.Short(), err)
		}
	}
	// From here on a failure takes the revert back (undoRevert): a retry
	// after fixing the cause then starts where this command did, instead of
	// refusing because of this command's own commit or branch.
	h, err := revert.Commit(r, target.String(), sig)
	if err != nil {
		if uerr := undoRevert(r, wt, target.String(), head, branch); uerr != nil {
			return fmt.Errorf("%w; %v", err, uerr)
		}
		if errors.Is(err, revert.ErrConflict) {
			return &UsageError{Err: err, Hint: "revert the later commit first (cuecast revert LATER), or edit the file by hand"}
		}
		return err
	}
	c, err := r.CommitObject(h)
	if err != nil {
		return notCommitted(fmt.Errorf("read revert commit: %w", err), "", "", undoRevert(r, wt, target.String(), head, branch))
	}
	res := revertResult{Commit: h.String(), Reverted: target.String(), Branch: branch.Short(), Subject: cuecast.CommitSubject(c.Message)}
	if !opts.Push && !opts.GitHubPR {
		return res.write(env.IO.Out, opts.Output)
	}
	if err := publish.Push(ctx, r, opts.Remote, branch, remoteAuthMethod); err != nil {
		return notCommitted(err, "", " (pull first when the remote moved on)", undoRevert(r, wt, target.String(), head, branch))
	}
	res.Pushed, res.Remote = true, opts.Remote
	if !opts.GitHubPR {
		return res.write(env.IO.Out, opts.Output)
	}
	pr, err := openPR(ctx, opts, ghOwner, ghName, branch.Short(), base.Short(), c, target.String())
	if err != nil {
		// The branch is on the remote now: it goes, as the local one does.
		said, _ := publish.Withdraw(ctx, r, opts.Remote, branch, remoteAuthMethod)
		return notCommitted(err, "; "+said, "", undoRevert(r, wt, target.String(), head, branch))
	}
	res.PullRequest = &revertPRJSON{Number: pr.GetNumber(), URL: pr.GetHTMLURL()}
	if err := res.write(env.IO.Out, opts.Output); err != nil {
		return err
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: base}); err != nil {
		return fmt.Errorf("check out %s again: %w", base.Short(), err)
	}
	return nil
}

// undoRevert takes back a revert of target made on branch, the checked-out
// one, that cannot be published: head's branch and the work tree are as
// they were before the command (it checked the work tree was clean), and
// branch, the pull request's when it is not head's, is deleted.
func undoRevert(r *git.Repository, wt *git.Worktree, target string, head *plumbing.Reference, branch plumbing.ReferenceName) error {
	if err := undoSteps(r, wt, target, head, branch); err != nil {
		return fmt.Errorf("taking the revert back failed, look at %s before running the command again (git status, git log): %w", branch.Short(), err)
	}
	return nil
}

func undoSteps(r *git.Repository, wt *git.Worktree, target string, head *plumbing.Reference, branch plumbing.ReferenceName) error {
	base := head.Name()
	if err := revert.Undo(r, target, head.Hash()); err != nil {
		return err
	}
	if branch == base {
		return nil
	}
	if err := wt.Checkout(&git.CheckoutOptions{Branch: base}); err != nil {
		return fmt.Errorf("check out %s: %w", base.Short(), err)
	}
	if err := r.Storer.RemoveReference(branch); err != nil {
		return fmt.Errorf("delete branch %s: %w", branch.Short(), err)
	}
	return nil
}

// notCommitted is the error of a revert that could not be published: err,
// what happened on the remote, and that nothing was committed locally
// (undoErr nil: then how to retry, with fix's advice) or why the local
// commit is still there.
func notCommitted(err error, remote, fix string, undoErr error) error {
	if undoErr != nil {
		return fmt.Errorf("%w%s; %v", err, remote, undoErr)
	}
	return fmt.Errorf("%w%s; nothing was committed locally: fix the cause%s and run the command again", err, remote, fix)
}

// githubFromEnv fills what the flags left empty of a pull request's
// token, OWNER/NAME and API root from the environment GitHub Actions sets.
func githubFromEnv(env *Env, token, repo, apiURL *string) {
	for _, f := range []struct {
		v   *string
		key string
	}{{token, "GITHUB_TOKEN"}, {repo, "GITHUB_REPOSITORY"}, {apiURL, "GITHUB_API_URL"}} {
		if *f.v == "" {
			*f.v = env.Getenv(f.key)
		}
	}
}

// signature is the author of the revert: the Git identity git commit and
// git revert would use, $GIT_AUTHOR_NAME and $GIT_AUTHOR_EMAIL first (CI
// sets them), then the repository's config, then the global one. Git is the
// audit log, so a revert is never committed under a made-up name.
func signature(env *Env, r *git.Repository) (*object.Signature, error) {
	cfg, err := r.ConfigScoped(config.GlobalScope)
	if err != nil {
		return nil, fmt.Errorf("read git config: %w", err)
	}
	name, email := cfg.User.Name, cfg.User.Email
	if v := env.Getenv("GIT_AUTHOR_NAME"); v != "" {
		name = v
	}
	if v := env.Getenv("GIT_AUTHOR_EMAIL"); v != "" {
		email = v
	}
	if name == "" || email == "" {
		return nil, usageErrorf(`set it as for git commit: git config --global user.name "Your Name" && git config --global user.email you@example.com`,
			"no Git identity (user.name and user.email) to author the commit")
	}
	return &object.Signature{Name: name, Email: email, When: time.Now()}, nil
}

// remoteAuth returns the remote's URL and the credentials to push to it: a
// token over HTTPS, nothing for local and SSH remotes (the agent answers).
func remoteAuth(r *git.Repository, opts *RevertOptions) (string, transport.AuthMethod, error) {
	url, err := publish.RemoteURL(r, opts.Remote)
	if err != nil {
		return "", nil, &UsageError{Err: err, Hint: "add the remote, or name one with --remote"}
	}
	return url, publish.TokenAuth(url, opts.Token), nil
}

// githubTarget is the OWNER/NAME a pull request goes to.
func githubTarget(opts *RevertOptions, remoteURL string) (owner, name string, err error) {
	owner, name, err = publish.Repo(opts.GitHubRepo, remoteURL)
	if err != nil {
		return "", "", usageErrorf("pass --github-repo OWNER/NAME", "%v", err)
	}
	return owner, name, nil
}

func openPR(ctx context.Context, opts *RevertOptions, owner, name, head, base string, c *object.Commit, target string) (*github.PullRequest, error) {
	body := fmt.Sprintf("%s\n\nOpened by `cuecast revert %s`. Merging it rolls the previous content out as a new version and lifts an emergency-rollback pin on it.", strings.TrimSpace(c.Message), cuecast.ShortCommit(target))
	gh := publish.GitHub{APIURL: opts.APIURL, Token: opts.Token, Owner: owner, Name: name}
	return publish.PullRequest(ctx, gh, head, base, cuecast.CommitSubject(c.Message), body)
}
