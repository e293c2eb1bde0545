package mutator_test

import (
	"context"
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/githubtest"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/publish"
	"github.com/cuecast/cuecast/mutator"
)

func set(cfg cuecast.ConfigPath, path, value string) mutator.Request {
	return mutator.Request{
		Configs: []cuecast.ConfigPath{cfg}, Set: []mutator.Assignment{{Path: path, Value: value}},
		Reason: "test", Identity: alice, Mode: mutator.ModeCommit,
	}
}

// TestRefusals: every origin that is not a literal the mutator may edit is
// refused with its kind, its position and what to change instead, and
// nothing is committed.
func TestRefusals(t *testing.T) {
	t.Parallel()
	r := shapesRepo(t)
	head := r.Head()
	m := mutator.New(r.Dir, mutator.Options{})
	for _, c := range []struct {
		cfg        cuecast.ConfigPath
		path, kind string
		at, hint   string
	}{
		{"shapes/refuse-tag/env=prod", "env", "tag", "shapes/refuse-tag/refuse-tag.cue:3:6", "the variant's own dimension value (env=prod)"},
		{"shapes/refuse-reference", "port", "reference", "shapes/refuse-reference/refuse-reference.cue:3:17", "read through _common.port"},
		{"shapes/refuse-computed", "port", "computed", "shapes/refuse-computed/refuse-computed.cue:4:7", "an expression computes it: change one of its operands"},
		{"shapes/refuse-default", "s.retries", "schema", "lib/defaults/defaults.cue:4:16", "--at FILE"},
		{"shapes/refuse-vendored", "kind", "schema", "cue.mod/pkg/example.com/vendored/vendored.cue:3:15", "vendored schema"},
	} {
		t.Run(c.kind+"/"+string(c.cfg), func(t *testing.T) {
			_, err := m.Set(context.Background(), set(c.cfg, c.path, "1"))
			var re *mutator.RefusedError
			if !errors.As(err, &re) || !errors.Is(err, mutator.ErrRefused) {
				t.Fatalf("got %v, want a refusal", err)
			}
			if re.Kind != c.kind || re.Positions[0].String() != c.at || !strings.Contains(re.Hint, c.hint) {
				t.Errorf("refusal %q: kind %s at %s; want %s at %s with a hint saying %q", err, re.Kind, re.Positions[0], c.kind, c.at, c.hint)
			}
			if !strings.Contains(err.Error(), c.at) {
				t.Errorf("message %q does not name %s", err, c.at)
			}
		})
	}
	if r.Head() != head {
		t.Errorf("a refused set moved main to %s", r.Head())
	}
}

// TestSetAt: a schema default is set for one config by adding a field to a
// new file of its directory, with the package clause of its files.
func TestSetAt(t *testing.T) {
	t.Parallel()
	r := shapesRepo(t)
	req := set("shapes/refuse-default", "s.retries", "5")
	// Outside the config's directory: refused.
	req.At = "lib/defaults/override.cue"
	if _, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req); !errors.Is(err, mutator.ErrBadRequest) {
		t.Errorf("--at outside the config: %v, want a bad request", err)
	}
	req.At = "shapes/refuse-default/override.cue"
	res, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, req.At))
	if err != nil {
		t.Fatal(err)
	}
	if want := "package shape\n\ns: retries: 5\n"; string(b) != want {
		t.Errorf("override file:\n%s\nwant:\n%s", b, want)
	}
	if v := res.Values[0]; v.Edited.File != req.At || v.Edited.Line != 3 || string(v.New) != "5" {
		t.Errorf("value %+v, want 5 at %s:3", v, req.At)
	}
	ex, err := compiler.Explain(context.Background(), r.Dir, "shapes/refuse-default", compiler.ExplainOptions{Path: "s.retries"})
	if err != nil {
		t.Fatal(err)
	}
	if got := ex.Values[0]; string(got.JSON) != "5" || got.Positions[0].File != req.At {
		t.Errorf("explain after --at: %s", got)
	}
}

