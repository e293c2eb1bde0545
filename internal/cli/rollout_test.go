package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natsconf"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

const checkoutCfg = cuecast.ConfigPath("payments/checkout")

// servePipeline runs a pipeline over repo with the given policies (nil:
// the default one stage).
func servePipeline(t *testing.T, repo *gittest.Repo, pol rollout.Policies) *pipeline.Pipeline {
	t.Helper()
	p, _ := pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, Policies: pol})
	return p
}

// exampleNamespaces are configs-example's, which a tree's servers serve
// (natstest.FleetOptions).
var exampleNamespaces = []string{"payments", "search", "growth"}

// watchers starts service instances on checkout in fl, returning their
// watchers.
func watchers(t *testing.T, p *pipeline.Pipeline, fl *natstest.Fleet, ids ...string) []*client.Watcher {
	t.Helper()
	var ws []*client.Watcher
	for _, id := range ids {
		nc := fl.Instance(t, checkoutCfg.Namespace())
		w := natstest.Watch(t, nc, checkoutCfg, append(fl.ClientOptions(checkoutCfg.Namespace()), client.WithInstance(id), client.WithTrustedKeys(p.PublicKey)))
		ws = append(ws, w)
	}
	return ws
}

func waitVersion(t *testing.T, ws []*client.Watcher, v uint64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("instances on v%d", v), poll.Patience, func() (bool, string) {
		for i, w := range ws {
			if w.Current().Version != v {
				return false, fmt.Sprintf("instance %d on v%d", i, w.Current().Version)
			}
		}
		return true, ""
	})
}

// editCheckoutFile replaces from with to in checkout.cue and commits.
func editCheckoutFile(t *testing.T, repo *gittest.Repo, from, to, msg string) string {
	t.Helper()
	repo.Edit("payments/checkout/checkout.cue", from, to)
	return repo.Commit(msg)
}

func runEnv(ctx context.Context, env map[string]string, args ...string) (int, *syncBuffer, *syncBuffer) {
	stdout, stderr := &syncBuffer{}, &syncBuffer{}
	io := &iostreams.IOStreams{In: strings.NewReader(""), Out: stdout, ErrOut: stderr}
	code := cli.Main(ctx, args, io, func(k string) string { return env[k] })
	return code, stdout, stderr
}

// TestRollbackPinRevertAndWait: an emergency rollback to the previous
// version (rollback --previous) reaches every
// instance and pins the config; status shows the pin and --wait fails on
// the rolled-back version with the stragglers; the revert commit made by
// `cuecast revert` restores the pinned content, which lifts the pin.
func TestRollbackPinRevertAndWait(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, testRollbackPinRevertAndWait)
}

