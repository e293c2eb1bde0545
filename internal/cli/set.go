package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/mail"
	"strings"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/gitfs"
	"github.com/cuecast/cuecast/internal/publish"
	"github.com/cuecast/cuecast/internal/termtext"
	"github.com/cuecast/cuecast/mutator"
)

// SetOptions are the flags of `cuecast set` and, with Flag, of `cuecast
// flags set`.
type SetOptions struct {
	Configs    []string
	Assign     []string
	Expect     []string
	Variant    string
	Reason     string
	As         string
	Commit     bool
	Branch     string
	GitHubPR   bool
	At         string
	DryRun     bool
	Repo       string
	Remote     string
	GitHubRepo string
	APIURL     string
	Token      string
	Git        GitCredentials
	Output     string
}

// setLong is the part of the help `cuecast set` and `cuecast flags set`
// share: where a change lands, and the exit statuses.
const setLong = `
Where the change lands: --commit commits on the branch checked out in --repo (the
work tree follows) and pushes it when --remote exists; --branch B commits on branch B
(created from HEAD when missing; a name git check-ref-format accepts) and pushes it; --github-pr commits on a new branch
cuecast/set-<commit>, pushes it and opens a pull request into the branch checked out
(token from $GITHUB_TOKEN, repository from --github-repo, $GITHUB_REPOSITORY or the
remote's URL). --dry-run verifies and prints the report without committing. Pushes use
serve's Git credentials (--git-token-file, --git-ssh-key), or $GITHUB_TOKEN over https.

The commit's author is --as ("Name <email>"; default the Git identity git commit would use: $GIT_AUTHOR_NAME and $GIT_AUTHOR_EMAIL, then git config),
its message says what changed and --reason says why; trailers name who asked
(Cuecast-Requested-By) and the tool (Cuecast-Mutator), which cuecast log shows.
Concurrent changes to one repository are applied one at a time, each on the head as
it is then (docs/CHANGING.md).

Exit status: 0 done, 1 cuecast failed (Git, GitHub), 2 wrong usage (no such config,
path or variant, a value that is not a literal), 3 the change would break a config
(the compiler's errors are printed, nothing is written), 5 the value changed since it
was read (set's --expect, or the flag flags set read; the current value is printed), 6 the value's origin is not a literal cuecast edits (where
it comes from and what to change instead are printed), or the manifest's changes:
policy does not allow the change (docs/CHANGING.md).`

func newSetCmd(env *Env, runF func(*cobra.Command, *SetOptions) error) *cobra.Command {
	opts := &SetOptions{}
	cmd := &cobra.Command{
		Use:   "set CONFIG... PATH=VALUE... --reason TEXT (--commit | --branch B | --github-pr)",
		Short: "Change values at their origin, as a verified commit or pull request",
		Long: `Set changes each PATH (a CUE path of the compiled output, as cuecast explain prints
it) of each CONFIG to VALUE (exactly one CUE literal, without a comment: 8081, "eu",
true, 1e3; a bare word is a string where the value is one). For each value it finds the origin, as cuecast explain
does: a literal in the repo, or a default written in the config's own directory, is
replaced where it is written, every other byte of the file unchanged. A value that is
computed, read through a reference, injected by a variant's tag or defaulted by a
schema is refused, saying where it comes from and what would have to change; with
--at FILE (a .cue file in the config's directory) it is set there as a field instead.

Before anything is written the configs the change affects are recompiled, as cuecast
check does, and the change is refused with the compiler's own errors if it breaks the
schema, a lint or a config importing it. The report is check's: compiled diff, risk,
variants, flag shares moved.

--expect PATH=OLD makes the change conditional on the current value (compare and set):
a change made in between fails it instead of being overwritten. Naming several
configs changes them all in one commit.
` + setLong,
		Example: `  cuecast set payments/checkout currency=USD --reason "US launch" --commit
  cuecast set search/suggest settings.max_suggestions=12 --variant env=prod,region=eu --reason "…" --github-pr
  cuecast set growth/flags 'flags."new-checkout".on=false' --expect 'flags."new-checkout".on=true' --reason "incident 42" --commit`,
		RunE: func(c *cobra.Command, args []string) error {
			for _, a := range args {
				if strings.Contains(a, "=") && !looksLikeVariantPath(a) {
					opts.Assign = append(opts.Assign, a)
				} else if len(opts.Assign) > 0 {
					return usageErrorf("name the configs first, then PATH=VALUE", "config %s after an assignment", a)
				} else {
					opts.Configs = append(opts.Configs, a)
				}
			}
			if len(opts.Configs) == 0 || len(opts.Assign) == 0 {
				return usageErrorf("cuecast set CONFIG PATH=VALUE --reason TEXT --commit", "set needs a CONFIG and at least one PATH=VALUE")
			}
			if err := opts.validate(env); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			req, err := opts.request(nil)
			if err != nil {
				return err
			}
			return opts.run(c.Context(), env, req)
		},
	}
	opts.register(cmd.Flags(), env)
	cmd.Flags().StringArrayVar(&opts.Expect, "expect", nil, "PATH=OLD: change only if PATH is OLD now (repeatable)")
	cmd.Flags().StringVar(&opts.At, "at", "", "set values that are not literals by adding a field to this .cue file of the config's directory (not _x.cue or .x.cue, which CUE ignores)")
	return cmd
}

