package ci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/google/go-github/v60/github"
)

// DefaultCheckName is the name of the check run on the pull request.
const DefaultCheckName = "cuecast check"

// AnnotationsPerRequest is the most annotations GitHub accepts in one
// check-run request.
const AnnotationsPerRequest = 50

// ErrPermission is wrapped by the errors GitHub answers with 401 or 403 (not
// a rate limit): the token is missing, wrong, or lacks a permission.
var ErrPermission = errors.New("permission denied")

// PermissionError says which call GitHub refused and which workflow
// permission grants it.
type PermissionError struct {
	Op         string // "create check run", "comment on pull request", …
	Status     int    // 401 or 403 (404 when GitHub hides a private repo)
	Permission string // "checks: write", "pull-requests: write"
	Err        error
}

func (e *PermissionError) Error() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return fmt.Sprintf("%s: GitHub rejected the token (401): set GITHUB_TOKEN to a valid token (in Actions: env: GITHUB_TOKEN: ${{ secrets.GITHUB_TOKEN }}): %v", e.Op, e.Err)
	case http.StatusNotFound:
		return fmt.Sprintf("%s: GitHub answered 404: the repository or pull request is not visible to the token; check GITHUB_REPOSITORY and that the token has %q and \"contents: read\": %v",
			e.Op, e.Permission, e.Err)
	}
	return fmt.Sprintf("%s: GitHub refused (%d): the token lacks the %q permission; grant it in the workflow's permissions: block (pull requests from forks get a read-only token): %v",
		e.Op, e.Status, e.Permission, e.Err)
}

func (e *PermissionError) Unwrap() []error { return []error{ErrPermission, e.Err} }

// GitHubOptions configure the GitHub reporter. Token, Repository and HeadSHA
// (or PR, to look the head up) are required.
type GitHubOptions struct {
	Token string
	// Repository is "owner/name" (GITHUB_REPOSITORY).
	Repository string
	// APIURL is the REST API root (GITHUB_API_URL), used exactly as given:
	// https://api.github.com, https://ghe.example.com/api/v3, or a proxy's
	// root. Empty means https://api.github.com.
	APIURL string
	// PR is the pull request number; 0 means no comment is written.
	PR int
	// HeadSHA is the commit the check run is attached to.
	HeadSHA string
	// CheckName defaults to DefaultCheckName.
	CheckName string
	// DetailsURL, when set, is linked from the check run (the Actions run).
	DetailsURL string
	// HTTPClient defaults to a client with a 30 s timeout per request.
	HTTPClient *http.Client
	// Attempts bounds tries per request on 5xx and rate limits; default 5.
	Attempts int
	// Backoff is the wait before retry n (1, 2, …) when GitHub sends no
	// Retry-After; default 1 s doubling to at most 30 s.
	Backoff func(retry int) time.Duration
	// Sleep waits d or until ctx is done; tests replace it to run fast.
	Sleep func(ctx context.Context, d time.Duration) error
	// MutationInterval is the least time between two mutating requests
	// (POST, PATCH, PUT, DELETE), as GitHub's REST guidance asks (about a
	// second) to stay clear of its secondary rate limits; default 1 s, a
	// negative value sends them back to back. Waits go through Sleep and
	// are measured with Now.
	MutationInterval time.Duration
	// Now defaults to time.Now.
	Now func() time.Time
	// Logger defaults to discarding.
	Logger *slog.Logger
}

// Validate returns an error naming the first missing or malformed field.
func (o GitHubOptions) Validate() error {
	switch {
	case o.Token == "":
		return errors.New("github: no token: set GITHUB_TOKEN")
	case strings.Count(o.Repository, "/") != 1 || strings.HasPrefix(o.Repository, "/") || strings.HasSuffix(o.Repository, "/"):
		return fmt.Errorf("github: repository %q: want owner/name (GITHUB_REPOSITORY)", o.Repository)
	case o.HeadSHA == "" && o.PR == 0:
		return errors.New("github: no head commit: set GITHUB_EVENT_PATH to a pull_request event, or give the PR number or head SHA")
	case o.PR < 0:
		return fmt.Errorf("github: pull request number %d: want a positive number", o.PR)
	}
	return nil
}

// Event is what the check needs from a GitHub Actions event payload.
type Event struct {
	PR      int
	HeadSHA string
	BaseSHA string
}

