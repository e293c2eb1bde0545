package cli_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/githubtest"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
)

// prRepo is configs-example with a pull request on top that breaks
// payments/checkout, and the Actions event describing it.
func prRepo(t *testing.T) (dir, event, base, head string) {
	t.Helper()
	r := gittest.New(t)
	r.CopyDir(filepath.Join(repoRoot(t), "configs-example"))
	base = r.Commit("base")
	r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"DOGECOIN"`)
	head = r.Commit("break checkout")
	event = filepath.Join(t.TempDir(), "event.json")
	payload := fmt.Sprintf(`{"action":"opened","number":5,"pull_request":{"number":5,"head":{"sha":%q},"base":{"sha":%q}}}`, head, base)
	if err := os.WriteFile(event, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	return r.Dir, event, base, head
}

func runCLI(t *testing.T, env map[string]string, args ...string) (int, string, string) {
	t.Helper()
	ios, out, errOut := iostreams.Test()
	code := cli.Main(context.Background(), args, ios, func(k string) string { return env[k] })
	return code, out.String(), errOut.String()
}

func TestCheckGitHub(t *testing.T) {
	t.Parallel()
	dir, event, _, head := prRepo(t)
	gh := githubtest.New(t)
	env := map[string]string{
		"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_EVENT_PATH": event,
		"GITHUB_API_URL": gh.URL, "GITHUB_SERVER_URL": "https://github.example.com", "GITHUB_RUN_ID": "77",
	}
	// Twice: the second run edits the comment the first one made.
	for run := 1; run <= 2; run++ {
		code, stdout, stderr := runCLI(t, env, "check", "--repo", dir, "--github", "--log-level", "warn")
		if code != cli.ExitInvalid {
			t.Fatalf("run %d: exit %d, want %d; stderr:\n%s", run, code, cli.ExitInvalid, stderr)
		}
		if !strings.Contains(stdout, "invalid       payments/checkout") {
			t.Errorf("run %d: stdout lacks the report:\n%s", run, stdout)
		}
	}
	gh.WantSequence(t, 0,
		"POST /repos/acme/configs/check-runs 201",
		"PATCH /repos/acme/configs/check-runs/1001 200",
		"GET /repos/acme/configs/issues/5/comments 200",
		"POST /repos/acme/configs/issues/5/comments 201",
		"POST /repos/acme/configs/check-runs 201",
		"PATCH /repos/acme/configs/check-runs/1003 200",
		"GET /repos/acme/configs/issues/5/comments 200",
		"GET /user 403",
		"PATCH /repos/acme/configs/issues/comments/1002 200",
	)
	create := gh.Requests()[0].Body
	if create["head_sha"] != head || create["details_url"] != "https://github.example.com/acme/configs/actions/runs/77" {
		t.Errorf("check run: got head_sha %v details_url %v", create["head_sha"], create["details_url"])
	}
	r := gh.Runs()[1001]
	if r.Conclusion != "failure" || len(r.Annotations) == 0 || r.Annotations[0]["path"] != "payments/checkout/checkout.cue" {
		t.Errorf("check run: got conclusion %q, annotations %v", r.Conclusion, r.Annotations)
	}
	cs := gh.Comments(5)
	if len(cs) != 1 || !strings.HasPrefix(cs[0].Body, ci.Marker) || !strings.Contains(cs[0].Body, "DOGECOIN") {
		t.Errorf("comments: got %d, want one report", len(cs))
	}
}

func TestCheckGitHubPermission(t *testing.T) {
	t.Parallel()
	dir, event, base, head := prRepo(t)
	gh := githubtest.New(t)
	gh.Deny(githubtest.CreateCheckRun, http.StatusForbidden)
	env := map[string]string{
		"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_EVENT_PATH": event, "GITHUB_API_URL": gh.URL,
	}
	code, stdout, stderr := runCLI(t, env, "check", "--repo", dir, "--base", base, "--head", head, "--github")
	// The change is invalid: that decides the exit status; the refusal is
	// still explained, and the comment (allowed) still written.
	if code != cli.ExitInvalid || !strings.Contains(stderr, `lacks the "checks: write" permission`) {
		t.Errorf("got exit %d, stderr %q; want 3 naming checks: write", code, stderr)
	}
	if !strings.Contains(stdout, "payments/checkout") || len(gh.Comments(5)) != 1 {
		t.Errorf("the report must still be printed and commented; stdout %q, %d comments", stdout, len(gh.Comments(5)))
	}

	// A valid change with the same refusal: exit 1, cuecast failed to report.
	gh2 := githubtest.New(t)
	gh2.Deny(githubtest.CreateComment, http.StatusForbidden)
	env["GITHUB_API_URL"] = gh2.URL
	code, _, stderr = runCLI(t, env, "check", "--repo", dir, "--base", base, "--head", base, "--github")
	if code != cli.ExitFailure || !strings.Contains(stderr, `lacks the "pull-requests: write" permission`) {
		t.Errorf("got exit %d, stderr %q; want 1 naming pull-requests: write", code, stderr)
	}
	if r := gh2.Runs()[1001]; r.Conclusion != "success" {
		t.Errorf("check run: got %q, want success", r.Conclusion)
	}
}

func TestCheckGitHubBadRevisionAbortsRun(t *testing.T) {
	t.Parallel()
	dir, _, base, _ := prRepo(t)
	gh := githubtest.New(t)
	env := map[string]string{"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_API_URL": gh.URL}
	code, _, stderr := runCLI(t, env, "check", "--repo", dir, "--base", "no-such", "--head", base, "--github", "--pr", "5")
	if code != cli.ExitUsage || !strings.Contains(stderr, `--base: unknown revision "no-such"`) {
		t.Fatalf("got exit %d, stderr %q", code, stderr)
	}
	runs := gh.Runs()
	if len(runs) != 1 || runs[1001].Conclusion != "failure" || !strings.Contains(runs[1001].Summary, "no-such") {
		t.Errorf("the check run must be completed as failed with the cause; got %+v", runs)
	}
	if len(gh.Comments(5)) != 0 {
		t.Error("a comment was written for a check that did not run")
	}
}

// TestCheckPartialHistory: a clone that has both tips but not their merge
// base (fetch-depth: 1 on both branches) is wrong usage, exit 2, naming the
// revision and the fetch-depth that fixes it, as a fully shallow clone is.
func TestCheckPartialHistory(t *testing.T) {
	t.Parallel()
	r := gittest.New(t)
	fork := r.CommitFiles("main", map[string]string{"README.md": "configs\n"})
	wt, err := r.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []string{"d1", "d2"} {
		if err := wt.Checkout(&git.CheckoutOptions{Hash: plumbing.NewHash(fork), Branch: plumbing.NewBranchReferenceName(b), Create: true}); err != nil {
			t.Fatal(err)
		}
		r.CommitFiles(b+": one", map[string]string{b + ".txt": "one\n"})
		r.CommitFiles(b+": two", map[string]string{b + ".txt": "two\n"})
	}
	dir := r.ShallowClone("d1", "d2")
	code, _, stderr := runCLI(t, nil, "check", "--repo", dir, "--base", "origin/d2", "--head", "HEAD")
	if code != cli.ExitUsage || !strings.Contains(stderr, `--base "origin/d2"`) || !strings.Contains(stderr, "fetch-depth: 0") {
		t.Errorf("got exit %d, stderr %q; want %d naming --base \"origin/d2\" and fetch-depth: 0", code, stderr, cli.ExitUsage)
	}
}

// TestCheckGitHubStdoutFails: the report cannot be written to stdout (here
// a file open for reading). The command fails (exit 1), but the check run
// it started is not left in_progress on GitHub for ever: it is completed
// with the report, and the comment is still written. Nor when GitHub
// refuses to complete it: then it is aborted.
func TestCheckGitHubStdoutFails(t *testing.T) {
	t.Parallel()
	dir, event, _, _ := prRepo(t)
	gh := githubtest.New(t)
	env := map[string]string{
		"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_EVENT_PATH": event, "GITHUB_API_URL": gh.URL,
	}
	readOnly, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer readOnly.Close()
	ios, _, errOut := iostreams.Test()
	ios.Out = readOnly
	code := cli.Main(t.Context(), []string{"check", "--repo", dir, "--github"}, ios, func(k string) string { return env[k] })
	if code != cli.ExitFailure || !strings.Contains(errOut.String(), "write report") {
		t.Errorf("got exit %d, stderr %q; want %d saying the report could not be written", code, errOut, cli.ExitFailure)
	}
	runs := gh.Runs()
	if len(runs) != 1 || runs[1001].Status != "completed" || runs[1001].Conclusion != "failure" || runs[1001].Title != "1 new error(s)" {
		t.Errorf("check runs: got %+v, want one completed with the report's verdict, failure", runs)
	}
	if cs := gh.Comments(5); len(cs) != 1 || !strings.Contains(cs[0].Body, "DOGECOIN") {
		t.Errorf("comments: got %d, want the report", len(cs))
	}

	// GitHub refuses the report (422): the run is aborted instead, not
	// left in_progress, and the comment is still written.
	gh2 := githubtest.New(t)
	gh2.Fail(githubtest.UpdateCheckRun, http.StatusUnprocessableEntity, nil, "Validation Failed")
	env["GITHUB_API_URL"] = gh2.URL
	code, _, stderr := runCLI(t, env, "check", "--repo", dir, "--github")
	if code != cli.ExitInvalid || !strings.Contains(stderr, "update check run") {
		t.Errorf("got exit %d, stderr %q; want %d saying the update failed", code, stderr, cli.ExitInvalid)
	}
	if r := gh2.Runs()[1001]; r.Status != "completed" || r.Conclusion != "failure" || r.Title != "cuecast could not run" {
		t.Errorf("check run: got %s/%s %q, want completed/failure, aborted", r.Status, r.Conclusion, r.Title)
	}
	if len(gh2.Comments(5)) != 1 {
		t.Errorf("comments: got %d, want the report", len(gh2.Comments(5)))
	}
}

// TestCheckGitHubForeignMarker: someone who may comment on the pull request
// posts a comment opening with cuecast's marker before cuecast does. With
// the Actions token GitHub would refuse cuecast's edit of it (403, blamed on
// the token's permissions) and cuecast's report would never be posted.
// cuecast leaves it alone and posts its own, and edits its own on the next
// run.
func TestCheckGitHubForeignMarker(t *testing.T) {
	t.Parallel()
	dir, event, _, _ := prRepo(t)
	gh := githubtest.New(t)
	fake := ci.Marker + "\n## cuecast check: ✅ all good, merge away"
	gh.AddComment(5, "mallory", fake)
	env := map[string]string{
		"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_EVENT_PATH": event, "GITHUB_API_URL": gh.URL,
	}
	for run := 1; run <= 2; run++ {
		code, _, stderr := runCLI(t, env, "check", "--repo", dir, "--github", "--log-level", "warn")
		// Only a warning that the foreign comment was ignored, no error.
		if code != cli.ExitInvalid || strings.Contains(stderr, "cuecast: ") || !strings.Contains(stderr, "author=mallory") {
			t.Fatalf("run %d: exit %d, stderr %q; want %d and a warning naming mallory", run, code, stderr, cli.ExitInvalid)
		}
	}
	cs := gh.Comments(5)
	if len(cs) != 2 || cs[0].Body != fake || cs[1].User != githubtest.ActionsBot || !strings.Contains(cs[1].Body, "DOGECOIN") {
		t.Errorf("comments: got %+v; want mallory's untouched and cuecast's report", cs)
	}
	for _, r := range gh.Requests() {
		if r.Method == http.MethodPatch && strings.Contains(r.Path, fmt.Sprintf("/comments/%d", cs[0].ID)) {
			t.Errorf("cuecast tried to edit mallory's comment: %s %s", r.Method, r.Path)
		}
	}
}

// TestCheckGitHubCancelled: the job is cancelled (Actions sends SIGINT)
// while check waits on Prometheus, after it opened the check run. The run
// is still marked failed: aborted with the command's own, cancelled
// context, the request failed and the run stayed in_progress on the pull
// request for ever.
func TestCheckGitHubCancelled(t *testing.T) {
	t.Parallel()
	dir := analysisStage(t)
	asked, release := make(chan struct{}, 1), make(chan struct{})
	prom := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case asked <- struct{}{}:
		default:
		}
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(prom.Close)
	t.Cleanup(func() { close(release) }) // first: Close waits for the handler
	event := filepath.Join(t.TempDir(), "event.json")
	if err := os.WriteFile(event, []byte(`{"action":"opened","number":5}`), 0o644); err != nil {
		t.Fatal(err)
	}
	gh := githubtest.New(t)
	env := map[string]string{
		"GITHUB_TOKEN": githubtest.Token, "GITHUB_REPOSITORY": "acme/configs", "GITHUB_EVENT_PATH": event, "GITHUB_API_URL": gh.URL,
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() {
		select {
		case <-asked:
			cancel()
		case <-ctx.Done():
		}
	}()
	ios, _, errOut := iostreams.Test()
	code := cli.Main(ctx, []string{"check", "--repo", dir, "--base", "HEAD~1", "--head", "HEAD", "--github", "--prometheus", prom.URL}, ios, func(k string) string { return env[k] })
	if code == cli.ExitOK {
		t.Errorf("exit %d after the cancel, stderr %q; want a failure", code, errOut)
	}
	runs := gh.Runs()
	if len(runs) != 1 || runs[1001].Status != "completed" || runs[1001].Conclusion != "failure" {
		t.Errorf("check runs: got %+v, want one completed, failure (aborted)", runs)
	}
}