// looksLikeVariantPath tells a variant path (search/suggest/env=prod) from
// an assignment: its part before "=" is a config path with a slash.
func looksLikeVariantPath(a string) bool {
	before, _, _ := strings.Cut(a, "=")
	return strings.Contains(before, "/") && !strings.ContainsAny(before, `."[`)
}

func (o *SetOptions) register(fs *pflag.FlagSet, env *Env) {
	registerVariant(fs, &o.Variant)
	fs.StringVar(&o.Reason, "reason", "", "why: the commit message's body, plain text (lines and tabs; no control characters) (required)")
	fs.StringVar(&o.As, "as", "", `who asked, "Name <email>": the commit's author (default: $GIT_AUTHOR_NAME and $GIT_AUTHOR_EMAIL, then git config, as git commit)`)
	fs.BoolVar(&o.Commit, "commit", false, "commit on the branch checked out and push it if the remote exists")
	fs.StringVar(&o.Branch, "branch", "", "commit on this branch (created from HEAD if missing) and push it if the remote exists")
	fs.BoolVar(&o.GitHubPR, "github-pr", false, "commit on a new branch, push it and open a pull request")
	fs.BoolVar(&o.DryRun, "dry-run", false, "verify and report the change without committing")
	fs.StringVar(&o.Repo, "repo", ".", "the config repository (a work tree)")
	fs.StringVar(&o.Remote, "remote", "origin", "remote to push to")
	fs.StringVar(&o.GitHubRepo, "github-repo", "", "OWNER/NAME for --github-pr (default $GITHUB_REPOSITORY or the remote's URL)")
	fs.StringVar(&o.APIURL, "github-api-url", "", "GitHub API root (default $GITHUB_API_URL or https://api.github.com)")
	registerOutput(fs, &o.Output)
	o.Git.flags(fs)
}

func (o *SetOptions) validate(env *Env) error {
	for _, c := range o.Configs {
		if err := cuecast.ConfigPath(c).Validate(); err != nil {
			return &UsageError{Err: err, Hint: "name configs by their directory, like payments/checkout"}
		}
	}
	if o.Reason == "" {
		return usageErrorf(`say why with --reason "…": it is the commit message`, "--reason is required")
	}
	if o.As != "" {
		// The commit's author: a bare name would be "bob <>".
		if _, err := mail.ParseAddress(o.As); err != nil {
			return usageErrorf(`write --as "Ann Lee <ann@example.com>"`, `--as %q: want "Name <email>" or an e-mail address`, o.As)
		}
	}
	modes := 0
	for _, b := range []bool{o.Commit, o.Branch != "", o.GitHubPR, o.DryRun} {
		if b {
			modes++
		}
	}
	if modes != 1 && !(modes == 2 && o.DryRun && (o.Commit || o.Branch != "" || o.GitHubPR)) {
		return usageErrorf("pass one of --commit, --branch B, --github-pr (or --dry-run)", "where the change lands is not given, or given twice")
	}
	githubFromEnv(env, &o.Token, &o.GitHubRepo, &o.APIURL)
	if o.GitHubPR && o.Token == "" && !o.DryRun {
		return usageErrorf("export GITHUB_TOKEN with pull-request write access", "--github-pr needs a GitHub token")
	}
	return validateOutput(o.Output, "text", "json")
}

