package cli

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/redact"
)

// CheckOptions are the flags of `cuecast check`.
type CheckOptions struct {
	Repo   string
	Base   string
	Head   string
	Output string
	FanOut int
	// GitHub reports to GitHub: a check run and a PR comment.
	GitHub     bool
	GitHubRepo string
	PR         int
	HeadSHA    string
	APIURL     string
	// Fleet counts the live instances running each affected config and
	// variant, from serve's NATS (NATS, Conn); without it nothing connects.
	Fleet bool
	NATS  string
	// Prometheus, when set, parses the analysis queries of the changed
	// configs' rollouts (ci.Report.CheckQueries).
	Prometheus string
	// PrometheusTimeout bounds each of its queries.
	PrometheusTimeout time.Duration
	Conn              ConnFlags
}

func newCheckCmd(env *Env, runF func(*cobra.Command, *CheckOptions) error) *cobra.Command {
	opts := &CheckOptions{}
	cmd := &cobra.Command{
		Use:   "check --base REV --head REV",
		Short: "Show what a change does to the compiled configs (the pull-request check)",
		Long: `Check compiles the configs a change affects at both revisions, straight from Git
objects (the work tree is not read or touched), and reports for each: added,
removed, renamed, changed (the compiled JSON diff: path, old → new), or unchanged
(its CUE changed, its output did not). A risk summary comes first: how many configs
and namespaces change, strict configs, library changes that reach many configs,
breaking changes (a field removed or its JSON type changed), and for feature flag
sets the share of users each changed rollout moves to another variant. Errors and
lint findings at head are listed as file:line:col: message [ID]; one the base already
had is marked pre-existing and does not fail the check.

With --fleet it also counts the instances that run what changes: it connects to
serve's NATS read-only (--nats and the credentials flags, as 'cuecast status' takes
them; the operator's credentials suffice), counts the live reports on each affected
path (a config with variants per variant, payments/checkout/env=prod/region=eu) and
says how many distinct instances run the outputs the change alters ("4 variants, 3
distinct outputs; 57 instances run them"); each config's row gets its count, and
--output json has "instances" per config and in the risk. A fleet that cannot be
reached or read is an error (exit 1), never a count of zero. Without --fleet nothing
connects: a check in CI runs offline.

When --base is not an ancestor of --head, the change is taken from their merge base,
as 'git diff base...head' does.

With --github it also reports to GitHub, from the Actions environment: GITHUB_TOKEN,
GITHUB_REPOSITORY, GITHUB_EVENT_PATH (the pull request's number, base and head) and
GITHUB_API_URL (GitHub Enterprise). It creates a check run on the head commit with an
annotation per error, and one PR comment, edited on every re-run. The comment (and
--output markdown) ends with where each changed value comes from at head, as
'cuecast explain' shows it. The token needs the
workflow permissions checks: write and pull-requests: write.

Exit status: 0 no new errors, 3 the change leaves configs invalid or reshuffles a flag
rollout's users more than its weights require (docs/FLAGS.md), 1 cuecast, the fleet count
(--fleet), writing the report or the GitHub report failed (the check run is then still
completed, or marked failed), 2 wrong usage (an unknown revision is named, or a
shallow clone lacks the history back to the merge base).`,
		Example: `  cuecast check --base main --head HEAD
  cuecast check --repo configs --base origin/main --head my-branch --output json
  cuecast check --base "$BASE_SHA" --head "$HEAD_SHA" --github
  cuecast check --base main --head HEAD --fleet --nats nats://ops.example:4222 --creds operator.creds`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErrorf("name the revisions with --base and --head", "check takes no arguments, got %q", args)
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			if err := validateOutput(opts.Output, "text", "json", "markdown"); err != nil {
				return err
			}
			if opts.FanOut < 1 {
				return usageErrorf(fmt.Sprintf("leave it out for the default, %d", ci.DefaultFanOut), "--fan-out %d: want 1 or more", opts.FanOut)
			}
			if !opts.Fleet && (c.Flags().Changed("nats") || opts.Conn != (ConnFlags{})) {
				return usageErrorf("add --fleet to count the instances", "--nats and the credentials and TLS flags need --fleet")
			}
			for _, f := range []string{"github-repo", "pr", "head-sha", "github-api-url"} {
				if !opts.GitHub && c.Flags().Changed(f) {
					return usageErrorf("add --github to report to GitHub", "--%s needs --github", f)
				}
			}
			if err := checkPrometheusTimeout(opts.PrometheusTimeout); err != nil {
				return err
			}
			if runF != nil {
				return runF(c, opts)
			}
			return checkRun(c, env, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Repo, "repo", ".", "the config repository (a Git work tree or bare repository)")
	cmd.Flags().StringVar(&opts.Base, "base", "", "the revision the change starts from (with --github: default the pull request's base)")
	cmd.Flags().StringVar(&opts.Head, "head", "", "the revision with the change (with --github: default the pull request's head)")
	cmd.Flags().StringVarP(&opts.Output, "output", "o", "text", "output format: text, json or markdown")
	cmd.Flags().IntVar(&opts.FanOut, "fan-out", ci.DefaultFanOut, "a library change altering this many compiled outputs is flagged as wide")
	cmd.Flags().BoolVar(&opts.GitHub, "github", false, "report to GitHub: a check run and a pull-request comment")
	cmd.Flags().StringVar(&opts.GitHubRepo, "github-repo", "", "owner/name on GitHub (default $GITHUB_REPOSITORY)")
	cmd.Flags().IntVar(&opts.PR, "pr", 0, "pull request number to comment on (default from $GITHUB_EVENT_PATH)")
	cmd.Flags().StringVar(&opts.HeadSHA, "head-sha", "", "commit to attach the check run to (default the pull request's head, else --head)")
	cmd.Flags().StringVar(&opts.APIURL, "github-api-url", "", "GitHub REST API root, used as given (default $GITHUB_API_URL, else https://api.github.com)")
	cmd.Flags().StringVar(&opts.Prometheus, "prometheus", "", "have this Prometheus parse the analysis queries the changed configs' rollouts are judged by (docs/ROLLOUT.md, \"Analysis\")")
	registerPrometheusTimeout(cmd.Flags(), &opts.PrometheusTimeout, "fails the check (exit 1)")
	cmd.Flags().BoolVar(&opts.Fleet, "fleet", false, "count the live instances that run each affected config and variant (connects to --nats)")
	cmd.Flags().StringVar(&opts.NATS, "nats", defaultNATSURL(env), "with --fleet: NATS server URL of serve")
	opts.Conn.Register(cmd.Flags())
	return cmd
}

func checkRun(c *cobra.Command, env *Env, opts *CheckOptions) error {
	ctx := c.Context()
	log := env.Logger()
	if opts.GitHub {
		if err := githubDefaults(env, opts); err != nil {
			return err
		}
	}
	if opts.Base == "" || opts.Head == "" {
		return usageErrorf("give both revisions, like --base main --head HEAD (with --github they come from the pull_request event)",
			"check needs --base and --head")
	}
	// The fleet is reached first: a wrong address or credentials fail
	// before the compile, and before a check run is started on GitHub.
	var fleet *liveFleet
	if opts.Fleet {
		// check never creates a stream (readStreams).
		d, done, err := readStreams(ctx, env, opts.NATS, "cuecast check", &opts.Conn)
		if err != nil {
			return fmt.Errorf("--fleet: %w", err)
		}
		defer done()
		fleet = &liveFleet{d: d}
	}
	var gh *ci.GitHub
	var run *ci.CheckRun
	var ghErrs []error
	if opts.GitHub {
		if opts.HeadSHA == "" {
			sha, err := ci.ResolveCommit(opts.Repo, opts.Head)
			if err != nil {
				return checkError(opts, err)
			}
			opts.HeadSHA = sha
		}
		g, err := ci.NewGitHub(ci.GitHubOptions{
			Token:      env.Getenv("GITHUB_TOKEN"),
			Repository: opts.GitHubRepo,
			APIURL:     opts.APIURL,
			PR:         opts.PR,
			HeadSHA:    opts.HeadSHA,
			DetailsURL: detailsURL(env, opts.GitHubRepo),
			Logger:     log,
		})
		if err != nil {
			return usageErrorf("run it in GitHub Actions, or set GITHUB_TOKEN and GITHUB_REPOSITORY (see ci/README.md)", "--github: %v", err)
		}
		gh = g
		// A refused check run does not stop the check: the report still
		// reaches the log and, when allowed, the pull request.
		if run, err = g.Start(ctx); err != nil {
			ghErrs = append(ghErrs, err)
			run = nil
		}
	}
	// Every return from here on completes the check run or aborts it:
	// one left in_progress shows on the pull request for ever.
	abort := func(cause error) {
		if run == nil {
			return
		}
		// On a context of its own: a cancelled job (Actions sends
		// SIGINT) cancels ctx, and the run must still be marked.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if err := run.Abort(actx, cause); err != nil {
			log.Error("could not mark the check run failed", "err", err)
		}
	}
	// The comment shows where each changed value comes from; without it
	// the check still reports, so Check only logs a failure to explain.
	explain := opts.Output == "markdown" || gh != nil
	rep, err := ci.Check(ctx, opts.Repo, ci.Options{Base: opts.Base, Head: opts.Head, FanOut: opts.FanOut, Logger: log, Explain: explain})
	if err != nil {
		err = checkError(opts, err)
		abort(err)
		return errors.Join(append([]error{err}, ghErrs...)...)
	}
	if fleet != nil {
		if err := rep.CountInstances(ctx, fleet); err != nil {
			err = fmt.Errorf("--fleet %s: %w", redact.URLs(opts.NATS), err)
			abort(err)
			return errors.Join(append([]error{err}, ghErrs...)...)
		}
	}
	if opts.Prometheus != "" {
		if err := checkQueries(ctx, rep, opts.Prometheus, opts.PrometheusTimeout); err != nil {
			abort(err)
			return errors.Join(append([]error{err}, ghErrs...)...)
		}
	}
	// A report that cannot be written to stdout still completes the check
	// run and writes the comment: returned early, it left the run
	// in_progress on GitHub for ever.
	outErr := writeCheckReport(env, opts.Output, rep)
	if run != nil {
		if err := run.Complete(ctx, rep); err != nil {
			ghErrs = append(ghErrs, err)
			abort(err)
		}
	}
	if gh != nil {
		if err := gh.Comment(ctx, rep); err != nil {
			ghErrs = append(ghErrs, err)
		}
	}
	ghErr := errors.Join(ghErrs...)
	switch {
	case outErr != nil:
		return errors.Join(outErr, ghErr)
	case rep.Failed():
		// Invalid configs decide the exit status; a failed report to
		// GitHub is still said.
		if ghErr != nil {
			fmt.Fprintf(env.IO.ErrOut, "cuecast: %v\n", ghErr)
		}
		return errInvalid
	case ghErr != nil:
		return ghErr
	}
	return nil
}

