package cli_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
)

// TestLogNamesCarriedCommits: the version made by the commit that fixed the
// build holds the changes of the commit that broke it too; log names that
// commit, its author and subject under the version, escaped for a terminal
// and exact in JSON, so the fixer is not credited with someone else's change.
func TestLogNamesCarriedCommits(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := exampleRepo(t)
	p := startPipeline(t, repo)
	const file = "payments/checkout/checkout.cue"
	repo.Edit(file, `"EUR"`, `"USD"`)
	repo.Edit(file, "max_amount_minor: 5_000_000", `max_amount_minor: "lots"`)
	bad := commitAs(t, repo, evilName, evilSubject+"\n\nbody", time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC))
	repo.Edit(file, `max_amount_minor: "lots"`, "max_amount_minor: 5_000_000")
	repo.Author = object.Signature{Name: "Bob", Email: "bob@example.com"}
	fix := repo.Commit("checkout: a number again")
	p.Tailer.Wake()
	await(t, "v2 from the fix", func() bool {
		v, err := p.Distributor.Latest(ctx, "payments/checkout")
		return err == nil && v.Commit == fix
	})

	code, out, errOut := run(ctx, "log", "payments/checkout", "--nats", p.ClientURL())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || len(lines) != 3 || !strings.HasPrefix(lines[0], "v2 ") || !strings.Contains(lines[0], "Bob <bob@example.com>") ||
		!strings.Contains(lines[1], cuecast.ShortCommit(bad)) || !strings.Contains(lines[1], "(carried)") || !strings.HasPrefix(lines[2], "v1 ") {
		t.Fatalf("log: exit %d, stdout %q, stderr %q; want v2 by Bob, the carried commit under it, then v1", code, out, errOut)
	}
	assertEscaped(t, "log", lines[1], evilNameShown, evilSubjectShown)
	code, out, _ = run(ctx, "log", "payments/checkout", "--nats", p.ClientURL(), "--limit", "1", "--output", "json")
	var vs []cuecast.Version
	want := []cuecast.CommitRef{{Commit: bad, Author: evilName + " <mallory@example.com>", Message: evilSubject}}
	if err := json.Unmarshal([]byte(out.String()), &vs); code != 0 || err != nil || len(vs) != 1 || !slices.Equal(vs[0].Carries, want) {
		t.Fatalf("log --output json: exit %d, %v, %+v; want v2 carrying %+v", code, err, vs, want)
	}
}

// TestOneNamespaceBrokenOthersPublish: a commit that breaks a payments
// config and changes a search config publishes the search change; tailer
// status says the commit was rejected in payments only. Before, the whole
// commit was rejected, and every later one in every namespace with it.
func TestOneNamespaceBrokenOthersPublish(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := exampleRepo(t)
	p := startPipeline(t, repo)
	repo.Edit("payments/checkout/checkout.cue", "max_amount_minor: 5_000_000", `max_amount_minor: "lots"`)
	repo.Edit("search/ranking/ranking.cue", "boost_recent_days: 14", "boost_recent_days: 21")
	both := repo.Commit("checkout: lots; ranking: three weeks")
	p.Tailer.Wake()
	await(t, "search/ranking v2 from the commit", func() bool {
		v, err := p.Distributor.Latest(ctx, "search/ranking")
		return err == nil && v.Commit == both
	})
	if v, err := p.Distributor.Latest(ctx, "payments/checkout"); err != nil || v.Version != 1 {
		t.Fatalf("payments/checkout: %+v, %v; want version 1 kept", v, err)
	}
	code, out, errOut := run(ctx, "tailer", "status", "--nats", p.ClientURL())
	if code != 0 || !strings.Contains(out.String(), cuecast.ShortCommit(both)) ||
		!strings.Contains(out.String(), "rejected in payments; its changes elsewhere were published") {
		t.Errorf("tailer status: exit %d, stdout %q, stderr %q; want the commit rejected in payments only", code, out, errOut)
	}
}