func testRollbackPinRevertAndWait(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	p, fl := pipelinetest.RunInMode(t, pipeline.Config{Repo: repo.Dir}, natstest.FleetOptions{Namespaces: exampleNamespaces, Heartbeat: 500 * time.Millisecond})
	ctx := t.Context()
	url := fl.HubURL()
	// as is a command line as the operator (a tree's hub has users).
	as := func(args ...string) []string { return append(args, fl.Login(natsconf.OperatorUser)...) }
	ws := watchers(t, p, fl, "web-1", "web-2")
	waitVersion(t, ws, 1)

	bad := editCheckoutFile(t, repo, "max_amount_minor: 5_000_000", "max_amount_minor: 2_500_000", "checkout: halve the limit")
	waitVersion(t, ws, 2)
	if code, out, errOut := run(ctx, as("status", "--nats", url, "--wait", "payments/checkout@2", "--timeout", "20s")...); code != 0 {
		t.Fatalf("status --wait @2: exit %d, stdout %q stderr %q", code, out, errOut)
	} else if !strings.Contains(out.String(), "live instances report it") {
		t.Errorf("status --wait @2: got %q", out)
	}

	// --previous: the version v2's rollout falls back to, v1 (only the
	// dashboard could say "the previous version").
	code, out, errOut := runEnv(ctx, map[string]string{"USER": "ann"}, as("rollback", "payments/checkout", "--nats", url, "--previous", "--reason", "checkout 5xx")...)
	if code != 0 {
		t.Fatalf("rollback --previous: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out.String(), "every cohort points at v1 (rollback)") {
		t.Errorf("rollback --previous: got %q, want every cohort pointed at v1", out)
	}
	if !strings.Contains(out.String(), "PINNED") {
		t.Errorf("rollback output does not say the config is pinned: %q", out)
	}
	waitVersion(t, ws, 1)
	// Both instances' reports of v1 reach the report stream.
	poll.Until(t, "status --wait @1 seeing both instances", poll.Patience, func() (bool, string) {
		code, out, errOut := run(ctx, as("status", "--nats", url, "--wait", "payments/checkout@1", "--timeout", "10s")...)
		return code == 0 && strings.Contains(out.String(), "all 2 live instances"), out.String() + errOut.String()
	})

	code, out, errOut = run(ctx, as("status", "--nats", url, "--wait", "payments/checkout@2", "--timeout", "300ms")...)
	if code != cli.ExitHalted {
		t.Fatalf("status --wait @2 after rollback: exit %d, want %d; stdout %q", code, cli.ExitHalted, out)
	}
	for _, want := range []string{"timed out", "straggler web-1 on v1", "straggler web-2 on v1"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("status --wait stderr: got %q, want %q", errOut, want)
		}
	}
	code, out, _ = run(ctx, as("status", "--nats", url, "payments/checkout")...)
	if code != 0 || !strings.Contains(out.String(), "PINNED to v1 by ann") {
		t.Errorf("status payments/checkout: exit %d, got %q, want the pin shown loudly", code, out)
	}
	// Counted against the pin, not the newest version: it said "v2 0/2
	// instances", and both instances were stragglers.
	if !regexp.MustCompile(`(?m)^payments/checkout\s+v1 \(latest v2\)\s+2/2 instances\s`).MatchString(out.String()) || strings.Contains(out.String(), "stragglers") {
		t.Errorf("status payments/checkout after rollback --to 1: got %q, want v1 (latest v2) 2/2 instances and no stragglers", out)
	}
	code, out, _ = run(ctx, as("status", "--nats", url)...)
	if code != 0 || !strings.Contains(out.String(), "!!! payments/checkout PINNED to v1") {
		t.Errorf("status: exit %d, got %q, want the pin shown loudly", code, out)
	}

	code, out, errOut = run(ctx, "revert", bad, "--repo", repo.Dir)
	if code != 0 {
		t.Fatalf("revert: exit %d, stderr %q", code, errOut)
	}
	if !strings.Contains(out.String(), `Revert "checkout: halve the limit"`) {
		t.Errorf("revert output: %q", out)
	}
	waitVersion(t, ws, 3)
	code, out, _ = run(ctx, as("rollout", "status", "--nats", url, "payments/checkout", "-o", "json")...)
	var ps []rollout.Progress
	if err := json.Unmarshal([]byte(out.String()), &ps); err != nil || code != 0 || len(ps) != 1 {
		t.Fatalf("rollout status json: exit %d, %v: %q", code, err, out)
	}
	if rec := ps[0].Record; rec.Pin != nil || rec.Current.Version != 3 {
		t.Errorf("after the revert: pin %+v, rollout of v%d; want no pin, v3", rec.Pin, rec.Current.Version)
	}
	code, out, _ = run(ctx, as("rollout", "audit", "--nats", url, "payments/checkout")...)
	if code != 0 || !strings.Contains(out.String(), "rollback") || !strings.Contains(out.String(), "unpin") || !strings.Contains(out.String(), "ann") {
		t.Errorf("rollout audit: exit %d, got %q, want ann's rollback and the unpin", code, out)
	}
}

// awaitHolding waits until cfg's rollout holds at a stage, as rollout
// status says.
func awaitHolding(t *testing.T, url string, cfg cuecast.ConfigPath) {
	t.Helper()
	poll.Until(t, cfg.String()+"'s rollout holding", poll.Patience, func() (bool, string) {
		code, out, _ := run(t.Context(), "rollout", "status", "--nats", url, string(cfg))
		return code == 0 && strings.Contains(out.String(), "HOLDING"), out.String()
	})
}

// awaitRolledOut waits until version's rollout of cfg is complete in p,
// so that the next commit's rollout falls back to it (Rollout.From).
func awaitRolledOut(t *testing.T, p *pipeline.Pipeline, cfg cuecast.ConfigPath, version uint64) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%s v%d rolled out", cfg, version), poll.Patience, func() (bool, string) {
		rec, err := p.Rollout.Record(t.Context(), cfg)
		if err != nil || rec.Current == nil {
			return false, fmt.Sprint(err)
		}
		return rec.Current.Version == version && rec.Current.State == rollout.StateComplete, fmt.Sprintf("v%d %s", rec.Current.Version, rec.Current.State)
	})
}