// writeCheckReport writes rep to stdout in the format output names.
func writeCheckReport(env *Env, output string, rep *ci.Report) error {
	switch output {
	case "json":
		return rep.WriteJSON(env.IO.Out)
	case "markdown":
		if _, err := fmt.Fprint(env.IO.Out, rep.Markdown(0)); err != nil {
			return fmt.Errorf("write report: %w", err)
		}
		return nil
	default:
		return rep.WriteText(env.IO.Out)
	}
}

// githubDefaults fills what the flags leave empty from the Actions
// environment: the repository, the API root, and from the event payload the
// pull request, its head commit and both revisions.
func githubDefaults(env *Env, opts *CheckOptions) error {
	if opts.GitHubRepo == "" {
		opts.GitHubRepo = env.Getenv("GITHUB_REPOSITORY")
	}
	if opts.APIURL == "" {
		opts.APIURL = env.Getenv("GITHUB_API_URL")
	}
	p := env.Getenv("GITHUB_EVENT_PATH")
	if p == "" {
		return nil
	}
	ev, err := ci.ReadEvent(p)
	if err != nil {
		return usageErrorf("GITHUB_EVENT_PATH must name the event payload file GitHub Actions writes", "--github: %v", err)
	}
	if opts.PR == 0 {
		opts.PR = ev.PR
	}
	if opts.HeadSHA == "" {
		opts.HeadSHA = ev.HeadSHA
	}
	if opts.Base == "" {
		opts.Base = ev.BaseSHA
	}
	if opts.Head == "" {
		opts.Head = ev.HeadSHA
	}
	return nil
}