// request is the mutator's request for the options; set, when not nil,
// replaces the assignments (cuecast flags set computes its own).
func (o *SetOptions) request(set []mutator.Assignment) (mutator.Request, error) {
	req := mutator.Request{Reason: o.Reason, At: o.At, DryRun: o.DryRun, Branch: o.Branch, Set: set}
	for _, c := range o.Configs {
		req.Configs = append(req.Configs, cuecast.ConfigPath(c))
	}
	if o.Variant != "" {
		dims, err := cuecast.ParseVariant(o.Variant)
		if err != nil {
			return req, &UsageError{Err: fmt.Errorf("--variant: %w", err), Hint: "write --variant env=prod,region=eu"}
		}
		req.Variant = dims
	}
	switch {
	case o.GitHubPR:
		req.Mode = mutator.ModePR
	case o.Branch != "":
		req.Mode = mutator.ModeBranch
	default:
		req.Mode = mutator.ModeCommit
	}
	var err error
	if set == nil {
		if req.Set, err = assignments(o.Assign, "PATH=VALUE"); err != nil {
			return req, err
		}
	}
	if req.Expect, err = assignments(o.Expect, "--expect PATH=OLD"); err != nil {
		return req, err
	}
	return req, nil
}

// assignments parses PATH=VALUE; the "=" is the first one outside quotes,
// so a quoted label may hold one.
func assignments(args []string, form string) ([]mutator.Assignment, error) {
	var out []mutator.Assignment
	for _, a := range args {
		quoted := false
		i := strings.IndexFunc(a, func(r rune) bool {
			if r == '"' {
				quoted = !quoted
			}
			return r == '=' && !quoted
		})
		if i <= 0 {
			return nil, usageErrorf("write "+form+`, like server.port=8081 or 'labels."app"="web"'`, "%q is not %s", a, form)
		}
		out = append(out, mutator.Assignment{Path: a[:i], Value: a[i+1:]})
	}
	return out, nil
}

// mutator opens the repository and returns the mutator with the push and
// pull-request settings of the options, and who asks.
func (o *SetOptions) mutator(env *Env) (*mutator.Mutator, mutator.Identity, error) {
	r, err := openRepoDir(o.Repo)
	if err != nil {
		return nil, mutator.Identity{}, err
	}
	id, err := o.identity(env, r)
	if err != nil {
		return nil, id, err
	}
	mo, err := o.mutatorOptions(env, r, o.GitHubPR)
	if err != nil {
		return nil, id, err
	}
	return mutator.New(o.Repo, mo), id, nil
}

// mutatorOptions are the remote, its credentials and the GitHub repository
// a change is pushed to and opened against; needRepo fails when the GitHub
// repository cannot be told (serve resolves it when it can: only its pull
// requests need it).
func (o *SetOptions) mutatorOptions(env *Env, r *git.Repository, needRepo bool) (mutator.Options, error) {
	mo := mutator.Options{Remote: o.Remote, GitHub: publish.GitHub{APIURL: o.APIURL, Token: o.Token}}
	if url, err := publish.RemoteURL(r, o.Remote); err == nil {
		var auth transport.AuthMethod
		if auth, _, err = o.Git.auth(url, env.Getenv); err != nil {
			return mo, err
		}
		if auth == nil {
			auth = publish.TokenAuth(url, o.Token)
		}
		mo.Auth = auth
		owner, name, err := publish.Repo(o.GitHubRepo, url)
		switch {
		case err == nil:
			mo.GitHub.Owner, mo.GitHub.Name = owner, name
		case needRepo:
			return mo, usageErrorf("pass --github-repo OWNER/NAME", "%v", err)
		}
	}
	return mo, nil
}

func (o *SetOptions) run(ctx context.Context, env *Env, req mutator.Request) error {
	m, id, err := o.mutator(env)
	if err != nil {
		return err
	}
	req.Identity = id
	res, err := m.Set(ctx, req)
	return o.print(env, res, err)
}

// print writes the result, or the error's details for scripts.
func (o *SetOptions) print(env *Env, res *mutator.Result, err error) error {
	// A hint for people; JSON keeps the error as the mutator said it.
	if err != nil && o.Output != "json" && errors.Is(err, mutator.ErrBadRequest) {
		err = &UsageError{Err: err, Hint: badRequestHint(err, o.Configs)}
	}
	if err != nil {
		var ce *mutator.CompileError
		switch {
		case o.Output == "json":
			_ = writeJSON(env.IO.Out, map[string]any{"error": err.Error(), "details": err})
		case errors.As(err, &ce):
			// The error names the first; a reviewer wants every one, and
			// the report it points to (a reshuffle is only in the report).
			if len(ce.Errors) > 1 {
				for _, e := range ce.Errors {
					fmt.Fprintln(env.IO.ErrOut, termtext.Line(e.Error()))
				}
			}
			if ce.Report != nil {
				_ = ce.Report.WriteText(env.IO.Out)
			}
		}
		return err
	}
	if o.Output == "json" {
		return writeJSON(env.IO.Out, res)
	}
	writeSetText(env.IO.Out, res)
	if shared := o.sharedVariants(res); len(shared) > 0 {
		fmt.Fprintf(env.IO.Out, "\nnote: the literal edited is shared: it changes %s too (--at FILE sets the named variant's own value instead)\n", strings.Join(shared, ", "))
	}
	return nil
}