// TestRolloutOperatorCommands drives a three-stage rollout by hand.
func TestRolloutOperatorCommands(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	pol := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 1, Hold: cuecast.Duration(time.Hour)},
		{Name: "early", Percent: 10, Hold: cuecast.Duration(time.Hour)},
		{Name: "all", Percent: 100},
	}}}
	p := servePipeline(t, repo, pol)
	ctx := t.Context()
	url := p.ClientURL()
	// v1 rolls out through the same stages: skip its holds.
	awaitHolding(t, url, "payments/checkout")
	if code, _, errOut := run(ctx, "rollout", "advance", "--nats", url, "payments/checkout", "--reason", "first import", "--emergency", "--as", "ann"); code != 0 {
		t.Fatalf("advance --emergency: exit %d, %q", code, errOut)
	}
	editCheckoutFile(t, repo, "max_amount_minor: 5_000_000", "max_amount_minor: 2_500_000", "checkout: halve the limit")
	poll.Until(t, "v2 canary holding", poll.Patience, func() (bool, string) {
		code, out, _ := run(ctx, "rollout", "status", "--nats", url, "payments/checkout")
		s := out.String()
		return code == 0 && strings.Contains(s, "v2 HOLDING") && strings.Contains(s, "now  canary"), s
	})
	if code, _, errOut := run(ctx, "rollout", "halt", "--nats", url, "payments/checkout"); code != cli.ExitUsage || !strings.Contains(errOut.String(), "--reason") {
		t.Errorf("halt without --reason: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(ctx, "rollout", "halt", "--nats", url, "payments/checkout", "--reason", "latency", "--as", "ann"); code != 0 {
		t.Fatalf("halt: exit %d, %q", code, errOut)
	}
	code, out, _ := run(ctx, "rollout", "status", "--nats", url, "payments/checkout")
	if code != cli.ExitHalted || !strings.Contains(out.String(), "HALTED") || !strings.Contains(out.String(), "operator ann: latency") {
		t.Errorf("status of a halted rollout: exit %d, %q", code, out)
	}
	// The overview exits 4 too (docs/OPERATIONS.md, "A halted rollout"): a
	// script running the runbook's `cuecast rollout status` got 0.
	for _, args := range [][]string{{}, {"-o", "json"}} {
		code, out, errOut := run(ctx, append([]string{"rollout", "status", "--nats", url}, args...)...)
		if code != cli.ExitHalted || !strings.Contains(out.String(), "payments/checkout") {
			t.Errorf("rollout status %v with payments/checkout halted: exit %d (stdout %d bytes), stderr %q; want exit %d", args, code, len(out.String()), errOut, cli.ExitHalted)
		}
	}
	if code, _, errOut := run(ctx, "rollout", "halt", "--nats", url, "payments/checkout", "--reason", "again"); code != cli.ExitUsage || !strings.Contains(errOut.String(), "halted") {
		t.Errorf("halting a halted rollout: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(ctx, "rollout", "resume", "--nats", url, "payments/checkout", "--reason", "load test", "--as", "ann"); code != 0 {
		t.Fatalf("resume: exit %d, %q", code, errOut)
	}
	if code, _, errOut := run(ctx, "rollout", "advance", "--nats", url, "payments/checkout", "--reason", "ok", "--as", "bob"); code != 0 {
		t.Fatalf("advance: exit %d, %q", code, errOut)
	}
	poll.Until(t, "early", poll.Patience, func() (bool, string) {
		_, out, _ := run(ctx, "rollout", "status", "--nats", url, "payments/checkout")
		return strings.Contains(out.String(), "now  early"), out.String()
	})
	if code, _, errOut := run(ctx, "rollout", "advance", "--nats", url, "payments/checkout", "--reason", "fix", "--emergency", "--as", "bob"); code != 0 {
		t.Fatalf("advance --emergency: exit %d, %q", code, errOut)
	}
	code, out, errOut := run(ctx, "rollout", "watch", "--nats", url, "payments/checkout", "--interval", "50ms")
	if code != 0 || !strings.Contains(out.String(), "complete") {
		t.Errorf("watch: exit %d, stdout %q stderr %q", code, out, errOut)
	}
	// -o json is JSON Lines (README, --help): one object per line, each
	// parsed alone, as a script reading the stream does.
	code, out, errOut = run(ctx, "rollout", "watch", "--nats", url, "payments/checkout", "--interval", "50ms", "-o", "json")
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if code != 0 || out.String() == "" {
		t.Errorf("watch -o json: exit %d, stdout %q stderr %q", code, out, errOut)
	}
	for i, l := range lines {
		var p map[string]any
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Errorf("watch -o json: line %d %q: %v; want one JSON object a line", i+1, l, err)
		}
	}
	if _, help, _ := run(ctx, "rollout", "watch", "--help"); !strings.Contains(help.String(), "JSON Lines") {
		t.Errorf("rollout watch --help does not say -o json writes JSON Lines:\n%s", help)
	}
	code, out, _ = run(ctx, "rollout", "audit", "--nats", url, "payments/checkout", "-o", "json")
	var audit []rollout.AuditEntry
	if err := json.Unmarshal([]byte(out.String()), &audit); err != nil || code != 0 {
		t.Fatalf("audit json: exit %d, %v", code, err)
	}
	var got []string
	for _, a := range audit {
		got = append(got, fmt.Sprintf("%s:%s:%t", a.Actor, a.Action, a.Emergency))
	}
	want := "ann:advance:true ann:halt:false ann:resume:false bob:advance:false bob:advance:true"
	if strings.Join(got, " ") != want {
		t.Errorf("audit: got %v, want %s", got, want)
	}
	// A misspelt config is no such config (exit 2, as status and log say
	// it), not an empty audit trail a script takes for "nothing happened".
	for _, args := range [][]string{{}, {"-o", "json"}} {
		code, out, errOut := run(ctx, append([]string{"rollout", "audit", "--nats", url, "payments/chekout"}, args...)...)
		if code != cli.ExitUsage || !strings.Contains(errOut.String(), "payments/chekout") {
			t.Errorf("rollout audit %v of a config never published: exit %d, stdout %q, stderr %q; want %d naming it", args, code, out, errOut, cli.ExitUsage)
		}
	}
	// So is a watch for a version of it, as status --wait has it: the
	// watch waited for a rollout that would never begin.
	bounded, cancel := context.WithTimeout(ctx, poll.Patience)
	defer cancel()
	if code, out, errOut := run(bounded, "rollout", "watch", "--nats", url, "payments/chekout", "--version", "1", "--interval", "50ms"); code != cli.ExitUsage || !strings.Contains(errOut.String(), "payments/chekout has no versions") {
		t.Errorf("rollout watch --version of a config never published: exit %d, stdout %q, stderr %q; want %d naming it", code, out, errOut, cli.ExitUsage)
	}

	// Right after a commit the record still shows v2's rollout, complete: a
	// plain watch ended at once with success. With --commit it waits for the
	// rollout of the version that commit makes (issue 17, item 8).
	third := editCheckoutFile(t, repo, "max_amount_minor: 2_500_000", "max_amount_minor: 1_000_000", "checkout: lower the limit")
	watched := make(chan struct{})
	var wcode int
	var wout, werr *syncBuffer
	go func() {
		defer close(watched)
		wcode, wout, werr = run(ctx, "rollout", "watch", "--nats", url, "payments/checkout", "--commit", third[:10], "--interval", "50ms")
	}()
	poll.Until(t, "v3 canary holding", poll.Patience, func() (bool, string) {
		_, out, _ := run(ctx, "rollout", "status", "--nats", url, "payments/checkout")
		return strings.Contains(out.String(), "v3 HOLDING"), out.String()
	})
	select {
	case <-watched:
		t.Fatalf("watch --commit ended while v3 was still holding: exit %d, %q %q", wcode, wout, werr)
	default:
	}
	if code, _, errOut := run(ctx, "rollout", "advance", "--nats", url, "payments/checkout", "--reason", "ship", "--emergency", "--as", "bob"); code != 0 {
		t.Fatalf("advance --emergency: exit %d, %q", code, errOut)
	}
	<-watched
	if wcode != 0 || !strings.Contains(wout.String(), "v3") || !strings.Contains(wout.String(), "complete") {
		t.Errorf("watch --commit: exit %d, stdout %q stderr %q; want v3 followed to complete", wcode, wout, werr)
	}

	// docs/ROLLOUT.md's deploy line, `git push && cuecast rollout watch
	// CONFIG --commit $(git rev-parse HEAD)`, after a push that leaves
	// CONFIG's output as it was: the tailer has taken the commit and made
	// no version of CONFIG from it, so there is nothing to wait for. The
	// watch waited for a "v4" for good, and the deploy script with it.
	other := repo.CommitFiles("docs: a note", map[string]string{"NOTES.md": "no config changes here\n"})
	poll.Until(t, "the tailer at "+other[:10], poll.Patience, func() (bool, string) {
		_, out, _ := run(ctx, "tailer", "status", "--nats", url)
		return strings.Contains(out.String(), cuecast.ShortCommit(other)), out.String()
	})
	bounded, cancel = context.WithTimeout(ctx, poll.Patience)
	defer cancel()
	code, out, errOut = run(bounded, "rollout", "watch", "--nats", url, "payments/checkout", "--commit", other[:10], "--interval", "50ms")
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "made no version of payments/checkout") {
		t.Errorf("watch --commit of a commit that made no version of the config: exit %d, stdout %q, stderr %q; want exit %d saying it made none", code, out, errOut, cli.ExitUsage)
	}
}