// detailsURL links the check run to the Actions run that made it.
func detailsURL(env *Env, repo string) string {
	server, run := env.Getenv("GITHUB_SERVER_URL"), env.Getenv("GITHUB_RUN_ID")
	if server == "" || run == "" || repo == "" {
		return ""
	}
	return fmt.Sprintf("%s/%s/actions/runs/%s", server, repo, run)
}

// checkError turns what ci.Check refuses into usage errors that name the
// culprit.
func checkError(opts *CheckOptions, err error) error {
	var re *ci.RevisionError
	switch {
	case errors.Is(err, ci.ErrNotRepo):
		return usageErrorf("point --repo at a Git repository", "%s is not a git repository", opts.Repo)
	case errors.As(err, &re) && errors.Is(err, ci.ErrShallow):
		return usageErrorf("fetch the whole history (actions/checkout: fetch-depth: 0; locally: git fetch --unshallow)",
			"--%s %s: the history back to its merge base with %s is not fetched (a shallow clone)", re.Which, strconv.Quote(re.Rev), strconv.Quote(opts.Head))
	case errors.As(err, &re):
		return usageErrorf("check the name, and fetch the history the revisions need (actions/checkout: fetch-depth: 0)",
			"--%s: unknown revision %s", re.Which, strconv.Quote(re.Rev))
	default:
		return fmt.Errorf("check %s..%s: %w", opts.Base, opts.Head, err)
	}
}