// ReadEvent reads the pull_request event at path (GITHUB_EVENT_PATH). An
// event of another kind yields a zero PR and empty SHAs.
func ReadEvent(path string) (Event, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return Event{}, fmt.Errorf("read event: %w", err)
	}
	var ev struct {
		Number      int `json:"number"`
		PullRequest *struct {
			Number int `json:"number"`
			Head   struct {
				SHA string `json:"sha"`
			} `json:"head"`
			Base struct {
				SHA string `json:"sha"`
			} `json:"base"`
		} `json:"pull_request"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		return Event{}, fmt.Errorf("decode event %s: %w", path, err)
	}
	if ev.PullRequest == nil {
		return Event{}, nil
	}
	e := Event{PR: ev.PullRequest.Number, HeadSHA: ev.PullRequest.Head.SHA, BaseSHA: ev.PullRequest.Base.SHA}
	if e.PR == 0 {
		e.PR = ev.Number
	}
	return e, nil
}

// GitHub reports a check to GitHub: a check run with annotations on the head
// commit and one comment on the pull request.
type GitHub struct {
	client      *github.Client
	owner, repo string
	opts        GitHubOptions
	log         *slog.Logger
	// self is the login cuecast's comments are by (ours), known once
	// asked or once a comment is created; actionsBot for a token GET /user
	// refuses.
	self string
}

// actionsBot is the account an Actions GITHUB_TOKEN writes as.
const actionsBot = "github-actions[bot]"

// NewGitHub returns a reporter. It does no I/O; it returns Validate's error
// or an error for an unparsable APIURL.
func NewGitHub(opts GitHubOptions) (*GitHub, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.CheckName == "" {
		opts.CheckName = DefaultCheckName
	}
	if opts.Attempts <= 0 {
		opts.Attempts = 5
	}
	if opts.Backoff == nil {
		opts.Backoff = func(n int) time.Duration { return min(time.Second<<(n-1), 30*time.Second) }
	}
	if opts.Sleep == nil {
		opts.Sleep = sleep
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Timeout: 30 * time.Second}
	}
	rt := hc.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	if opts.MutationInterval == 0 {
		opts.MutationInterval = time.Second
	}
	hc2 := *hc
	hc2.Transport = &retryTransport{base: rt, attempts: opts.Attempts, backoff: opts.Backoff, sleep: opts.Sleep, log: opts.Logger,
		now: opts.Now, interval: opts.MutationInterval}
	client := github.NewClient(&hc2).WithAuthToken(opts.Token)
	if opts.APIURL != "" {
		// Used as given: go-github's WithEnterpriseURLs would append
		// /api/v3/, which a proxy or a custom root does not serve.
		u, err := url.Parse(opts.APIURL)
		if err == nil && (u.Scheme != "http" && u.Scheme != "https" || u.Host == "") {
			err = errors.New("want an http or https URL")
		}
		if err != nil {
			return nil, fmt.Errorf("github: api url %q: %w", opts.APIURL, err)
		}
		if !strings.HasSuffix(u.Path, "/") {
			u.Path += "/"
		}
		client.BaseURL = u
	}
	owner, repo, _ := strings.Cut(opts.Repository, "/")
	return &GitHub{client: client, owner: owner, repo: repo, opts: opts, log: opts.Logger}, nil
}

// CheckRun is a check run in progress, created by Start.
type CheckRun struct {
	g  *GitHub
	ID int64
}

// Start creates the check run on the head commit, status in_progress. When
// the options name a PR but no head SHA it looks the head up first. Errors
// wrap ErrPermission when GitHub refuses.
func (g *GitHub) Start(ctx context.Context) (*CheckRun, error) {
	if g.opts.HeadSHA == "" {
		pr, _, err := g.client.PullRequests.Get(ctx, g.owner, g.repo, g.opts.PR)
		if err != nil {
			return nil, explain("read pull request", "pull-requests: read", err)
		}
		g.opts.HeadSHA = pr.GetHead().GetSHA()
	}
	opts := github.CreateCheckRunOptions{
		Name:      g.opts.CheckName,
		HeadSHA:   g.opts.HeadSHA,
		Status:    github.String("in_progress"),
		StartedAt: &github.Timestamp{Time: g.opts.Now()},
		Output: &github.CheckRunOutput{
			Title:   github.String("Compiling the configs this change affects"),
			Summary: github.String("cuecast is compiling the base and head revisions."),
		},
	}
	if g.opts.DetailsURL != "" {
		opts.DetailsURL = github.String(g.opts.DetailsURL)
	}
	// A create is not retried blindly: a 502 or a lost connection can come
	// after GitHub created the run, and a second one would stay
	// in_progress for ever. The run is looked up first (name, head commit,
	// the started_at sent, not completed).
	for attempt := 1; ; attempt++ {
		run, _, err := g.client.Checks.CreateCheckRun(ctx, g.owner, g.repo, opts)
		if err == nil {
			g.log.Info("check run started", "id", run.GetID(), "head", g.opts.HeadSHA)
			return &CheckRun{g: g, ID: run.GetID()}, nil
		}
		if !mayHaveSucceeded(ctx, err) || attempt >= g.opts.Attempts {
			return nil, explain("create check run", "checks: write", err)
		}
		id, ferr := g.findRun(ctx, opts.StartedAt.Time)
		if ferr != nil {
			return nil, ferr
		}
		if id != 0 {
			g.log.Info("check run started (found after a failed create)", "id", id, "head", g.opts.HeadSHA, "error", err)
			return &CheckRun{g: g, ID: id}, nil
		}
		if err := g.wait(ctx, attempt, "create check run", err); err != nil {
			return nil, err
		}
	}
}

// findRun returns the ID of the check run Start created at startedAt, or 0.
func (g *GitHub) findRun(ctx context.Context, startedAt time.Time) (int64, error) {
	opts := &github.ListCheckRunsOptions{CheckName: github.String(g.opts.CheckName), Filter: github.String("all"),
		ListOptions: github.ListOptions{PerPage: 100}}
	for {
		res, resp, err := g.client.Checks.ListCheckRunsForRef(ctx, g.owner, g.repo, g.opts.HeadSHA, opts)
		if err != nil {
			return 0, explain("list check runs", "checks: read", err)
		}
		for _, r := range res.CheckRuns {
			if r.GetStatus() != "completed" && r.GetName() == g.opts.CheckName && r.GetStartedAt().Time.Unix() == startedAt.Unix() {
				return r.GetID(), nil
			}
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}

// mayHaveSucceeded reports whether a failed create may have been carried
// out anyway: GitHub (or a proxy) answered 5xx, or the connection failed.
// A 4xx, rate limits included, means it was not.
func mayHaveSucceeded(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	var er *github.ErrorResponse
	if errors.As(err, &er) {
		return er.Response != nil && er.Response.StatusCode >= 500
	}
	var rl *github.RateLimitError
	var arl *github.AbuseRateLimitError
	return !errors.As(err, &rl) && !errors.As(err, &arl)
}

// wait sleeps the backoff before retrying a create that failed.
func (g *GitHub) wait(ctx context.Context, attempt int, op string, cause error) error {
	d := g.opts.Backoff(attempt)
	g.log.Warn("github create failed and nothing was created; retrying", "op", op, "attempt", attempt, "reason", cause, "wait", d)
	if err := g.opts.Sleep(ctx, d); err != nil {
		return fmt.Errorf("wait to retry %s: %w", op, err)
	}
	return nil
}

// HeadSHA is the commit the check runs are attached to (after Start, also
// when it was looked up from the pull request).
func (g *GitHub) HeadSHA() string { return g.opts.HeadSHA }

// Complete finishes the run from rep: success unless rep.Failed, the
// Markdown summary, and one annotation per error at head (new errors as
// failures, pre-existing ones as warnings), sent AnnotationsPerRequest at a
// time because GitHub takes no more in one request. The last request
// completes the run.
func (cr *CheckRun) Complete(ctx context.Context, rep *Report) error {
	conclusion := "success"
	if rep.Failed() {
		conclusion = "failure"
	}
	anns := annotations(rep.Errors)
	title := checkTitle(rep)
	summary := rep.Markdown(MaxBody)
	n := max(1, (len(anns)+AnnotationsPerRequest-1)/AnnotationsPerRequest)
	for i := range n {
		// GitHub wants a title and summary with every output, and each
		// replaces the last: the batches before the last carry a one-line
		// summary, and the report (up to 64 KiB) is sent once, with the
		// last batch.
		s := fmt.Sprintf("Adding annotations: %d of %d sent.", (i+1)*AnnotationsPerRequest, len(anns))
		if i == n-1 {
			s = summary
		}
		out := &github.CheckRunOutput{Title: github.String(title), Summary: github.String(s)}
		if lo := i * AnnotationsPerRequest; lo < len(anns) {
			out.Annotations = anns[lo:min(lo+AnnotationsPerRequest, len(anns))]
		}
		opts := github.UpdateCheckRunOptions{Name: cr.g.opts.CheckName, Output: out}
		if i == n-1 {
			opts.Status = github.String("completed")
			opts.Conclusion = github.String(conclusion)
			opts.CompletedAt = &github.Timestamp{Time: cr.g.opts.Now()}
		}
		if _, _, err := cr.g.client.Checks.UpdateCheckRun(ctx, cr.g.owner, cr.g.repo, cr.ID, opts); err != nil {
			return explain("update check run", "checks: write", err)
		}
	}
	cr.g.log.Info("check run completed", "id", cr.ID, "conclusion", conclusion, "annotations", len(anns))
	return nil
}

// Abort completes the run as failed because cuecast could not run: cause is
// shown as the summary.
func (cr *CheckRun) Abort(ctx context.Context, cause error) error {
	_, _, err := cr.g.client.Checks.UpdateCheckRun(ctx, cr.g.owner, cr.g.repo, cr.ID, github.UpdateCheckRunOptions{
		Name:        cr.g.opts.CheckName,
		Status:      github.String("completed"),
		Conclusion:  github.String("failure"),
		CompletedAt: &github.Timestamp{Time: cr.g.opts.Now()},
		Output: &github.CheckRunOutput{
			Title:   github.String("cuecast could not run"),
			Summary: github.String(fmt.Sprintf("%s\n\n```\n%s\n```\n", "The check did not complete; this is not a verdict on the change.", cause)),
		},
	})
	if err != nil {
		return explain("update check run", "checks: write", err)
	}
	return nil
}

// Comment creates the PR comment holding rep's Markdown, or edits the one an
// earlier run created (found by Marker and by its author, the account
// cuecast comments as), so re-runs never add a second one. A marker comment
// by anyone else is left alone. It does nothing when the options name no PR.
func (g *GitHub) Comment(ctx context.Context, rep *Report) error {
	if g.opts.PR == 0 {
		return nil
	}
	body := rep.Markdown(MaxBody)
	id, err := g.findComment(ctx)
	if err != nil {
		return err
	}
	if id != 0 {
		if _, _, err := g.client.Issues.EditComment(ctx, g.owner, g.repo, id, &github.IssueComment{Body: github.String(body)}); err != nil {
			return explain("update pull request comment", "pull-requests: write", err)
		}
		g.log.Info("pull request comment updated", "pr", g.opts.PR, "id", id)
		return nil
	}
	// As in Start, a create that may have succeeded is looked up (by the
	// marker) before it is sent again, so a 502 cannot leave two comments.
	for attempt := 1; ; attempt++ {
		c, _, err := g.client.Issues.CreateComment(ctx, g.owner, g.repo, g.opts.PR, &github.IssueComment{Body: github.String(body)})
		if err == nil {
			if login := c.GetUser().GetLogin(); login != "" {
				g.self = login
			}
			g.log.Info("pull request comment created", "pr", g.opts.PR, "id", c.GetID())
			return nil
		}
		if !mayHaveSucceeded(ctx, err) || attempt >= g.opts.Attempts {
			return explain("comment on pull request", "pull-requests: write", err)
		}
		id, ferr := g.findComment(ctx)
		if ferr != nil {
			return ferr
		}
		if id != 0 {
			g.log.Info("pull request comment created (found after a failed create)", "pr", g.opts.PR, "id", id, "error", err)
			return nil
		}
		if err := g.wait(ctx, attempt, "comment on pull request", err); err != nil {
			return err
		}
	}
}

// findComment returns the ID of the first comment that starts with Marker
// and that cuecast's identity wrote (ours), or 0. Anyone who may comment
// can open a comment with the marker; editing theirs would overwrite a
// person's words, or be refused (403) and cuecast's report never posted.
func (g *GitHub) findComment(ctx context.Context) (int64, error) {
	opts := &github.IssueListCommentsOptions{ListOptions: github.ListOptions{PerPage: 100}}
	for {
		cs, resp, err := g.client.Issues.ListComments(ctx, g.owner, g.repo, g.opts.PR, opts)
		if err != nil {
			return 0, explain("list pull request comments", "pull-requests: read", err)
		}
		for _, c := range cs {
			// The marker opens cuecast's comment; a person quoting it
			// starts with "> ".
			if !strings.HasPrefix(strings.TrimSpace(c.GetBody()), Marker) {
				continue
			}
			ok, err := g.ours(ctx, c.GetUser())
			if err != nil {
				return 0, err
			}
			if ok {
				return c.GetID(), nil
			}
			g.log.Warn("ignoring a pull request comment with cuecast's marker by another account", "pr", g.opts.PR, "id", c.GetID(), "author", c.GetUser().GetLogin())
		}
		if resp.NextPage == 0 {
			return 0, nil
		}
		opts.Page = resp.NextPage
	}
}

// ours reports whether u is the account cuecast's comments are by: the
// author of the comment this reporter created, else the token's user (GET
// /user), else, for a token GET /user refuses (an Actions GITHUB_TOKEN is
// an installation token), the Bot github-actions[bot]. A login with
// "[bot]" is an app's; no person can register one.
func (g *GitHub) ours(ctx context.Context, u *github.User) (bool, error) {
	if g.self == "" {
		me, _, err := g.client.Users.Get(ctx, "")
		var er *github.ErrorResponse
		switch {
		case err == nil && me.GetLogin() != "":
			g.self = me.GetLogin()
		case errors.As(err, &er) && er.Response != nil && er.Response.StatusCode/100 == 4:
			g.self = actionsBot
		case err != nil:
			return false, fmt.Errorf("find which account cuecast comments as: %w", err)
		default:
			return false, errors.New("find which account cuecast comments as: GET /user named no login")
		}
	}
	if g.self == actionsBot {
		return u.GetLogin() == actionsBot && u.GetType() == "Bot", nil
	}
	return u.GetLogin() == g.self, nil
}

func checkTitle(rep *Report) string {
	switch {
	case rep.Risk.NewErrors > 0:
		return fmt.Sprintf("%d new error(s)", rep.Risk.NewErrors)
	case len(rep.ChangedFiles) == 0:
		return "No changes"
	default:
		return fmt.Sprintf("%d config(s) change, risk %s", rep.Risk.Configs, rep.Risk.Level)
	}
}

// annotations turns findings into check-run annotations. GitHub wants a
// line of at least 1 and columns only on single-line annotations.
func annotations(fs []Finding) []*github.CheckRunAnnotation {
	out := make([]*github.CheckRunAnnotation, 0, len(fs))
	for _, f := range fs {
		level, title := "failure", f.ID
		if f.PreExisting {
			level, title = "warning", f.ID+" (pre-existing)"
		}
		line := max(f.Line, 1)
		msg := f.Message
		if f.Fix != "" {
			msg += "\nfix: " + f.Fix
		}
		a := &github.CheckRunAnnotation{
			Path:            github.String(f.File),
			StartLine:       github.Int(line),
			EndLine:         github.Int(line),
			AnnotationLevel: github.String(level),
			Message:         github.String(msg),
			Title:           github.String(title),
		}
		if f.Column > 0 {
			a.StartColumn, a.EndColumn = github.Int(f.Column), github.Int(f.Column)
		}
		out = append(out, a)
	}
	return out
}

// explain turns GitHub's refusals into a PermissionError naming the
// permission the workflow must grant.
func explain(op, permission string, err error) error {
	var er *github.ErrorResponse
	if errors.As(err, &er) && er.Response != nil {
		switch s := er.Response.StatusCode; s {
		case http.StatusUnauthorized, http.StatusForbidden:
			return &PermissionError{Op: op, Status: s, Permission: permission, Err: err}
		case http.StatusNotFound:
			// GitHub answers 404 for a private repo the token cannot see.
			return &PermissionError{Op: op, Status: s, Permission: permission, Err: err}
		}
	}
	return fmt.Errorf("%s: %w", op, err)
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
