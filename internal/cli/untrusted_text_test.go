package cli_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/promtest"
)

// What someone who may commit chooses: an author and a subject with a
// colour, a window title (OSC … BEL), a carriage return that would print
// "v9 approved by security" over the line, and a bidi override; a file
// name with a C1 CSI (colour) and an override. Git itself refuses a C0
// control in a path (go-git, like git, will not check such a tree out).
const (
	evilName    = "Mallory \x1b]0;owned\a\x1b[2K"
	evilSubject = "checkout: USD\x1b[31m\rv9 approved by security\u202e"
	evilFile    = "payments/checkout/\u009b31mok\u202egpj.cue"
)

// rawControls are the bytes none of the text output may carry.
var rawControls = []string{"\x1b", "\r", "\a", "\u009b", "\u202e"}

// evilNameShown and evilSubjectShown are evilName and evilSubject as text
// output shows them.
const (
	evilNameShown    = `Mallory \x1b]0;owned\x07\x1b[2K`
	evilSubjectShown = `checkout: USD\x1b[31m\rv9 approved by security\u202e`
)

func commitAs(t *testing.T, repo *gittest.Repo, name, msg string, when time.Time) string {
	t.Helper()
	wt, err := repo.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: name, Email: "mallory@example.com", When: when}})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// assertEscaped fails unless out carries no raw control and shows each of
// want, the escaped forms.
func assertEscaped(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, c := range rawControls {
		if strings.Contains(out, c) {
			t.Errorf("%s prints %q raw:\n%q", what, c, out)
		}
	}
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %s:\n%q", what, w, out)
		}
	}
}

// TestRepoTextEscapedForTerminals: a commit's author and subject, and a
// file name, reach log, rollout status, tailer status and check's text
// output with their controls escaped, and their JSON output exact; so do
// a rollback's actor and reason in rollout audit and status.
func TestRepoTextEscapedForTerminals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := exampleRepo(t)
	p := startPipeline(t, repo)
	url := p.ClientURL()
	const author, subject = evilNameShown, evilSubjectShown
	// The import rolled out before the edit: the rollback below goes back
	// to it. Committed before the tailer's first poll, the edit was the
	// first version the controller saw, and no version preceded it.
	awaitRolledOut(t, p, checkoutCfg, 1)

	repo.Edit("payments/checkout/checkout.cue", `"EUR"`, `"USD"`)
	good := commitAs(t, repo, evilName, evilSubject+"\n\nbody", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	p.Tailer.Wake()
	await(t, "the commit published", func() bool {
		v, err := p.Distributor.Latest(ctx, "payments/checkout")
		return err == nil && v.Commit == good
	})

	code, out, errOut := run(ctx, "log", "payments/checkout", "--nats", url, "--limit", "1")
	if code != 0 {
		t.Fatalf("log: exit %d, stderr %q", code, errOut)
	}
	assertEscaped(t, "log", out.String(), author, subject)
	code, out, _ = run(ctx, "log", "payments/checkout", "--nats", url, "--limit", "1", "--output", "json")
	var vs []cuecast.Version
	if err := json.Unmarshal([]byte(out.String()), &vs); code != 0 || err != nil || len(vs) != 1 ||
		vs[0].Author != evilName+" <mallory@example.com>" || cuecast.CommitSubject(vs[0].Message) != evilSubject {
		t.Errorf("log --output json: exit %d, %v, %+v; want the author and subject exact", code, err, vs)
	}

	poll.Until(t, "rollout status naming the commit", poll.Patience, func() (bool, string) {
		code, out, errOut := run(ctx, "rollout", "status", "--nats", url, "payments/checkout")
		return code == 0 && strings.Contains(out.String(), cuecast.ShortCommit(good)), out.String() + errOut.String()
	})
	_, out, _ = run(ctx, "rollout", "status", "--nats", url, "payments/checkout")
	assertEscaped(t, "rollout status", out.String(), "by "+author)

	// A commit the compiler rejects: tailer status names its author,
	// subject and the error in the file.
	repo.Write(map[string]string{evilFile: "package checkout\n\nthis is not cue {\n"})
	bad := commitAs(t, repo, evilName, evilSubject, time.Date(2026, 2, 1, 0, 0, 1, 0, time.UTC))
	p.Tailer.Wake()
	poll.Until(t, "tailer status naming the rejected commit", poll.Patience, func() (bool, string) {
		_, out, errOut := run(ctx, "tailer", "status", "--nats", url)
		return strings.Contains(out.String(), cuecast.ShortCommit(bad)+" "), out.String() + errOut.String()
	})
	_, out, _ = run(ctx, "tailer", "status", "--nats", url)
	assertEscaped(t, "tailer status", out.String(), author+" <mallory@example.com>: "+subject, `\u009b31mok\u202egpj.cue`)

	// check, between the two commits, as CI runs it.
	checkCode, text, stderr := runCLI(t, nil, "check", "--repo", repo.Dir, "--base", good, "--head", bad)
	if !strings.Contains(text, "errors at head") {
		t.Fatalf("check: exit %d, stdout %q, stderr %q; want the error in the file", checkCode, text, stderr)
	}
	assertEscaped(t, "check", text, `\u009b31mok\u202egpj.cue`)
	_, js, _ := runCLI(t, nil, "check", "--repo", repo.Dir, "--base", good, "--head", bad, "--output", "json")
	var rep ci.Report
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("check --output json: %v\n%s", err, js)
	}
	if !strings.Contains(js, "\u009b31mok\u202egpj.cue") {
		t.Errorf("check --output json: want the file name exact:\n%s", js)
	}

	// A rollback's actor and reason reach the audit trail; rollout audit
	// and status print them.
	evilEnv := map[string]string{"CUECAST_ACTOR": evilName}
	if code, _, errOut := runEnv(ctx, evilEnv, "rollback", "payments/checkout", "--nats", url, "--previous", "--reason", evilSubject); code != 0 {
		t.Fatalf("rollback: exit %d, stderr %q", code, errOut)
	}
	_, out, _ = run(ctx, "rollout", "audit", "payments/checkout", "--nats", url)
	assertEscaped(t, "rollout audit", out.String(), author, subject)
	_, out, _ = run(ctx, "status", "payments/checkout", "--nats", url)
	assertEscaped(t, "status", out.String(), "by "+author)
}

