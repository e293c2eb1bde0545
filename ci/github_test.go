package ci_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/githubtest"
)

const headSHA = "2222222222222222222222222222222222222222"

// sleeps records the waits the reporter asks for, without waiting, and is
// the reporter's clock: a wait moves it on.
type sleeps struct {
	mu    sync.Mutex
	d     []time.Duration
	clock time.Time
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.d = append(s.d, d)
	s.clock = s.clock.Add(d)
	return ctx.Err()
}

func (s *sleeps) now() time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.clock
}

func (s *sleeps) got() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.d)
}

func newReporter(t *testing.T, gh *githubtest.Server, pr int, mutate ...func(*ci.GitHubOptions)) (*ci.GitHub, *sleeps) {
	t.Helper()
	sl := &sleeps{clock: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts := ci.GitHubOptions{
		Token: githubtest.Token, Repository: "acme/configs", APIURL: gh.URL, PR: pr, HeadSHA: headSHA,
		Sleep: sl.sleep,
		Now:   sl.now,
		// Pacing has its own test; elsewhere it would only add waits to
		// the ones a test is about.
		MutationInterval: -1,
		Logger:           slog.New(slog.NewTextHandler(t.Output(), nil)),
	}
	for _, m := range mutate {
		m(&opts)
	}
	g, err := ci.NewGitHub(opts)
	if err != nil {
		t.Fatal(err)
	}
	return g, sl
}

// publish runs what `cuecast check --github` does after the compile.
func publish(ctx context.Context, g *ci.GitHub, rep *ci.Report) error {
	run, err := g.Start(ctx)
	if err != nil {
		return err
	}
	if err := run.Complete(ctx, rep); err != nil {
		return err
	}
	return g.Comment(ctx, rep)
}

// published is publish, failing the test if it fails.
func published(t *testing.T, g *ci.GitHub, rep *ci.Report) {
	t.Helper()
	if err := publish(t.Context(), g, rep); err != nil {
		t.Fatalf("publish: %v", err)
	}
}

func reportWithErrors(n int) *ci.Report {
	rep := sampleReport()
	rep.Errors = nil
	for i := range n {
		rep.Errors = append(rep.Errors, ci.Finding{Error: compiler.Error{
			Config: "payments/ledger", File: "payments/ledger/ledger.cue", Line: i + 1, Column: 2, ID: "cue", Message: fmt.Sprintf("error %d", i)}})
	}
	rep.Risk.NewErrors, rep.Risk.PreExisting = n, 0
	return rep
}

func TestGitHubPublish(t *testing.T) {
	gh := githubtest.New(t)
	g, _ := newReporter(t, gh, 7)
	rep := sampleReport()
	published(t, g, rep)
	gh.WantSequence(t, 0,
		"POST /repos/acme/configs/check-runs 201",
		"PATCH /repos/acme/configs/check-runs/1001 200",
		"GET /repos/acme/configs/issues/7/comments 200",
		"POST /repos/acme/configs/issues/7/comments 201",
	)
	reqs := gh.Requests()
	create := reqs[0].Body
	if create["name"] != "cuecast check" || create["head_sha"] != headSHA || create["status"] != "in_progress" {
		t.Errorf("create: got %v, want name, head_sha and status in_progress", create)
	}
	upd := reqs[1].Body
	if upd["status"] != "completed" || upd["conclusion"] != "failure" || upd["completed_at"] == nil {
		t.Errorf("update: got status %v conclusion %v completed_at %v, want completed failure with a time", upd["status"], upd["conclusion"], upd["completed_at"])
	}
	out := upd["output"].(map[string]any)
	if out["title"] != "1 new error(s)" || !strings.Contains(out["summary"].(string), "**Risk: high**") {
		t.Errorf("output: got title %v, summary without the risk summary", out["title"])
	}
	anns := out["annotations"].([]any)
	if len(anns) != 2 {
		t.Fatalf("annotations: got %d, want 2", len(anns))
	}
	a0, a1 := anns[0].(map[string]any), anns[1].(map[string]any)
	if a0["path"] != "payments/ledger/ledger.cue" || a0["start_line"] != 7.0 || a0["end_line"] != 7.0 ||
		a0["start_column"] != 3.0 || a0["annotation_level"] != "failure" || a0["title"] != "cue" {
		t.Errorf("annotation 0: got %v", a0)
	}
	if a1["annotation_level"] != "warning" || !strings.Contains(a1["message"].(string), "fix: move it") {
		t.Errorf("annotation 1 (pre-existing): got %v, want a warning with the fix", a1)
	}
	cs := gh.Comments(7)
	if len(cs) != 1 || cs[0].Body != rep.Markdown(0) {
		t.Errorf("comments: got %d, want one holding the report's Markdown", len(cs))
	}
	run := gh.Runs()[1001]
	if run.Status != "completed" || run.Conclusion != "failure" || run.HeadSHA != headSHA {
		t.Errorf("run: got %+v", run)
	}
}

func TestGitHubAnnotationBatches(t *testing.T) {
	gh := githubtest.New(t)
	g, _ := newReporter(t, gh, 0)
	published(t, g, reportWithErrors(120))
	// No PR, so no comment.
	gh.WantSequence(t, 0,
		"POST /repos/acme/configs/check-runs 201",
		"PATCH /repos/acme/configs/check-runs/1001 200",
		"PATCH /repos/acme/configs/check-runs/1001 200",
		"PATCH /repos/acme/configs/check-runs/1001 200",
	)
	var sizes []int
	var statuses []any
	for _, r := range gh.Requests()[1:] {
		out := r.Body["output"].(map[string]any)
		sizes = append(sizes, len(out["annotations"].([]any)))
		statuses = append(statuses, r.Body["status"])
	}
	if !slices.Equal(sizes, []int{50, 50, 20}) {
		t.Errorf("batches: got %v, want [50 50 20]", sizes)
	}
	if !slices.Equal(statuses, []any{nil, nil, "completed"}) {
		t.Errorf("statuses: got %v, want only the last request to complete the run", statuses)
	}
	run := gh.Runs()[1001]
	if len(run.Annotations) != 120 || run.Conclusion != "failure" {
		t.Errorf("run: got %d annotations, conclusion %q; want 120, failure", len(run.Annotations), run.Conclusion)
	}
	for i, a := range run.Annotations {
		if a["start_line"] != float64(i+1) {
			t.Fatalf("annotation %d: got line %v, want %d (in order)", i, a["start_line"], i+1)
		}
	}
}

func TestGitHubCommentUpdatedNotDuplicated(t *testing.T) {
	gh := githubtest.New(t)
	gh.SetPageSize(100)
	// 150 comments by people, so cuecast's lands on the second page; one
	// quotes an old report, marker and all, and must be left alone.
	for i := range 149 {
		gh.AddComment(7, "someone", fmt.Sprintf("comment %d", i))
	}
	quote := "> " + ci.Marker + "\n> ## cuecast check: ❌\n\nwhy did this fail?"
	gh.AddComment(7, "someone", quote)
	g, _ := newReporter(t, gh, 7)
	rep := sampleReport()
	published(t, g, rep)
	first := gh.Comments(7)
	if len(first) != 151 {
		t.Fatalf("after the first run: got %d comments, want 151", len(first))
	}
	ours := first[150].ID

	// A second run, after a fix: the same comment is edited.
	fixed := sampleReport()
	fixed.Errors, fixed.Risk.NewErrors = nil, 0
	g2, _ := newReporter(t, gh, 7)
	before := len(gh.Requests())
	published(t, g2, fixed)
	gh.WantSequence(t, before,
		"POST /repos/acme/configs/check-runs 201",
		"PATCH /repos/acme/configs/check-runs/1153 200",
		"GET /repos/acme/configs/issues/7/comments 200",
		"GET /repos/acme/configs/issues/7/comments 200",
		// An installation token: GitHub refuses to say whose, so the
		// comment is cuecast's if github-actions[bot] wrote it.
		"GET /user 403",
		fmt.Sprintf("PATCH /repos/acme/configs/issues/comments/%d 200", ours),
	)
	after := gh.Comments(7)
	var marked []int64
	for _, c := range after {
		if strings.HasPrefix(c.Body, ci.Marker) {
			marked = append(marked, c.ID)
		}
	}
	if len(after) != 151 || !slices.Equal(marked, []int64{ours}) {
		t.Errorf("after the second run: %d comments, marked %v; want 151 and only %d", len(after), marked, ours)
	}
	if after[149].Body != quote {
		t.Errorf("the quoting comment was edited")
	}
	if !strings.Contains(after[150].Body, "✅") {
		t.Errorf("the comment was not updated to the second report")
	}
	if r := gh.Requests(); !strings.Contains(r[len(r)-3].Path, "page=2") {
		t.Errorf("second listing: got %s, want page=2", r[len(r)-3].Path)
	}
}

func TestGitHubRetries(t *testing.T) {
	gh := githubtest.New(t)
	gh.Fail(githubtest.CreateCheckRun, http.StatusServiceUnavailable, nil, "unavailable")
	gh.Fail(githubtest.CreateCheckRun, http.StatusBadGateway, nil, "bad gateway")
	gh.Fail(githubtest.CreateComment, http.StatusForbidden, http.Header{"Retry-After": {"7"}},
		"You have exceeded a secondary rate limit. Please wait a few minutes before you try again.")
	gh.Fail(githubtest.ListComments, http.StatusTooManyRequests, nil, "slow down")
	gh.Fail(githubtest.UpdateCheckRun, http.StatusForbidden, nil, "You have exceeded a secondary rate limit.")
	g, sl := newReporter(t, gh, 7)
	published(t, g, sampleReport())
	// A create answered 5xx may have been carried out: the run is looked
	// up before the create is sent again.
	lookup := "GET /repos/acme/configs/commits/" + headSHA + "/check-runs 200"
	gh.WantSequence(t, 0,
		"POST /repos/acme/configs/check-runs 503",
		lookup,
		"POST /repos/acme/configs/check-runs 502",
		lookup,
		"POST /repos/acme/configs/check-runs 201",
		"PATCH /repos/acme/configs/check-runs/1001 403",
		"PATCH /repos/acme/configs/check-runs/1001 200",
		"GET /repos/acme/configs/issues/7/comments 429",
		"GET /repos/acme/configs/issues/7/comments 200",
		"POST /repos/acme/configs/issues/7/comments 403",
		"POST /repos/acme/configs/issues/7/comments 201",
	)
	// Backoff 1 s, 2 s; then a fresh 1 s for each new request; then
	// GitHub's Retry-After.
	if got, want := sl.got(), []time.Duration{time.Second, 2 * time.Second, time.Second, time.Second, 7 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("waits: got %v, want %v", got, want)
	}
	// The replayed body is the original one.
	reqs := gh.Requests()
	if reqs[4].Body["head_sha"] != headSHA || len(gh.Comments(7)) != 1 {
		t.Errorf("retried create: got %v; %d comments", reqs[4].Body, len(gh.Comments(7)))
	}
}

func TestGitHubGivesUp(t *testing.T) {
	gh := githubtest.New(t)
	for range 3 {
		gh.Fail(githubtest.CreateCheckRun, http.StatusInternalServerError, nil, "boom")
	}
	g, sl := newReporter(t, gh, 7, func(o *ci.GitHubOptions) {
		o.Attempts = 3
		o.Backoff = func(n int) time.Duration { return time.Duration(n) * time.Millisecond }
	})
	_, err := g.Start(t.Context())
	if err == nil || !strings.Contains(err.Error(), "500") {
		t.Fatalf("got %v, want the 500 after 3 attempts", err)
	}
	posts := 0
	for _, r := range gh.Requests() {
		if r.Method == http.MethodPost {
			posts++
		}
	}
	if posts != 3 || len(gh.Runs()) != 0 {
		t.Errorf("attempts: got %d creates and %d runs, want 3 and 0", posts, len(gh.Runs()))
	}
	if got := sl.got(); !slices.Equal(got, []time.Duration{time.Millisecond, 2 * time.Millisecond}) {
		t.Errorf("waits: got %v", got)
	}
}

func TestGitHubPermissions(t *testing.T) {
	tests := []struct {
		name    string
		route   githubtest.Route
		status  int
		token   string
		wantErr string
	}{
		{name: "no checks permission", route: githubtest.CreateCheckRun, status: 403, wantErr: `"checks: write"`},
		{name: "no pull-requests permission", route: githubtest.CreateComment, status: 403, wantErr: `"pull-requests: write"`},
		{name: "bad token", token: "wrong", wantErr: "set GITHUB_TOKEN"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			gh := githubtest.New(t)
			if tt.route != "" {
				gh.Deny(tt.route, tt.status)
			}
			g, sl := newReporter(t, gh, 7, func(o *ci.GitHubOptions) {
				if tt.token != "" {
					o.Token = tt.token
				}
			})
			err := publish(t.Context(), g, sampleReport())
			var pe *ci.PermissionError
			if !errors.Is(err, ci.ErrPermission) || !errors.As(err, &pe) {
				t.Fatalf("got %v, want a PermissionError", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("got %q, want it to mention %s", err, tt.wantErr)
			}
			if len(sl.got()) != 0 {
				t.Errorf("a refusal was retried: waits %v", sl.got())
			}
		})
	}
}

func TestGitHubLooksUpHead(t *testing.T) {
	gh := githubtest.New(t)
	gh.AddPull(githubtest.Pull{Number: 9, HeadSHA: "3333333333333333333333333333333333333333"})
	g, _ := newReporter(t, gh, 9, func(o *ci.GitHubOptions) { o.HeadSHA = "" })
	if _, err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	seq := gh.Sequence()
	if !slices.Equal(seq, []string{"GET /repos/acme/configs/pulls/9 200", "POST /repos/acme/configs/check-runs 201"}) {
		t.Fatalf("requests: got %q", seq)
	}
	if got := gh.Requests()[1].Body["head_sha"]; got != "3333333333333333333333333333333333333333" || g.HeadSHA() != got {
		t.Errorf("head_sha: got %v, want the pull request's head", got)
	}
}

func TestGitHubAbort(t *testing.T) {
	gh := githubtest.New(t)
	g, _ := newReporter(t, gh, 7)
	run, err := g.Start(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if err := run.Abort(t.Context(), errors.New("compile: disk on fire")); err != nil {
		t.Fatal(err)
	}
	r := gh.Runs()[run.ID]
	if r.Conclusion != "failure" || !strings.Contains(r.Summary, "disk on fire") {
		t.Errorf("run: got %+v", r)
	}
}

func TestGitHubOptionsValidate(t *testing.T) {
	ok := ci.GitHubOptions{Token: "t", Repository: "o/r", HeadSHA: "abc"}
	tests := []struct {
		name    string
		mutate  func(*ci.GitHubOptions)
		wantErr string
	}{
		{"valid", func(*ci.GitHubOptions) {}, ""},
		{"valid with PR only", func(o *ci.GitHubOptions) { o.HeadSHA, o.PR = "", 3 }, ""},
		{"no token", func(o *ci.GitHubOptions) { o.Token = "" }, "GITHUB_TOKEN"},
		{"bad repository", func(o *ci.GitHubOptions) { o.Repository = "just-a-name" }, "owner/name"},
		{"no head", func(o *ci.GitHubOptions) { o.HeadSHA = "" }, "GITHUB_EVENT_PATH"},
		{"bad api url", func(o *ci.GitHubOptions) { o.APIURL = "http://[::1" }, "api url"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := ok
			tt.mutate(&o)
			_, err := ci.NewGitHub(o)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("got %v, want error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestReadEvent(t *testing.T) {
	dir := t.TempDir()
	pr := filepath.Join(dir, "pr.json")
	os.WriteFile(pr, []byte(`{"action":"synchronize","number":12,"pull_request":{"number":12,"head":{"sha":"hhh"},"base":{"sha":"bbb"}}}`), 0o644)
	push := filepath.Join(dir, "push.json")
	os.WriteFile(push, []byte(`{"ref":"refs/heads/main","after":"abc"}`), 0o644)
	if ev, err := ci.ReadEvent(pr); err != nil || ev != (ci.Event{PR: 12, HeadSHA: "hhh", BaseSHA: "bbb"}) {
		t.Errorf("pull_request: got %+v, %v", ev, err)
	}
	if ev, err := ci.ReadEvent(push); err != nil || ev != (ci.Event{}) {
		t.Errorf("push: got %+v, %v; want a zero event", ev, err)
	}
	if _, err := ci.ReadEvent(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("missing file: got no error")
	}
}

func TestGitHubPrimaryRateLimit(t *testing.T) {
	soon := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(time.Now().Add(10 * time.Second).Unix())}}
	later := http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(time.Now().Add(time.Hour).Unix())}}

	// Resetting soon: wait for it, then go on.
	gh := githubtest.New(t)
	gh.Fail(githubtest.CreateCheckRun, http.StatusForbidden, soon, "API rate limit exceeded for installation.")
	g, sl := newReporter(t, gh, 7)
	if _, err := g.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if w := sl.got(); len(w) != 1 || w[0] < time.Second || w[0] > 12*time.Second {
		t.Errorf("waits: got %v, want one until the reset, 1-12 s", w)
	}

	// Resetting in an hour: give up at once, and do not call it a
	// missing permission.
	gh = githubtest.New(t)
	gh.Fail(githubtest.CreateCheckRun, http.StatusForbidden, later, "API rate limit exceeded for installation.")
	g, sl = newReporter(t, gh, 7)
	_, err := g.Start(t.Context())
	if err == nil || errors.Is(err, ci.ErrPermission) || !strings.Contains(err.Error(), "rate limit") {
		t.Errorf("got %v, want a rate-limit error that is not a permission error", err)
	}
	if len(sl.got()) != 0 || len(gh.Requests()) != 1 {
		t.Errorf("got %d waits and %d requests, want none and 1", len(sl.got()), len(gh.Requests()))
	}
}

// TestGitHubCreateAnsweredAfterStored: GitHub stores the check run and the
// comment but the answer is a 502 (a proxy timing out). The reporter looks
// them up instead of creating them again: one run, completed; one comment.
func TestGitHubCreateAnsweredAfterStored(t *testing.T) {
	gh := githubtest.New(t)
	gh.FailAfterServing(githubtest.CreateCheckRun, http.StatusBadGateway, "bad gateway")
	gh.FailAfterServing(githubtest.CreateComment, http.StatusBadGateway, "bad gateway")
	g, _ := newReporter(t, gh, 7)
	published(t, g, sampleReport())
	runs := gh.Runs()
	if len(runs) != 1 {
		t.Fatalf("got %d check runs, want 1", len(runs))
	}
	for _, r := range runs {
		if r.Status != "completed" || r.Conclusion != "failure" {
			t.Errorf("run %d: %s/%s, want completed/failure (none left in_progress)", r.ID, r.Status, r.Conclusion)
		}
	}
	if cs := gh.Comments(7); len(cs) != 1 || !strings.HasPrefix(cs[0].Body, ci.Marker) {
		t.Errorf("got %d comments, want exactly one sticky comment", len(cs))
	}
	gh.WantSequence(t, 0,
		"POST /repos/acme/configs/check-runs 502",
		"GET /repos/acme/configs/commits/"+headSHA+"/check-runs 200",
		"PATCH /repos/acme/configs/check-runs/1001 200",
		"GET /repos/acme/configs/issues/7/comments 200",
		"POST /repos/acme/configs/issues/7/comments 502",
		"GET /repos/acme/configs/issues/7/comments 200",
		"GET /user 403",
	)
}

// TestGitHubAPIURLAsGiven: the API root is used exactly as given, whether
// it is a host's root or a proxy's path; nothing is appended to it.
func TestGitHubAPIURLAsGiven(t *testing.T) {
	for _, root := range []string{"", "/proxy/github", "/api/v3"} {
		t.Run("root="+root, func(t *testing.T) {
			gh := githubtest.NewAt(t, root)
			g, _ := newReporter(t, gh, 7)
			published(t, g, sampleReport())
			for _, r := range gh.Requests() {
				if r.Status == http.StatusNotFound {
					t.Errorf("%s %s went outside the API root", r.Method, r.Path)
				}
			}
			if len(gh.Comments(7)) != 1 || len(gh.Runs()) != 1 {
				t.Errorf("got %d comments and %d runs, want 1 and 1", len(gh.Comments(7)), len(gh.Runs()))
			}
		})
	}
}

// TestGitHubPacesMutations: mutating requests go out at least a second
// apart, and the annotation batches before the last do not carry the
// report (which the last one sends once).
func TestGitHubPacesMutations(t *testing.T) {
	gh := githubtest.New(t)
	g, sl := newReporter(t, gh, 7, func(o *ci.GitHubOptions) { o.MutationInterval = time.Second })
	rep := reportWithErrors(120)
	published(t, g, rep)
	// Mutations: create, 3 PATCHes, the comment; the fake clock moves only
	// when the reporter waits, so every mutation after the first waits 1 s.
	want := []time.Duration{time.Second, time.Second, time.Second, time.Second}
	if got := sl.got(); !slices.Equal(got, want) {
		t.Errorf("waits: got %v, want %v", got, want)
	}
	var summaries []int
	for _, r := range gh.Requests() {
		if r.Method == http.MethodPatch {
			summaries = append(summaries, len(r.Body["output"].(map[string]any)["summary"].(string)))
		}
	}
	full := len(rep.Markdown(ci.MaxBody))
	if len(summaries) != 3 || summaries[0] >= 200 || summaries[1] >= 200 || summaries[2] != full {
		t.Errorf("summary sizes per PATCH: got %v, want two short ones and the full %d bytes last", summaries, full)
	}
	if run := gh.Runs()[1001]; run.Summary != rep.Markdown(ci.MaxBody) || len(run.Annotations) != 120 {
		t.Errorf("run ends with a summary of %d bytes and %d annotations, want the report and 120", len(run.Summary), len(run.Annotations))
	}
}

// TestGitHubCommentOnlyOwn: a comment opening with the marker is edited only
// when cuecast's identity wrote it. With a personal access token (GET /user
// names it) GitHub would let a maintainer's token overwrite another
// person's comment; with an installation token (GET /user refused) the
// identity is github-actions[bot], a Bot. Others' marker comments are left
// alone and cuecast posts its own.
func TestGitHubCommentOnlyOwn(t *testing.T) {
	for _, tc := range []struct {
		name, user string // user "": an installation token
	}{
		{name: "personal access token", user: "alice"},
		{name: "installation token"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			gh := githubtest.New(t)
			gh.SetUser(tc.user)
			fake := ci.Marker + "\n## cuecast check: ✅"
			gh.AddComment(7, "mallory", fake)
			g, _ := newReporter(t, gh, 7)
			published(t, g, sampleReport())
			g2, _ := newReporter(t, gh, 7)
			published(t, g2, sampleReport())
			cs := gh.Comments(7)
			if len(cs) != 2 || cs[0].Body != fake || !strings.Contains(cs[1].Body, "**Risk:") {
				t.Fatalf("got %d comments (the first untouched: %v); want mallory's untouched and one report", len(cs), len(cs) > 0 && cs[0].Body == fake)
			}
			var edits []string
			for _, r := range gh.Requests() {
				if r.Method == http.MethodPatch && strings.Contains(r.Path, "/issues/comments/") {
					edits = append(edits, r.Path)
				}
			}
			if want := []string{fmt.Sprintf("/repos/acme/configs/issues/comments/%d", cs[1].ID)}; !slices.Equal(edits, want) {
				t.Errorf("comment edits: got %q, want only cuecast's own, %q", edits, want)
			}
		})
	}
}