// sharedVariants are the variants the change alters beyond those the
// request named (--variant, or a variant path as CONFIG): a literal in a
// layer several variants read. The report shows them among the rest; a
// reader who named one variant is told.
func (o *SetOptions) sharedVariants(res *mutator.Result) []string {
	if res.Report == nil {
		return nil
	}
	dims, _ := cuecast.ParseVariant(o.Variant) // checked by request
	asked := map[cuecast.ConfigPath]bool{}
	for _, c := range o.Configs {
		p := cuecast.ConfigPath(c)
		if len(dims) > 0 {
			p = cuecast.VariantPath(p.Base(), dims)
		}
		if p != p.Base() {
			asked[p] = true
		}
	}
	if len(asked) == 0 {
		return nil
	}
	var out []string
	for _, cc := range res.Report.Configs {
		if cc.Status == ci.StatusChanged && cc.Config != cc.Config.Base() && !asked[cc.Config] {
			out = append(out, string(cc.Config))
		}
	}
	return out
}

func writeSetText(w io.Writer, res *mutator.Result) {
	for _, v := range res.Values {
		// The file edited and the values are a commit's choosing.
		fmt.Fprintln(w, termtext.Line(fmt.Sprintf("%s %s: %s -> %s  (%s at %s)", v.Config, v.Path, v.Old, v.New, v.Origin, v.Edited)))
	}
	switch {
	case res.Unchanged:
		fmt.Fprintln(w, "unchanged: every value already is the one asked for; nothing committed")
		return
	case res.Branch == "":
		fmt.Fprintf(w, "dry run: would commit %s on %s (not committed)\n", cuecast.ShortCommit(res.Commit), cuecast.ShortCommit(res.Base))
	default:
		fmt.Fprintf(w, "committed %s on %s", cuecast.ShortCommit(res.Commit), res.Branch)
		if res.Pushed {
			fmt.Fprint(w, ", pushed")
		}
		fmt.Fprintln(w)
	}
	if res.PullRequest != nil {
		fmt.Fprintf(w, "opened pull request #%d: %s\n", res.PullRequest.Number, res.PullRequest.URL)
	}
	fmt.Fprintln(w)
	_ = res.Report.WriteText(w)
}

// identity is who asks: --as, or the Git identity git commit would use.
func (o *SetOptions) identity(env *Env, r *git.Repository) (mutator.Identity, error) {
	if o.As != "" {
		a, err := mail.ParseAddress(o.As)
		switch {
		case err != nil:
			return mutator.Identity{}, &UsageError{Err: fmt.Errorf("--as %q: %w", o.As, err), Hint: `write --as "Ann Lee <ann@example.com>"`}
		case a.Name == "":
			return mutator.Identity{Name: a.Address, Email: a.Address}, nil
		}
		return mutator.Identity{Name: a.Name, Email: a.Address}, nil
	}
	sig, err := signature(env, r)
	if err != nil {
		return mutator.Identity{}, err
	}
	return mutator.Identity{Name: sig.Name, Email: sig.Email}, nil
}

func openRepoDir(dir string) (*git.Repository, error) {
	r, err := gitfs.Open(dir)
	if err != nil {
		return nil, &UsageError{Err: fmt.Errorf("open repository %s: %w", dir, err), Hint: "point --repo at the config repository's work tree"}
	}
	return r, nil
}

// badRequestHint says where to look for what a request named wrong.
func badRequestHint(err error, configs []string) string {
	cfg := "CONFIG"
	if len(configs) == 1 {
		cfg = configs[0]
	}
	switch {
	case errors.Is(err, compiler.ErrUnknownPath):
		return "`cuecast explain " + cfg + "` shows every path of its compiled output"
	case errors.Is(err, compiler.ErrUnknownConfig):
		return "name a config by its directory, like payments/checkout; `cuecast compile` lists them"
	case errors.Is(err, compiler.ErrUnknownVariant):
		return "`cuecast explain " + cfg + "` names its variants' dimensions; give --variant env=…,region=…"
	}
	return ""
}
