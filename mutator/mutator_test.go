package mutator_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/mutator"
)

var alice = mutator.Identity{Name: "Alice", Email: "alice@example.com"}

const weight = `flags."new-checkout".fallthrough.rollout.weights[0].weight`

// repoFrom is a new repo holding dir's files, committed on main with the
// dir's name as message.
func repoFrom(t *testing.T, dir string) *gittest.Repo {
	t.Helper()
	r := gittest.New(t)
	r.CopyDir(dir)
	r.Commit(filepath.Base(dir))
	return r
}

// exampleRepo is configs-example committed on main.
func exampleRepo(t *testing.T) *gittest.Repo { t.Helper(); return repoFrom(t, "../configs-example") }

// shapesRepo is testdata/shapes, the mutator's golden shapes, committed on
// main.
func shapesRepo(t *testing.T) *gittest.Repo { t.Helper(); return repoFrom(t, "testdata/shapes") }

func TestSetFlagRollout(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	ctx := context.Background()
	res, err := m.Set(ctx, mutator.Request{
		Configs: []cuecast.ConfigPath{"growth/flags"},
		Set: []mutator.Assignment{
			{Path: weight, Value: "50000"},
			{Path: `flags."new-checkout".fallthrough.rollout.weights[1].weight`, Value: "50000"},
		},
		Expect:   []mutator.Assignment{{Path: weight, Value: "20000"}},
		Reason:   "half the users",
		Identity: alice,
		Mode:     mutator.ModeCommit,
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Commit != r.Head() {
		t.Errorf("main is at %s, want the new commit %s", r.Head(), res.Commit)
	}
	b, err := os.ReadFile(filepath.Join(r.Dir, "growth/flags/flags.cue"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `weights: [{variant: "on", weight: 50000}, {variant: "off", weight: 50000}]`) {
		t.Errorf("flags.cue not edited in the work tree:\n%s", b)
	}
	assertClean(t, r, "after set")
	if len(res.Report.Risk.FlagRollouts) != 1 {
		t.Errorf("report's flag rollouts = %+v, want one", res.Report.Risk.FlagRollouts)
	}
	ex, err := compiler.Explain(ctx, r.Dir, "growth/flags", compiler.ExplainOptions{Path: weight})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(ex.Values[0].JSON); got != "50000" {
		t.Errorf("explain after set: %s, want 50000", got)
	}

	// The expectation is stale now.
	_, err = m.Set(ctx, mutator.Request{
		Configs: []cuecast.ConfigPath{"growth/flags"}, Set: []mutator.Assignment{{Path: weight, Value: "30000"}},
		Expect: []mutator.Assignment{{Path: weight, Value: "20000"}}, Reason: "x", Identity: alice, Mode: mutator.ModeCommit,
	})
	var ce *mutator.ConflictError
	if !errors.As(err, &ce) || string(ce.Current) != "50000" {
		t.Fatalf("stale expect: %v, want a conflict naming 50000", err)
	}
	t.Log(err)
}

func plumbingHash(s string) plumbing.Hash { return plumbing.NewHash(s) }

// assertClean checks that r's work tree and index match its HEAD.
func assertClean(t *testing.T, r *gittest.Repo, when string) {
	t.Helper()
	if st := r.Status(); !st.IsClean() {
		t.Errorf("work tree %s:\n%s\nwant it clean", when, st)
	}
}

// TestFlagAssignments: each flag change becomes the value changes it means,
// expecting the values read; changes that do not fit the flag are bad
// requests.
func TestFlagAssignments(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	m := mutator.New(r.Dir, mutator.Options{})
	ctx := context.Background()
	pct := func(f float64) *float64 { return &f }
	const w = `flags."new-checkout".fallthrough.rollout.weights`
	for _, c := range []struct {
		name           string
		change         mutator.FlagChange
		set, expect    []mutator.Assignment
		wantBadRequest bool
	}{
		{name: "rollout", change: mutator.FlagChange{Flag: "new-checkout", Rollout: pct(12.5)},
			set:    []mutator.Assignment{{Path: w + "[0].weight", Value: "12500"}, {Path: w + "[1].weight", Value: "87500"}},
			expect: []mutator.Assignment{{Path: w + "[0].weight", Value: "20000"}, {Path: w + "[1].weight", Value: "80000"}}},
		{name: "shares", change: mutator.FlagChange{Flag: "new-checkout", Shares: map[string]float64{"on": 30, "off": 70}},
			set:    []mutator.Assignment{{Path: w + "[0].weight", Value: "30000"}, {Path: w + "[1].weight", Value: "70000"}},
			expect: []mutator.Assignment{{Path: w + "[0].weight", Value: "20000"}, {Path: w + "[1].weight", Value: "80000"}}},
		{name: "disable", change: mutator.FlagChange{Flag: "new-checkout", Disable: true},
			set:    []mutator.Assignment{{Path: `flags."new-checkout".on`, Value: "false"}},
			expect: []mutator.Assignment{{Path: `flags."new-checkout".on`, Value: "true"}}},
		{name: "shares not summing to 100", change: mutator.FlagChange{Flag: "new-checkout", Shares: map[string]float64{"on": 30, "off": 60}}, wantBadRequest: true},
		{name: "no such flag", change: mutator.FlagChange{Flag: "nope", Enable: true}, wantBadRequest: true},
		{name: "no rollout", change: mutator.FlagChange{Flag: "results-per-page", Rollout: pct(50)}, wantBadRequest: true},
		{name: "no such rule", change: mutator.FlagChange{Flag: "new-checkout", Rule: "vip", Rollout: pct(50)}, wantBadRequest: true},
		{name: "two changes", change: mutator.FlagChange{Flag: "new-checkout", Enable: true, Rollout: pct(50)}, wantBadRequest: true},
	} {
		set, expect, err := m.FlagAssignments(ctx, "growth/flags", nil, c.change)
		switch {
		case c.wantBadRequest:
			if !errors.Is(err, mutator.ErrBadRequest) {
				t.Errorf("%s: %v, want a bad request", c.name, err)
			}
		case err != nil:
			t.Errorf("%s: %v", c.name, err)
		case !reflect.DeepEqual(set, c.set) || !reflect.DeepEqual(expect, c.expect):
			t.Errorf("%s: set %v expect %v; want %v and %v", c.name, set, expect, c.set, c.expect)
		}
	}
}

// TestSetUnchanged: a change that leaves every file as it is (the value is
// already the one asked for) commits nothing, where it made an empty
// commit for the tailer and the audit log to carry; the result says so.
func TestSetUnchanged(t *testing.T) {
	t.Parallel()
	r := exampleRepo(t)
	head := r.Head()
	for _, mode := range []mutator.Mode{mutator.ModeCommit, mutator.ModeBranch} {
		req := set("payments/checkout", "currency", `"EUR"`)
		req.Mode = mode
		if mode == mutator.ModeBranch {
			req.Branch = "same"
		}
		res, err := mutator.New(r.Dir, mutator.Options{}).Set(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		if !res.Unchanged || res.Commit != "" || res.Branch != "" || len(res.Values) != 1 {
			t.Errorf("%s: result %+v, want unchanged with the value and no commit", mode, res)
		}
		if r.Head() != head {
			t.Errorf("%s: main moved to %s", mode, r.Head())
		}
	}
	if _, err := r.Git.Reference(plumbing.NewBranchReferenceName("same"), false); err == nil {
		t.Error("branch same was created for nothing")
	}
}