// TestSetAtLiteral: --at is an override wherever it is given. A literal
// that prod/us shares with prod/eu was edited in place, --at ignored, and
// prod/eu changed too; an override of a concrete value conflicts, and the
// check refuses it with CUE's message (docs/CHANGING.md, step 4).
func TestSetAtLiteral(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	head := r.Head()
	req := set("search/suggest", "settings.replicas", "4")
	req.Variant = map[string]string{"env": "prod", "region": "us"}
	req.At = "search/suggest/prod-us.cue"
	_, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req)
	var ce *mutator.CompileError
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "conflicting values") {
		t.Fatalf("--at over a literal: %v, want the conflict refused", err)
	}
	if r.Head() != head {
		t.Errorf("main moved to %s", r.Head())
	}
	if _, err := os.Stat(filepath.Join(r.Dir, req.At)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want it not written", req.At, err)
	}
}

// TestSetBreaksConfig: a value the schema refuses, and one that breaks
// another config reading the same library literal, are refused with the
// compiler's own errors; main, the work tree and the index stay as they were.
func TestSetBreaksConfig(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	head := r.Head()
	m := mutator.New(r.Dir, mutator.Options{})
	for _, c := range []struct {
		cfg         cuecast.ConfigPath
		path, value string
		configs     []cuecast.ConfigPath
	}{
		{"payments/checkout", "max_amount_minor", `"lots"`, []cuecast.ConfigPath{"payments/checkout"}},
		// ledger.port is a literal of lib/net, which refunds reads too.
		{"payments/checkout", "ledger.port", "70000", []cuecast.ConfigPath{"payments/checkout", "payments/refunds"}},
	} {
		_, err := m.Set(context.Background(), set(c.cfg, c.path, c.value))
		var ce *mutator.CompileError
		if !errors.As(err, &ce) || len(ce.Errors) == 0 {
			t.Fatalf("%s=%s: %v, want a compile error", c.path, c.value, err)
		}
		got := map[cuecast.ConfigPath]bool{}
		for _, e := range ce.Errors {
			if e.File == "" || e.Line == 0 {
				t.Errorf("error without a position: %+v", e)
			}
			got[e.Config] = true
		}
		for _, cfg := range c.configs {
			if !got[cfg] {
				t.Errorf("%s=%s: no error for %s in %v", c.path, c.value, cfg, err)
			}
		}
	}
	if r.Head() != head {
		t.Errorf("a refused change moved main")
	}
	assertClean(t, r, "after a refused set")
}