// TestRolloutAnalyzeEscapesPolicyText: rollout analyze prints the stage
// and metric names a commit's policy chose with their controls escaped,
// and exact in JSON.
func TestRolloutAnalyzeEscapesPolicyText(t *testing.T) {
	t.Parallel()
	prom := promtest.Start(t, time.Second)
	repo := exampleRepo(t)
	const stage, metric = "canary\x1b[31m\u202e", "errors\r\x1b]0;t\a"
	pol := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: stage, Percent: 50, Hold: cuecast.Duration(time.Hour), Analysis: []cuecast.Metric{
			{Name: metric, Compare: cuecast.CompareThreshold, Max: 1, Query: "vector(0)"},
		}},
		{Name: "all", Percent: 100},
	}}}
	p := servePipeline(t, repo, pol)
	ctx := t.Context()
	url := p.ClientURL()
	awaitHolding(t, url, "payments/checkout")
	code, out, errOut := run(ctx, "rollout", "analyze", "--nats", url, "payments/checkout", "--prometheus", prom.URL)
	if code != 0 {
		t.Fatalf("analyze: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	assertEscaped(t, "rollout analyze", out.String(), `canary\x1b[31m\u202e`, `errors\r\x1b]0;t\x07`)
	code, out, _ = run(ctx, "rollout", "analyze", "--nats", url, "payments/checkout", "--prometheus", prom.URL, "-o", "json")
	var got []struct {
		Stage  string `json:"stage"`
		Metric string `json:"metric"`
	}
	if err := json.Unmarshal([]byte(out.String()), &got); code != 0 || err != nil || len(got) != 1 || got[0].Stage != stage || got[0].Metric != metric {
		t.Errorf("analyze -o json: exit %d, %v, %+v; want the names exact", code, err, got)
	}
}

// TestRevertEscapesSubject: revert names the commit it made by its
// subject, which quotes the reverted commit's. internal/revert writes it
// with %q, which escapes every control already; this keeps it so.
func TestRevertEscapesSubject(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.CommitFiles("base", map[string]string{"payments/checkout/checkout.cue": "a: 1\n"})
	repo.Write(map[string]string{"payments/checkout/checkout.cue": "a: 2\n"})
	evil := commitAs(t, repo, evilName, evilSubject, time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	code, out, errOut := run(t.Context(), "revert", evil, "--repo", repo.Dir)
	if code != 0 {
		t.Fatalf("revert: exit %d, stderr %q", code, errOut)
	}
	assertEscaped(t, "revert", out.String(), `checkout: USD\x1b[31m\rv9 approved by security\u202e`)
}

// TestCompileAndExplainEscapeFileNames: compile, which CI runs
// (docs/SECURITY.md, "CI"), explain and set print the positions of a file
// whose name a pull request chose, in an error and in a value's origin,
// with its controls escaped, and in JSON exact. They printed them raw.
func TestCompileAndExplainEscapeFileNames(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	const shown = `payments/checkout/\u009b31mok\u202egpj.cue`
	repo.Write(map[string]string{evilFile: "package checkout\n\nmax_amount_minor: \"x\"\n"})
	code, out, errOut := run(t.Context(), "compile", "--repo", repo.Dir, "payments/checkout")
	if code != cli.ExitInvalid {
		t.Fatalf("compile of a conflict in %q: exit %d, stderr %q; want %d", evilFile, code, errOut, cli.ExitInvalid)
	}
	assertEscaped(t, "compile", out.String()+errOut.String(), shown)

	repo.Write(map[string]string{evilFile: "package checkout\n\nnote: \"x\"\n"})
	code, out, errOut = run(t.Context(), "explain", "--repo", repo.Dir, "payments/checkout", "note")
	if code != 0 {
		t.Fatalf("explain: exit %d, stderr %q", code, errOut)
	}
	assertEscaped(t, "explain", out.String(), shown)
	code, out, _ = run(t.Context(), "explain", "--repo", repo.Dir, "payments/checkout", "note", "--output", "json")
	if code != 0 || !strings.Contains(out.String(), "\u009b31mok\u202egpj.cue") {
		t.Errorf("explain --output json: exit %d, %q; want the file name exact", code, out)
	}
	// set names the file it edits as explain does.
	repo.Commit("a note")
	code, out, errOut = run(t.Context(), "set", "--repo", repo.Dir, "payments/checkout", `note="y"`, "--reason", "r", "--dry-run", "--as", "Ann <ann@example.com>")
	if code != 0 {
		t.Fatalf("set: exit %d, stderr %q", code, errOut)
	}
	assertEscaped(t, "set", out.String(), shown)
}