// liveFleet is the instances that report to serve's NATS: ci.Fleet over the
// live reports (those not yet expired) of each path.
type liveFleet struct {
	d *distributor.Distributor
}

// namespaceReadFrom is how many paths of one namespace make liveFleet read
// the namespace's reports once instead of each path's: a filtered read
// costs the server a count of the stream's pending reports, about a
// hundredth of reading them all (BenchmarkReports).
const namespaceReadFrom = 64

// Instances returns the instances whose live report is on each of paths:
// by one read per path, or one per namespace where many paths share it.
// A path whose reports include a region's summary groups (a tree,
// docs/SCALING.md), which name one instance for many, has its instances
// fetched from the regions (Distributor.Detail); a region that does not
// answer is an error, never a count short.
func (f *liveFleet) Instances(ctx context.Context, paths []cuecast.ConfigPath) (map[cuecast.ConfigPath][]string, error) {
	byNS := map[string][]cuecast.ConfigPath{}
	for _, cp := range paths {
		byNS[cp.Namespace()] = append(byNS[cp.Namespace()], cp)
	}
	out := make(map[cuecast.ConfigPath][]string, len(paths))
	grouped := map[cuecast.ConfigPath]bool{}
	add := func(r cuecast.Report) {
		if r.Count > 0 {
			grouped[r.Config] = true
			return
		}
		out[r.Config] = append(out[r.Config], r.Instance)
	}
	for ns, cps := range byNS {
		if len(cps) < namespaceReadFrom {
			for _, cp := range cps {
				reps, err := f.d.Reports(ctx, cp)
				if err != nil {
					return nil, err
				}
				for _, r := range reps {
					r.Config = cp
					add(r)
				}
			}
			continue
		}
		reps, err := f.d.NamespaceReports(ctx, ns)
		if err != nil {
			return nil, err
		}
		want := make(map[cuecast.ConfigPath]bool, len(cps))
		for _, cp := range cps {
			want[cp] = true
		}
		for _, r := range reps {
			if want[r.Config] {
				add(r)
			}
		}
	}
	for cp := range grouped {
		detail, err := f.d.Detail(ctx, cp, distributor.DetailRequest{})
		if err != nil {
			return nil, fmt.Errorf("the instances of %s, from the regions that summarise it: %w", cp, err)
		}
		for _, r := range detail {
			out[cp] = append(out[cp], r.Instance)
		}
	}
	return out, nil
}
