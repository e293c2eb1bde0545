package ci_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gittest"
)

// example returns the path of configs-example at the module root. go test
// runs a package's tests in its directory; the source file's own path would
// not do, as make test builds with -trimpath.
func example(t *testing.T) string {
	t.Helper()
	dir, err := filepath.Abs(filepath.Join("..", "configs-example"))
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// exampleRepo is a Git repo whose first commit is configs-example.
func exampleRepo(t *testing.T) (*gittest.Repo, string) {
	t.Helper()
	r := gittest.New(t)
	r.CopyDir(example(t))
	return r, r.Commit("base: configs-example")
}

func check(t *testing.T, r *gittest.Repo, base, head string) *ci.Report {
	t.Helper()
	rep, err := ci.Check(context.Background(), r.Dir, ci.Options{Base: base, Head: head, FanOut: 3, Workers: 2})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	return rep
}

// statuses is the report's configs as "path status" lines.
func statuses(rep *ci.Report) []string {
	var out []string
	for _, cc := range rep.Configs {
		s := string(cc.Config) + " " + string(cc.Status)
		if cc.From != "" {
			s += " from " + string(cc.From)
		}
		out = append(out, s)
	}
	return out
}

func diffPaths(cc ci.ConfigChange) []string {
	var out []string
	for _, d := range cc.Diff {
		out = append(out, string(d.Op)+" "+d.Path+" "+string(d.Old)+" "+string(d.New))
	}
	return out
}

func TestCheckScenarios(t *testing.T) {
	tests := []struct {
		name   string
		change func(t *testing.T, r *gittest.Repo)
		// base: break the base commit before the change, for pre-existing errors.
		base       func(t *testing.T, r *gittest.Repo)
		want       []string
		failed     bool
		namespaces []string
		level      string
		verify     func(t *testing.T, rep *ci.Report)
	}{
		{
			name: "one config changes",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `currency:         "EUR"`, `currency:         "USD"`)
				r.Edit("payments/checkout/checkout.cue", `three_ds: required_above_minor: 3_000`, `three_ds: required_above_minor: 5_000`)
			},
			want:       []string{"payments/checkout changed"},
			namespaces: []string{"payments"},
			level:      "high", // payments is strict
			verify: func(t *testing.T, rep *ci.Report) {
				got := diffPaths(rep.Configs[0])
				want := []string{`changed currency "EUR" "USD"`, `changed three_ds.required_above_minor 3000 5000`}
				if !slices.Equal(got, want) {
					t.Errorf("diff: got %q, want %q", got, want)
				}
				if !slices.Equal(rep.Risk.Strict, []cuecast.ConfigPath{"payments/checkout"}) {
					t.Errorf("strict: got %v, want [payments/checkout]", rep.Risk.Strict)
				}
				if len(rep.Risk.Breaking) != 0 {
					t.Errorf("breaking: got %v, want none", rep.Risk.Breaking)
				}
				if o := rep.Namespaces[0].Owners; !slices.Equal(o, []string{"team-payments", "alice@example.com"}) {
					t.Errorf("owners: got %v", o)
				}
			},
		},
		{
			name: "library change fans out",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("lib/service/service.cue", `read:  *"2s"`, `read:  *"3s"`)
			},
			want:       []string{"payments/checkout changed", "payments/refunds changed", "search/indexer changed"},
			namespaces: []string{"payments", "search"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				want := []ci.Library{{Dir: "lib/service", Configs: []cuecast.ConfigPath{"payments/checkout", "payments/refunds", "search/indexer"}, Wide: true}}
				if len(rep.Risk.Libraries) != 1 || rep.Risk.Libraries[0].Dir != want[0].Dir ||
					!slices.Equal(rep.Risk.Libraries[0].Configs, want[0].Configs) || !rep.Risk.Libraries[0].Wide {
					t.Errorf("libraries: got %+v, want %+v", rep.Risk.Libraries, want)
				}
				for _, cc := range rep.Configs {
					if got := diffPaths(cc); !slices.Equal(got, []string{`changed service.timeouts.read "2s" "3s"`}) {
						t.Errorf("%s diff: got %q", cc.Config, got)
					}
				}
			},
		},
		{
			// A library every config imports, changed so that no output
			// changes (a type widened): reached by 3, wide by reach, but
			// not a wide change.
			name: "library change without output change is low",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("lib/service/service.cue", `replicas: *3 | int`, `replicas: *3 | int | float`)
			},
			want:       []string{"payments/checkout unchanged", "payments/refunds unchanged", "search/indexer unchanged"},
			namespaces: []string{"payments", "search"},
			level:      "low",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Risk.Libraries) != 1 || rep.Risk.Libraries[0].Changes != 0 || rep.Risk.Libraries[0].Wide {
					t.Errorf("libraries: got %+v, want lib/service with no output change, not wide", rep.Risk.Libraries)
				}
			},
		},
		{
			// One region prepended: one insertion per config, not every
			// index shifting.
			name: "list prepend",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("lib/net/net.cue", `Regions: ["eu-west-1"`, `Regions: ["af-south-1", "eu-west-1"`)
			},
			want:       []string{"payments/checkout changed", "payments/refunds unchanged", "search/indexer changed"},
			namespaces: []string{"payments", "search"},
			level:      "high", // payments is strict
			verify: func(t *testing.T, rep *ci.Report) {
				want := map[cuecast.ConfigPath][]string{
					"payments/checkout": {`added regions[0]  "af-south-1"`},
					"payments/refunds":  nil,
					"search/indexer":    {`added shards[0]  {"count":12,"region":"af-south-1"}`},
				}
				for _, cc := range rep.Configs {
					if got := diffPaths(cc); !slices.Equal(got, want[cc.Config]) {
						t.Errorf("%s diff: got %q, want %q", cc.Config, got, want[cc.Config])
					}
				}
			},
		},
		{
			name: "new field marked for strict decoders",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("search/indexer/indexer.cue", `env:   "prod"`, "env:   \"prod\"\ntier: \"gold\"")
			},
			want:       []string{"search/indexer changed"},
			namespaces: []string{"search"},
			level:      "medium",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Risk.NewFields) != 1 || rep.Risk.NewFields[0].Path != "tier" {
					t.Errorf("new fields: got %+v, want search/indexer tier", rep.Risk.NewFields)
				}
				text := textReport(t, rep)
				if !strings.Contains(text, "+ tier: \"gold\"  # new field") || !strings.Contains(text, "decoding strictly") {
					t.Errorf("text report does not mark the new field:\n%s", text)
				}
			},
		},
		{
			name: "config added, removed and renamed",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Write(map[string]string{"search/autocomplete/autocomplete.cue": "package autocomplete\n\nowner: \"team-search\"\nenv: \"prod\"\nmodel: \"prefix@v1\"\n"})
				r.Remove("payments/fraud-rules")
				b, err := os.ReadFile(filepath.Join(r.Dir, "search/new-ui-flag/flag.cue"))
				if err != nil {
					t.Fatal(err)
				}
				r.Remove("search/new-ui-flag")
				r.Write(map[string]string{"search/facets-flag/flag.cue": string(b)})
			},
			want:       []string{"payments/fraud-rules removed", "search/autocomplete added", "search/facets-flag renamed from search/new-ui-flag"},
			namespaces: []string{"payments", "search"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				var reasons []string
				for _, b := range rep.Risk.Breaking {
					reasons = append(reasons, string(b.Config)+": "+b.Reason)
				}
				want := []string{"payments/fraud-rules: config removed", "search/new-ui-flag: config moved to search/facets-flag"}
				if !slices.Equal(reasons, want) {
					t.Errorf("breaking: got %q, want %q", reasons, want)
				}
				added := rep.Configs[1]
				if got := diffPaths(added); !slices.Contains(got, `added model  "prefix@v1"`) {
					t.Errorf("added diff: got %q", got)
				}
			},
		},
		{
			name: "invalid head",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"DOGECOIN"`)
			},
			want:       []string{"payments/checkout invalid"},
			failed:     true,
			namespaces: []string{"payments"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Errors) == 0 {
					t.Fatal("no errors at head")
				}
				e := rep.Errors[0]
				if e.File != "payments/checkout/checkout.cue" || e.Line < 1 || e.Column < 1 || e.PreExisting {
					t.Errorf("error: got %+v, want a new one in payments/checkout/checkout.cue with a position", e)
				}
			},
		},
		{
			name: "invalid base stays invalid",
			base: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"DOGECOIN"`)
			},
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `max_amount_minor: 5_000_000`, `max_amount_minor: 6_000_000`)
			},
			want:       []string{"payments/checkout still-invalid"},
			namespaces: []string{"payments"},
			level:      "low",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Errors) == 0 {
					t.Fatal("no errors at head")
				}
				for _, e := range rep.Errors {
					if !e.PreExisting {
						t.Errorf("error %v: got new, want pre-existing", e.Error)
					}
				}
			},
		},
		{
			// The error message changes, the config stays broken: still
			// not the change's fault.
			name: "invalid base broken differently",
			base: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"DOGECOIN"`)
			},
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `"DOGECOIN"`, `"BITCOIN"`)
			},
			want:       []string{"payments/checkout still-invalid"},
			namespaces: []string{"payments"},
			level:      "low",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Errors) != 1 || !rep.Errors[0].PreExisting || !strings.Contains(rep.Errors[0].Message, "BITCOIN") {
					t.Errorf("errors: got %+v, want the head's BITCOIN error, pre-existing", rep.Errors)
				}
			},
		},
		{
			name: "manifest breaks",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("cuecast.cue", `consistency: "relaxed"`, `consistency: "sometimes"`)
			},
			want: []string{"growth/flags invalid", "payments/checkout invalid", "payments/fraud-rules invalid", "payments/refunds invalid",
				"search/indexer invalid", "search/new-ui-flag invalid", "search/ranking invalid",
				"search/suggest/env=prod/region=eu invalid", "search/suggest/env=prod/region=us invalid", "search/suggest/env=staging/region=eu invalid", "search/suggest/env=staging/region=us invalid"},
			failed:     true,
			namespaces: []string{"growth", "payments", "search"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Errors) == 0 || rep.Errors[0].File != "cuecast.cue" || rep.Errors[0].PreExisting {
					t.Errorf("errors: got %+v, want a new one in cuecast.cue", rep.Errors)
				}
				if len(rep.Risk.Breaking) != 0 {
					t.Errorf("breaking: got %v, want none (nothing was removed)", rep.Risk.Breaking)
				}
			},
		},
		{
			name: "invalid base fixed",
			base: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `"EUR"`, `"DOGECOIN"`)
			},
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/checkout/checkout.cue", `"DOGECOIN"`, `"GBP"`)
			},
			want:       []string{"payments/checkout fixed"},
			namespaces: []string{"payments"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				if len(rep.Errors) != 0 || !slices.Contains(diffPaths(rep.Configs[0]), `added currency  "GBP"`) {
					t.Errorf("got errors %v, diff %q; want none and the whole output added", rep.Errors, diffPaths(rep.Configs[0]))
				}
			},
		},
		{
			name: "no-op refactor",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("search/ranking/ranking.cue", `boost_recent_days: 14`, "let days = 7\nboost_recent_days: days * 2")
			},
			want:       []string{"search/ranking unchanged"},
			namespaces: []string{"search"},
			level:      "low",
		},
		{
			name: "manifest change compiles everything",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("cuecast.cue", `owners: ["team-search"]`, `owners: ["team-search", "bob@example.com"]`)
			},
			want: []string{"growth/flags unchanged", "payments/checkout unchanged", "payments/fraud-rules unchanged", "payments/refunds unchanged",
				"search/indexer unchanged", "search/new-ui-flag unchanged", "search/ranking unchanged",
				"search/suggest/env=prod/region=eu unchanged", "search/suggest/env=prod/region=us unchanged", "search/suggest/env=staging/region=eu unchanged", "search/suggest/env=staging/region=us unchanged"},
			namespaces: []string{"growth", "payments", "search"},
			level:      "low",
			verify: func(t *testing.T, rep *ci.Report) {
				if !rep.Everything {
					t.Error("Everything: got false, want true")
				}
				if o := rep.Namespaces[2].Owners; !slices.Equal(o, []string{"team-search", "bob@example.com"}) {
					t.Errorf("owners: got %v, want the head's", o)
				}
			},
		},
		{
			// Every config is compiled and reported, but only search's
			// outputs change: the risk counts one namespace, not three.
			name: "manifest change alters one namespace",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("cuecast.cue", `region: ["eu", "us"]`, `region: ["eu"]`)
			},
			want: []string{"growth/flags unchanged", "payments/checkout unchanged", "payments/fraud-rules unchanged", "payments/refunds unchanged",
				"search/indexer unchanged", "search/new-ui-flag unchanged", "search/ranking unchanged",
				"search/suggest/env=prod/region=eu unchanged", "search/suggest/env=prod/region=us removed",
				"search/suggest/env=staging/region=eu unchanged", "search/suggest/env=staging/region=us removed"},
			namespaces: []string{"growth", "payments", "search"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				if rep.Risk.Configs != 1 || rep.Risk.Namespaces != 1 {
					t.Errorf("risk: got %d config(s) in %d namespace(s), want 1 in 1", rep.Risk.Configs, rep.Risk.Namespaces)
				}
			},
		},
		{
			name: "a breaking change",
			change: func(t *testing.T, r *gittest.Repo) {
				r.Edit("payments/refunds/refunds.cue", `on_error: true`, `on_error: "page"`)
				r.Edit("payments/refunds/refunds.cue", "\tchannel:  \"#payments-refunds\"\n", "")
			},
			want:       []string{"payments/refunds changed"},
			namespaces: []string{"payments"},
			level:      "high",
			verify: func(t *testing.T, rep *ci.Report) {
				var got []string
				for _, b := range rep.Risk.Breaking {
					got = append(got, b.Path+": "+b.Reason)
				}
				want := []string{"notify.channel: field removed", "notify.on_error: type changed: boolean → string"}
				if !slices.Equal(got, want) {
					t.Errorf("breaking: got %q, want %q", got, want)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, base := exampleRepo(t)
			if tt.base != nil {
				tt.base(t, r)
				base = r.Commit("break the base")
			}
			tt.change(t, r)
			head := r.Commit(tt.name)
			// The work tree is not what is checked: spoil it.
			r.Write(map[string]string{"payments/checkout/checkout.cue": "this is not CUE"})

			rep := check(t, r, base, head)
			if got := statuses(rep); !slices.Equal(got, tt.want) {
				t.Errorf("configs: got %q, want %q", got, tt.want)
			}
			if rep.Failed() != tt.failed {
				t.Errorf("Failed: got %v, want %v (errors %+v)", rep.Failed(), tt.failed, rep.Errors)
			}
			var ns []string
			for _, n := range rep.Namespaces {
				ns = append(ns, n.Name)
			}
			if !slices.Equal(ns, tt.namespaces) {
				t.Errorf("namespaces: got %q, want %q", ns, tt.namespaces)
			}
			if rep.Risk.Level != tt.level {
				t.Errorf("risk level: got %q, want %q", rep.Risk.Level, tt.level)
			}
			if tt.verify != nil {
				tt.verify(t, rep)
			}
		})
	}
}

func TestCheckMergeBase(t *testing.T) {
	r, _ := exampleRepo(t)
	// main moves on after the branch point; the branch must not be blamed
	// for undoing it.
	fork := r.Head()
	r.Edit("search/ranking/ranking.cue", `boost_recent_days: 14`, `boost_recent_days: 21`)
	mainTip := r.Commit("main: ranking change")
	// The branch: from fork, change refunds.
	wt, err := r.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := checkoutNewBranch(wt, "topic", fork); err != nil {
		t.Fatal(err)
	}
	r.Edit("payments/refunds/refunds.cue", `window_days:            180`, `window_days:            90`)
	head := r.Commit("topic: refunds window")

	rep := check(t, r, mainTip, head)
	if rep.MergeBase != fork {
		t.Errorf("merge base: got %q, want %q", rep.MergeBase, fork)
	}
	if got := statuses(rep); !slices.Equal(got, []string{"payments/refunds changed"}) {
		t.Errorf("configs: got %q, want only payments/refunds", got)
	}
}

// TestCheckPartialHistory: a clone holds both tips but not their merge
// base (actions/checkout with fetch-depth: 1 and the base branch fetched
// the same way). The check cannot run, and says it is the history that is
// missing, as a RevisionError naming the base, not an I/O failure.
func TestCheckPartialHistory(t *testing.T) {
	r, fork := exampleRepo(t)
	wt, err := r.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range []struct{ branch, from, to string }{
		{"d1", `boost_recent_days: 14`, `boost_recent_days: 21`},
		{"d2", `window_days:            180`, `window_days:            90`},
	} {
		if err := checkoutNewBranch(wt, b.branch, fork); err != nil {
			t.Fatal(err)
		}
		file := "search/ranking/ranking.cue"
		if b.branch == "d2" {
			file = "payments/refunds/refunds.cue"
		}
		r.Edit(file, b.from, b.to)
		r.Commit(b.branch + ": one")
		r.CommitFiles(b.branch+": two", map[string]string{b.branch + ".txt": "two\n"})
	}
	dir := r.ShallowClone("d1", "d2")
	_, err = ci.Check(t.Context(), dir, ci.Options{Base: "origin/d2", Head: "HEAD"})
	var re *ci.RevisionError
	if !errors.As(err, &re) || re.Which != "base" || re.Rev != "origin/d2" || !errors.Is(err, ci.ErrShallow) {
		t.Errorf("got %v, want a RevisionError naming base origin/d2 that wraps ErrShallow", err)
	}
}

func TestCheckNothingChanged(t *testing.T) {
	r, base := exampleRepo(t)
	head := r.Commit("empty")
	rep := check(t, r, base, head)
	if len(rep.Configs) != 0 || len(rep.Errors) != 0 || rep.Failed() || rep.Risk.Level != "low" {
		t.Errorf("got %+v, want an empty report", rep)
	}
}

func TestCheckErrors(t *testing.T) {
	r, base := exampleRepo(t)
	ctx := context.Background()
	var re *ci.RevisionError
	_, err := ci.Check(ctx, r.Dir, ci.Options{Base: "no-such-branch", Head: base})
	if !errors.As(err, &re) || re.Which != "base" || re.Rev != "no-such-branch" {
		t.Errorf("bad base: got %v, want a RevisionError naming the base", err)
	}
	_, err = ci.Check(ctx, r.Dir, ci.Options{Base: base, Head: "deadbeef"})
	if !errors.As(err, &re) || re.Which != "head" {
		t.Errorf("bad head: got %v, want a RevisionError naming the head", err)
	}
	_, err = ci.Check(ctx, t.TempDir(), ci.Options{Base: "a", Head: "b"})
	if !errors.Is(err, ci.ErrNotRepo) || !errors.Is(err, cuecast.ErrNotRepo) {
		t.Errorf("not a repo: got %v, want ErrNotRepo", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	r.Edit("search/ranking/ranking.cue", `boost_recent_days: 14`, `boost_recent_days: 21`)
	head := r.Commit("change")
	if _, err := ci.Check(cctx, r.Dir, ci.Options{Base: base, Head: head}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: got %v, want context.Canceled", err)
	}
}

func checkoutNewBranch(wt *git.Worktree, name, from string) error {
	return wt.Checkout(&git.CheckoutOptions{
		Hash:   plumbing.NewHash(from),
		Branch: plumbing.NewBranchReferenceName(name),
		Create: true,
	})
}

// TestCheckAdoption: the pull request that turns a repo into a config repo.
// The base has no cue.mod, so every config is new.
func TestCheckAdoption(t *testing.T) {
	r := gittest.New(t)
	base := r.CommitFiles("readme", map[string]string{"README.md": "configs\n"})
	r.CopyDir(example(t))
	head := r.Commit("adopt cuecast")
	rep := check(t, r, base, head)
	want := []string{"growth/flags added", "payments/checkout added", "payments/fraud-rules added", "payments/refunds added",
		"search/indexer added", "search/new-ui-flag added", "search/ranking added",
		"search/suggest/env=prod/region=eu added", "search/suggest/env=prod/region=us added", "search/suggest/env=staging/region=eu added", "search/suggest/env=staging/region=us added"}
	if got := statuses(rep); !slices.Equal(got, want) {
		t.Errorf("configs: got %q, want %q", got, want)
	}
	if !rep.Everything || rep.Failed() || len(rep.Risk.Breaking) != 0 {
		t.Errorf("got everything=%v failed=%v breaking=%v; want true, false, none", rep.Everything, rep.Failed(), rep.Risk.Breaking)
	}
}

// TestSymlinkRuleAgrees: compile (the work tree on disk) and check (the
// commits) judge symlinks by the one rule configs-example/README.md states,
// so a change check calls valid compiles, and one it fails does not.
func TestSymlinkRuleAgrees(t *testing.T) {
	cases := []struct {
		name  string
		links map[string]string // link -> target
		want  string            // lint ID expected from both; "" for valid
	}{
		{"dir in namespace", map[string]string{"payments/refunds2": "refunds"}, "file/symlink-dir"},
		{"dangling non-CUE", map[string]string{"docs/latest.md": "missing.md"}, ""},
		{"CUE file in repo", map[string]string{"payments/refunds/shared.cue": "../../lib/shared/extra.cue"}, ""},
		{"CUE loop", map[string]string{"payments/refunds/a.cue": "b.cue", "payments/refunds/b.cue": "a.cue"}, "file/symlink-broken"},
		{"CUE dangling", map[string]string{"payments/refunds/c.cue": "missing.cue"}, "file/symlink-broken"},
		{"CUE outside", map[string]string{"payments/refunds/d.cue": "../../../outside.cue"}, "file/symlink-escape"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r, base := exampleRepo(t)
			if tc.name == "CUE file in repo" {
				// The linked file must be of the config's package.
				r.Write(map[string]string{"lib/shared/extra.cue": "package refunds\n\nlinked: true\n"})
				r.Commit("lib/shared: a file the refunds config links to")
				base = r.Head()
			}
			r.Write(map[string]string{"docs/README.md": "docs\n"})
			for link, target := range tc.links {
				p := filepath.Join(r.Dir, filepath.FromSlash(link))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, p); err != nil {
					t.Fatal(err)
				}
			}
			head := r.Commit("add symlinks")

			res, err := compiler.Compile(context.Background(), r.Dir, compiler.Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			rep := check(t, r, base, head)
			var compileIDs, checkIDs []string
			for _, e := range res.Errors {
				compileIDs = append(compileIDs, e.ID)
			}
			for _, f := range rep.Errors {
				checkIDs = append(checkIDs, f.ID)
			}
			if tc.want == "" {
				if !res.OK() || rep.Failed() {
					t.Fatalf("want valid; compile errors %v, check errors %v", res.Errors, rep.Errors)
				}
				return
			}
			if !slices.Contains(compileIDs, tc.want) || !rep.Failed() || !slices.Contains(checkIDs, tc.want) {
				t.Fatalf("want %s from both; compile %v, check failed=%v %v", tc.want, res.Errors, rep.Failed(), rep.Errors)
			}
		})
	}
}

// TestCheckUndeclaredDirectory: CUE added under a directory the manifest
// does not declare and no config imports is named in the report.
func TestCheckUndeclaredDirectory(t *testing.T) {
	r, base := exampleRepo(t)
	head := r.CommitFiles("billing: a config in an undeclared namespace", map[string]string{
		"billing/invoices/invoices.cue": "package invoices\n\ncurrency: \"EUR\"\n",
	})
	rep := check(t, r, base, head)
	if !slices.Equal(rep.Undeclared, []string{"billing"}) {
		t.Errorf("Undeclared = %v, want [billing]", rep.Undeclared)
	}
	if rep.Failed() {
		t.Errorf("check failed: %v", rep.Errors)
	}
	text := textReport(t, rep)
	if !strings.Contains(text, "billing/  declare it in cuecast.cue") {
		t.Errorf("text report does not name billing/:\n%s", text)
	}
}

// TestCheckCrossNamespaceImport: a config importing another namespace's
// config fails the check unless the manifest allows it, and the report
// shows what the manifest allows.
func TestCheckCrossNamespaceImport(t *testing.T) {
	r, base := exampleRepo(t)
	r.Edit("search/indexer/indexer.cue", "svc \"example.com/configs/lib/service\"\n)\n",
		"svc \"example.com/configs/lib/service\"\n\t\"example.com/configs/payments/checkout\"\n)\n\n_checkout: checkout\n")
	head := r.Commit("search: import a payments config")
	rep := check(t, r, base, head)
	if !rep.Failed() || !slices.ContainsFunc(rep.Errors, func(f ci.Finding) bool { return f.ID == "config/cross-namespace-import" }) {
		t.Fatalf("want config/cross-namespace-import, got failed=%v %v", rep.Failed(), rep.Errors)
	}

	r.Edit("cuecast.cue", `consistency: "relaxed"`, "consistency: \"relaxed\"\n\timport_configs_from: [\"payments\"]")
	head = r.Commit("manifest: search may import payments configs")
	rep = check(t, r, base, head)
	if rep.Failed() {
		t.Fatalf("allowed import still fails: %v", rep.Errors)
	}
	i := slices.IndexFunc(rep.Namespaces, func(n ci.Namespace) bool { return n.Name == "search" })
	if i < 0 || !slices.Equal(rep.Namespaces[i].ImportConfigsFrom, []string{"payments"}) {
		t.Errorf("namespaces %+v, want search importing configs from payments", rep.Namespaces)
	}
}

// TestCheckEmbeddedFile: a file matched by an @embed glob below a config's
// directory is part of that config, so changing it makes the config
// affected (issue 16).
func TestCheckEmbeddedFile(t *testing.T) {
	r, _ := exampleRepo(t)
	base := r.CommitFiles("search: embed a stop-word list", map[string]string{
		"search/indexer/stopwords.cue": "@extern(embed)\n\npackage indexer\n\nstop_words: _ @embed(glob=\"lists/*.json\")\n",
		"search/indexer/lists/en.json": `["a", "the"]`,
	})
	head := r.CommitFiles("search: one more stop word", map[string]string{
		"search/indexer/lists/en.json": `["a", "an", "the"]`,
	})
	rep := check(t, r, base, head)
	if got, want := statuses(rep), []string{"search/indexer changed"}; !slices.Equal(got, want) {
		t.Errorf("configs: got %q, want %q (failed %v, errors %v)", got, want, rep.Failed(), rep.Errors)
	}
}

// TestCheckConfigImportedByAnother: a change to a config that another
// config imports affects both. The check compiles the changed config at
// both revisions before its plan is done (a guess, right for most edits of
// a config); here the plan names one more config, so the guess must not be
// used (issue 16).
func TestCheckConfigImportedByAnother(t *testing.T) {
	r, _ := exampleRepo(t)
	r.Edit("payments/refunds/refunds.cue", "import (\n", "import (\n\t\"example.com/configs/payments/checkout\"\n")
	r.Edit("payments/refunds/refunds.cue", "window_days:", "currency: checkout.currency\nwindow_days:")
	base := r.Commit("refunds: the currency of checkout")
	r.Edit("payments/checkout/checkout.cue", `currency:         "EUR"`, `currency:         "USD"`)
	head := r.Commit("checkout: USD")
	rep := check(t, r, base, head)
	want := []string{"payments/checkout changed", "payments/refunds changed"}
	if got := statuses(rep); !slices.Equal(got, want) {
		t.Errorf("configs: got %q, want %q (failed %v, errors %v)", got, want, rep.Failed(), rep.Errors)
	}
}