// fakePulls is GitHub's pull-request API of acme/configs: every pull
// request it opens is #7, and it keeps the last request's body and
// Authorization header.
type fakePulls struct {
	*httptest.Server
	mu   sync.Mutex
	body map[string]any
	auth string
}

func newFakePulls(t *testing.T) *fakePulls {
	t.Helper()
	f := &fakePulls{}
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/api/v3/repos/acme/configs/pulls" {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusNotFound)
			return
		}
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		_ = json.Unmarshal(body, &f.body)
		f.auth = r.Header.Get("Authorization")
		f.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"number":7,"html_url":"https://github.example/acme/configs/pull/7"}`)
	}))
	t.Cleanup(f.Close)
	return f
}

// last is the body and Authorization header of the last request.
func (f *fakePulls) last() (map[string]any, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.body, f.auth
}

func TestRevertConflictPushAndPR(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.CommitFiles("base", map[string]string{"payments/checkout/checkout.cue": "a: 1\n", "payments/other/other.cue": "b: 1\n"})
	first := repo.CommitFiles("checkout a=2", map[string]string{"payments/checkout/checkout.cue": "a: 2\n"})
	repo.CommitFiles("checkout a=3", map[string]string{"payments/checkout/checkout.cue": "a: 3\n"})
	other := repo.CommitFiles("other b=2", map[string]string{"payments/other/other.cue": "b: 2\n"})
	bare := repo.Bare()
	ctx := t.Context()

	code, _, errOut := run(ctx, "revert", first[:10], "--repo", repo.Dir)
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "payments/checkout/checkout.cue changed again after it") {
		t.Errorf("conflicting revert: exit %d, stderr %q", code, errOut)
	}
	if repo.Head() != other {
		t.Fatalf("a refused revert moved HEAD")
	}

	code, out, errOut := run(ctx, "revert", other, "--repo", repo.Dir, "--push")
	if code != 0 {
		t.Fatalf("revert --push: exit %d, %q", code, errOut)
	}
	if !strings.Contains(out.String(), "pushed main to origin") {
		t.Errorf("revert --push output: %q", out)
	}
	b, err := os.ReadFile(filepath.Join(repo.Dir, "payments/other/other.cue"))
	if err != nil || string(b) != "b: 1\n" {
		t.Errorf("reverted file: %q, %v; want the parent's content", b, err)
	}
	remote, err := git.PlainOpen(bare)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := remote.Reference(plumbing.NewBranchReferenceName("main"), true)
	if err != nil || ref.Hash().String() != repo.Head() {
		t.Errorf("remote main: %v %v, want %s", ref, err, repo.Head())
	}

	// --github-pr: a branch pushed and a pull request opened on the API.
	gh := newFakePulls(t)
	code, _, errOut = runEnv(ctx, map[string]string{"GITHUB_TOKEN": "tok"}, "revert", other, "--repo", repo.Dir,
		"--github-pr", "--github-repo", "acme/configs", "--github-api-url", gh.URL)
	if code != cli.ExitUsage || !strings.Contains(errOut.String(), "changed again") {
		// The first revert already touched other.cue: reverting again conflicts.
		t.Errorf("second revert of the same commit: exit %d, %q", code, errOut)
	}
	target := repo.CommitFiles("checkout a=4", map[string]string{"payments/checkout/checkout.cue": "a: 4\n"})
	code, out, errOut = runEnv(ctx, map[string]string{"GITHUB_TOKEN": "tok"}, "revert", target, "--repo", repo.Dir,
		"--github-pr", "--github-repo", "acme/configs", "--github-api-url", gh.URL)
	if code != 0 {
		t.Fatalf("revert --github-pr: exit %d, %q", code, errOut)
	}
	if !strings.Contains(out.String(), "opened pull request #7") {
		t.Errorf("revert --github-pr output: %q", out)
	}
	branch := "cuecast/revert-" + cuecast.ShortCommit(target)
	if got, auth := gh.last(); got["head"] != branch || got["base"] != "main" || auth != "Bearer tok" {
		t.Errorf("pull request: %v (auth %q), want head %s base main", got, auth, branch)
	}
	if _, err := remote.Reference(plumbing.NewBranchReferenceName(branch), true); err != nil {
		t.Errorf("branch %s not pushed: %v", branch, err)
	}
	if h, _ := repo.Git.Head(); h.Name().Short() != "main" || h.Hash().String() != target {
		t.Errorf("after --github-pr: HEAD %s at %s, want main at %s", h.Name().Short(), h.Hash(), target)
	}
}