// TestSetPullRequest: ModePR commits on a new branch, pushes it to the
// remote and opens a pull request whose body is the check's report; the
// branch checked out does not move. ModeBranch and DryRun leave main alone
// too.
func TestSetPullRequest(t *testing.T) {
	t.Parallel()
	r, bare, head, gh, m := prRepo(t)
	ctx := context.Background()

	req := set("ns/counters", "f0", "9000")
	req.DryRun = true
	res, err := m.Set(ctx, req)
	if err != nil || res.Branch != "" || r.Head() != head {
		t.Fatalf("dry run: %+v, %v; main %s, want it at %s", res, err, r.Head(), head)
	}

	req = set("ns/counters", "f0", "9000")
	req.Mode = mutator.ModePR
	res, err = m.Set(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if r.Head() != head {
		t.Error("a pull request moved main")
	}
	if !res.Pushed || res.PullRequest == nil || res.PullRequest.Number != 1 {
		t.Fatalf("result %+v, want a pushed branch and pull request #1", res)
	}
	pr := gh.Pulls()[1]
	if pr.Head != res.Branch || pr.Base != "main" || !strings.Contains(pr.Body, "ns/counters") || !strings.Contains(pr.Title, "f0") {
		t.Errorf("pull request %+v, want %s into main with the report", pr, res.Branch)
	}
	pushed, err := git.PlainOpen(bare)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := pushed.Reference(plumbing.NewBranchReferenceName(res.Branch), true)
	if err != nil || ref.Hash().String() != res.Commit {
		t.Errorf("remote's %s: %v, %v; want %s", res.Branch, ref, err, res.Commit)
	}

	req = set("ns/counters", "f0", "9001")
	req.Mode, req.Branch = mutator.ModeBranch, "tune"
	if res, err = m.Set(ctx, req); err != nil {
		t.Fatal(err)
	}
	if r.Head() != head || res.Branch != "tune" || !res.Pushed {
		t.Errorf("branch mode: %+v; main at %s, want it at %s", res, r.Head(), head)
	}
}

// TestSetPullRequestRefused: when GitHub refuses the pull request after
// the branch was pushed, Set deletes the branch from the remote and here
// again, and says so: nothing is left behind, and the request sent again
// opens it. The branch stayed, on both, and every retry left another.
func TestSetPullRequestRefused(t *testing.T) {
	t.Parallel()
	r, bare, head, gh, m := prRepo(t)
	gh.Fail(githubtest.CreatePull, http.StatusBadGateway, nil, "Server Error")
	req := set("ns/counters", "f0", "9000")
	req.Mode = mutator.ModePR
	res, err := m.Set(context.Background(), req)
	if err == nil || res != nil || !strings.Contains(err.Error(), "deleted from origin again") || !strings.Contains(err.Error(), "nothing changed") {
		t.Fatalf("a refused pull request: %+v, %v; want an error saying the branch is gone and nothing changed", res, err)
	}
	pushed, err := git.PlainOpen(bare)
	if err != nil {
		t.Fatal(err)
	}
	for what, repo := range map[string]*git.Repository{"here": r.Git, "on the remote": pushed} {
		refs, err := repo.Branches()
		if err != nil {
			t.Fatal(err)
		}
		_ = refs.ForEach(func(b *plumbing.Reference) error {
			if b.Name().Short() != "main" {
				t.Errorf("branch %s left %s", b.Name().Short(), what)
			}
			return nil
		})
	}
	if r.Head() != head {
		t.Errorf("main at %s, want %s", r.Head(), head)
	}
	assertClean(t, r, "after a refused pull request")
	if res, err = m.Set(context.Background(), req); err != nil || res.PullRequest == nil {
		t.Fatalf("sent again: %+v, %v; want the pull request opened", res, err)
	}
}

// prRepo is a landing repository with a bare remote (bare), its head, a
// fake GitHub and a Mutator opening pull requests there.
func prRepo(t *testing.T) (r *gittest.Repo, bare, head string, gh *githubtest.Server, m *mutator.Mutator) {
	t.Helper()
	r = landingRepo(t, 1)
	bare, head = r.Bare(), r.Head()
	gh = githubtest.New(t)
	return r, bare, head, gh, mutator.New(r.Dir, mutator.Options{GitHub: publishTarget(gh)})
}

func publishTarget(gh *githubtest.Server) publish.GitHub {
	return publish.GitHub{APIURL: gh.URL, Token: githubtest.Token, Owner: "acme", Name: "configs"}
}

// TestSetPushRejected: when the remote moved on, the push of a commit is
// rejected and Set takes the commit back: main, the work tree and the index
// are as they were, and the error says to pull and retry.
func TestSetPushRejected(t *testing.T) {
	t.Parallel()
	r := landingRepo(t, 1)
	bare := r.Bare()
	head := r.Head()
	// Someone else pushes to the remote first.
	r.PushElsewhere(bare, "elsewhere", map[string]string{"ns/counters/other.cue": "package counters\n\nother: 1\n"})

	before := readFile(t, filepath.Join(r.Dir, landingFile))
	req := set("ns/counters", "f0", "9000")
	_, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req)
	if err == nil || !strings.Contains(err.Error(), "nothing changed: pull") {
		t.Fatalf("push to a remote that moved on: %v, want an error saying to pull", err)
	}
	if r.Head() != head {
		t.Errorf("main at %s after a rejected push, want it back at %s", r.Head(), head)
	}
	if got := readFile(t, filepath.Join(r.Dir, landingFile)); got != before {
		t.Errorf("work tree not restored:\n%s", got)
	}
	assertClean(t, r, "after the undo")
}