func TestLogAndForcePush(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := exampleRepo(t)
	first := repo.Head()
	p := startPipeline(t, repo)
	edit := func(from, to string) { repo.Edit("payments/checkout/checkout.cue", from, to) }
	latest := func() cuecast.Version {
		v, err := p.Distributor.Latest(ctx, "payments/checkout")
		if err != nil {
			return cuecast.Version{}
		}
		return v
	}
	edit(`"EUR"`, `"USD"`)
	second := repo.Commit("checkout: bill in dollars\n\nFinance asked for it.")
	p.Tailer.Wake()
	await(t, "v2", func() bool { return latest().Commit == second })

	code, out, errOut := run(ctx, "log", "payments/checkout", "--nats", p.ClientURL())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if code != 0 || len(lines) != 2 || !strings.HasPrefix(lines[0], "v2 ") || !strings.Contains(lines[0], cuecast.ShortCommit(second)) ||
		!strings.Contains(lines[0], "checkout: bill in dollars") || strings.Contains(lines[0], "Finance") || !strings.HasPrefix(lines[1], "v1 ") {
		t.Fatalf("log: exit %d, stdout %q, stderr %q; want v2 (subject only) then v1", code, out, errOut)
	}
	code, out, _ = run(ctx, "log", "payments/checkout", "--nats", p.ClientURL(), "--limit", "1", "--output", "json")
	var vs []cuecast.Version
	if err := json.Unmarshal([]byte(out.String()), &vs); code != 0 || err != nil || len(vs) != 1 || vs[0].Version != 2 || vs[0].Author != "Ada Lovelace <ada@example.com>" {
		t.Fatalf("log --output json: exit %d, %v, %+v", code, err, vs)
	}
	if code, _, errOut := run(ctx, "log", "payments/nope", "--nats", p.ClientURL()); code != cli.ExitUsage || !strings.Contains(errOut.String(), "no versions") {
		t.Errorf("log of an unknown config: exit %d, stderr %q; want 2 saying it has no versions", code, errOut)
	}
	// status answers an unknown config as log does (issue 17: it exited 1).
	if code, _, errOut := run(ctx, "status", "payments/nope", "--nats", p.ClientURL()); code != cli.ExitUsage || !strings.Contains(errOut.String(), "not found") {
		t.Errorf("status of an unknown config: exit %d, stderr %q; want 2 saying it is not found", code, errOut)
	}

	// Force push: main now starts again from the first commit.
	wt, err := repo.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.Reset(&git.ResetOptions{Commit: plumbing.NewHash(first), Mode: git.HardReset}); err != nil {
		t.Fatal(err)
	}
	edit(`"EUR"`, `"GBP"`)
	rewritten := repo.Commit("checkout: bill in pounds")
	p.Tailer.Wake()
	await(t, "the halt", func() bool {
		_, out, _ := run(ctx, "status", "--nats", p.ClientURL())
		return strings.Contains(out.String(), "PUBLISHING HALTED")
	})
	code, out, _ = run(ctx, "tailer", "status", "--nats", p.ClientURL())
	// The halt names the cursor and the tip seen when it was detected (the
	// reset to the first commit, or the commit on top of it).
	if code != cli.ExitHalted || !strings.Contains(out.String(), "does not descend from "+cuecast.ShortCommit(second)) {
		t.Fatalf("tailer status: exit %d, stdout %q; want %d naming the cursor %s", code, out, cli.ExitHalted, second)
	}
	// JSON says it too, in the exit status: scripts read that, not text.
	if code, out, _ := run(ctx, "tailer", "status", "--nats", p.ClientURL(), "--output", "json"); code != cli.ExitHalted || !strings.Contains(out.String(), `"rewrite"`) {
		t.Errorf("tailer status --output json while halted: exit %d, stdout %q; want %d", code, out, cli.ExitHalted)
	}
	// A tailer ID that never ran is a wrong name, not an empty state.
	if code, _, errOut := run(ctx, "tailer", "status", "--nats", p.ClientURL(), "--id", "nope"); code != cli.ExitUsage || !strings.Contains(errOut.String(), `no tailer "nope"`) {
		t.Errorf("tailer status --id nope: exit %d, stderr %q; want %d", code, errOut, cli.ExitUsage)
	}
	if latest().Version != 2 {
		t.Fatalf("a rewritten branch was published: latest v%d", latest().Version)
	}
	if code, _, errOut := run(ctx, "tailer", "accept-rewrite", "--nats", p.ClientURL(), "--repo", repo.Dir); code != cli.ExitUsage {
		t.Errorf("accept-rewrite without --to: exit %d, stderr %q", code, errOut)
	}
	// --output json says what the text says (README: commands that report
	// take it).
	var accepted struct {
		Tailer    string `json:"tailer"`
		Repo      string `json:"repo"`
		Branch    string `json:"branch"`
		ResumesAt string `json:"resumes_at"`
	}
	runJSON(t, nil, &accepted, "tailer", "accept-rewrite", "--to", rewritten, "--nats", p.ClientURL(), "--repo", repo.Dir, "--data", t.TempDir())
	if accepted.Tailer != "default" || accepted.Repo != repo.Dir || accepted.Branch != "main" || accepted.ResumesAt != rewritten {
		t.Errorf("accept-rewrite --output json: %+v; want tailer default on %s main resuming at %s", accepted, repo.Dir, rewritten)
	}
	p.Tailer.Wake()
	await(t, "v3 from the rewritten branch", func() bool { v := latest(); return v.Version == 3 && v.Commit == rewritten })
	if code, _, _ := run(ctx, "tailer", "status", "--nats", p.ClientURL()); code != 0 {
		t.Errorf("tailer status after accepting: exit %d, want 0", code)
	}

	// A change made by cuecast set: log says so, and names who asked.
	code, out, errOut = run(ctx, "set", "payments/checkout", "currency=JPY", "--repo", repo.Dir, "--reason", "Japan launch", "--as", "Ann <ann@example.com>", "--commit")
	if code != 0 {
		t.Fatalf("set: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	p.Tailer.Wake()
	await(t, "v4 from cuecast set", func() bool { return latest().Version == 4 })
	_, out, _ = run(ctx, "log", "payments/checkout", "--nats", p.ClientURL(), "--limit", "1")
	if !strings.Contains(out.String(), "Ann <ann@example.com>") || !strings.Contains(out.String(), `payments/checkout: set currency to "JPY" (by cuecast set)`) {
		t.Errorf("log of a change made by cuecast set: %q; want Ann as the author and the tool named", out)
	}
}
