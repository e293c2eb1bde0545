package tailer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/tailer"
)

// baseRepo is a small config repo: two namespaces, a library imported by two
// configs, one config that imports nothing, and a file that is not CUE.
func baseRepo() map[string]string {
	return map[string]string{
		"cue.mod/module.cue":    "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":           "package manifest\n\nnamespaces: pay: owners: [\"team-pay\"]\nnamespaces: web: owners: [\"team-web\"]\n",
		"lib/common/common.cue": "package common\n\nRegion: \"eu-west-1\"\n",
		"pay/a/a.cue":           config("a", true, 1),
		"pay/b/b.cue":           config("b", false, 1),
		"web/c/c.cue":           config("c", true, 1),
		"README.md":             "# configs\n",
	}
}

// config is the source of a config package; value makes it differ.
func config(pkg string, importsLib bool, value int) string {
	if !importsLib {
		return fmt.Sprintf("package %s\n\nvalue: %d\n", pkg, value)
	}
	return fmt.Sprintf("package %s\n\nimport \"example.com/t/lib/common\"\n\nregion: common.Region\nvalue:  %d\n", pkg, value)
}

// env is one test's world: a Git repo, an embedded NATS server and the real
// distributor.
type env struct {
	t    testing.TB
	ctx  context.Context
	repo *gittest.Repo
	srv  *natstest.Server
	nc   *nats.Conn
	js   jetstream.JetStream
	dist *distributor.Distributor
	log  *slog.Logger
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{t: t, ctx: t.Context(), repo: gittest.New(t), log: testLogger(t)}
	e.connect(natstest.Start(t))
	return e
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// connect points the env at srv with a fresh connection and distributor.
func (e *env) connect(srv *natstest.Server) {
	e.t.Helper()
	e.srv = srv
	nc := srv.Connect(e.t)
	e.nc = nc
	js, err := jetstream.New(nc)
	if err != nil {
		e.t.Fatal(err)
	}
	e.js = js
	e.dist, err = distributor.New(e.ctx, nc, distributor.Options{Logger: e.log})
	if err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) tailer(cfg tailer.Config) *tailer.Tailer {
	e.t.Helper()
	if cfg.Repo == "" {
		cfg.Repo = e.repo.Dir
	}
	cfg.Logger = e.log
	tl, err := tailer.New(e.ctx, cfg, e.js, e.dist, e.dist)
	if err != nil {
		e.t.Fatalf("tailer.New: %v", err)
	}
	return tl
}

func (e *env) poll(tl *tailer.Tailer) tailer.Summary {
	e.t.Helper()
	sum, err := tl.Poll(e.ctx)
	if err != nil {
		e.t.Fatalf("Poll: %v", err)
	}
	return sum
}

// versions returns every version of cp, oldest first (none: nil).
func (e *env) versions(cp cuecast.ConfigPath) []cuecast.Version {
	e.t.Helper()
	vs, err := e.dist.Versions(e.ctx, cp)
	if errors.Is(err, cuecast.ErrNotFound) {
		return nil
	}
	if err != nil {
		e.t.Fatalf("Versions(%s): %v", cp, err)
	}
	slices.Reverse(vs)
	return vs
}

// history is a compact view of a config's versions: "1@<commit>", "2@<commit>
// deleted".
func (e *env) history(cp cuecast.ConfigPath) []string {
	var out []string
	for _, v := range e.versions(cp) {
		s := fmt.Sprintf("%d@%s", v.Version, v.Commit)
		if v.Deleted {
			s += " deleted"
		}
		out = append(out, s)
	}
	return out
}

// content returns the JSON of a config's latest version.
func (e *env) content(cp cuecast.ConfigPath) map[string]any {
	e.t.Helper()
	latest, err := e.dist.Latest(e.ctx, cp)
	if err != nil {
		e.t.Fatalf("Latest(%s): %v", cp, err)
	}
	_, b, err := e.dist.Version(e.ctx, cp, latest.Version)
	if err != nil {
		e.t.Fatalf("Version(%s, %d): %v", cp, latest.Version, err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		e.t.Fatalf("decode %s: %v", cp, err)
	}
	return m
}

func at(n int, commit string) string { return fmt.Sprintf("%d@%s", n, commit) }

func wantHistory(t *testing.T, e *env, want map[cuecast.ConfigPath][]string) {
	t.Helper()
	for _, cp := range slices.Sorted(maps.Keys(want)) {
		got := e.history(cp)
		if !slices.Equal(got, want[cp]) {
			t.Errorf("versions of %s:\n got %q\nwant %q", cp, got, want[cp])
		}
	}
}

func wantSummary(t *testing.T, got, want tailer.Summary) {
	t.Helper()
	got.Cursor, want.Cursor = "", ""
	if got != want {
		t.Errorf("summary: got %+v, want %+v", got, want)
	}
}

// TestPoll walks one repository through every kind of commit and checks the
// versions each produces.
func TestPoll(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1 := r.CommitFiles("initial configs", baseRepo())
	tl := e.tailer(tailer.Config{})

	// The first commit compiles and publishes everything.
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1)}, "pay/b": {at(1, c1)}, "web/c": {at(1, c1)},
	})
	v := e.versions("pay/a")[0]
	if v.Author != "Ada Lovelace <ada@example.com>" || v.Message != "initial configs" || v.Parent != "" ||
		!v.CommittedAt.Equal(time.Date(2026, 1, 1, 0, 0, 1, 0, time.UTC)) || v.CompiledAt.IsZero() || v.Size == 0 {
		t.Errorf("attribution of pay/a v1: got %+v", v)
	}
	if got := e.content("pay/a"); got["region"] != "eu-west-1" || got["value"] != 1.0 {
		t.Errorf("content of pay/a v1: got %v", got)
	}

	// Nothing new: nothing happens.
	wantSummary(t, e.poll(tl), tailer.Summary{})

	// One config changes: one version.
	c2 := r.CommitFiles("bump b", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})
	if got := e.versions("pay/b")[1]; got.Parent != c1 || got.Commit != c2 || got.Message != "bump b" {
		t.Errorf("pay/b v2: got commit %s parent %s message %q, want %s %s %q", got.Commit, got.Parent, got.Message, c2, c1, "bump b")
	}

	// A commit touching no CUE file compiles nothing.
	r.CommitFiles("docs", map[string]string{"README.md": "# configs\n\nmore\n", "docs/x.txt": "x"})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1})

	// A library change reaches its dependents only.
	c4 := r.CommitFiles("move region", map[string]string{"lib/common/common.cue": "package common\n\nRegion: \"us-east-1\"\n"})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2})

	// A config whose output does not change gets no version (a comment).
	r.CommitFiles("comment", map[string]string{"pay/b/b.cue": "// b is tiny\n" + config("b", false, 2)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1})

	// A deleted config gets a tombstone; a new one its first version.
	r.Remove("web/c")
	r.Write(map[string]string{"web/d/d.cue": config("d", false, 7)})
	c6 := r.Commit("replace c with d")
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2, Tombstones: 1})

	// Several commits at once: oldest first, each attributed to itself.
	c7 := r.CommitFiles("a to 2", map[string]string{"pay/a/a.cue": config("a", true, 2)})
	c8 := r.CommitFiles("a to 3", map[string]string{"pay/a/a.cue": config("a", true, 3)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 2, Versions: 2})

	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, c4), at(3, c7), at(4, c8)},
		"pay/b": {at(1, c1), at(2, c2)},
		"web/c": {at(1, c1), at(2, c4), at(3, c6) + " deleted"},
		"web/d": {at(1, c6)},
	})
	if got := e.content("pay/a"); got["region"] != "us-east-1" || got["value"] != 3.0 {
		t.Errorf("content of pay/a: got %v", got)
	}
	// Deploy pointed every cohort at the newest version.
	p, err := e.dist.Pointer(e.ctx, "pay/a", 42)
	if err != nil || p.Version != 4 {
		t.Errorf("pointer of pay/a cohort 42: got %+v, %v; want version 4", p, err)
	}
	st, err := tl.State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Cursor != c8 || st.Base != c8 || len(st.Rejected) != 0 || st.Rewrite != nil || len(st.Undeployed) != 0 {
		t.Errorf("state: got %+v, want cursor and base %s", st, c8)
	}
	// Another process (cuecast status) reads the same state without a Tailer.
	other, err := tailer.LoadState(e.ctx, distributor.NewDirectStream(e.js.Conn(), tailer.StateStream), "default")
	if err != nil || other.Cursor != st.Cursor || other.Base != st.Base || other.Repo != r.Dir || other.Branch != "main" {
		t.Errorf("LoadState: got %+v, %v; want cursor %s for %s main", other, err, st.Cursor, r.Dir)
	}
	if got, err := tailer.LoadState(e.ctx, distributor.NewDirectStream(e.js.Conn(), tailer.StateStream), "nobody"); err != nil || got.Cursor != "" {
		t.Errorf("LoadState of an unknown id: got %+v, %v; want an empty state", got, err)
	}
}

// TestRejected: a commit that does not compile publishes nothing and is
// recorded; the next good commit publishes what both changed.
func TestRejected(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		files map[string]string
		want  string // in the first error's message or ID
		// inPay: the breakage is confined to the pay namespace, so the
		// second commit's change to web/c publishes at once (see
		// TestRejectedNamespaceOnly); otherwise it waits for the fix,
		// whose version of web/c carries both rejected commits.
		inPay bool
	}{
		{name: "syntax", files: map[string]string{"pay/b/b.cue": "package b\n\nvalue: {\n"}, want: "pay/b/b.cue", inPay: true},
		{name: "conflict", files: map[string]string{"pay/b/b.cue": "package b\n\nvalue: 1\nvalue: 2\n"}, want: "pay/b/b.cue", inPay: true},
		{name: "not concrete", files: map[string]string{"pay/b/b.cue": "package b\n\nvalue: int\n"}, want: "pay/b/b.cue", inPay: true},
		{name: "broken library", files: map[string]string{"lib/common/common.cue": "package common\n\nRegion: \"eu\" & 3\n"}, want: "lib/common/common.cue"},
		{name: "broken manifest", files: map[string]string{"cuecast.cue": "package manifest\n\nnamespaces: pay: owners: []\n"}, want: "owners"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			r := e.repo
			c1, tl := e.basePublished()

			// The bad commit also changes pay/a correctly: that change must
			// not be lost when the next commit fixes the breakage.
			bad := map[string]string{"pay/a/a.cue": config("a", true, 5)}
			maps.Copy(bad, tt.files)
			r.Author = object.Signature{Name: "Alice", Email: "alice@example.com"}
			c2 := r.CommitFiles("break it", bad)
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Rejected: 1})
			st, err := tl.State(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Rejected) != 1 || st.Rejected[0].Commit != c2 || len(st.Rejected[0].Errors) == 0 {
				t.Fatalf("rejected: got %+v, want commit %s with errors", st.Rejected, c2)
			}
			if got := st.Rejected[0].Errors[0]; !strings.Contains(got.File+got.Message, tt.want) {
				t.Errorf("first error: got %v, want it to name %s", got, tt.want)
			}
			if st.Cursor != c2 || st.Base != c1 {
				t.Errorf("state: cursor %s base %s, want %s %s", st.Cursor, st.Base, c2, c1)
			}

			// Still broken, and web/c changes: rejected, but when the
			// breakage is pay's alone, web/c publishes.
			r.Author = object.Signature{Name: "Carol", Email: "carol@example.com"}
			c3 := r.CommitFiles("still broken", map[string]string{"web/c/c.cue": config("c", true, 9)})
			published := 0
			if tt.inPay {
				published = 1
			}
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Rejected: 1, Versions: published})

			// The fix compiles against its own tree: pay/a (changed in the
			// rejected commit) and web/c (changed in the second, unless
			// published then) publish now.
			fix := baseRepo()
			fix["pay/a/a.cue"] = config("a", true, 5)
			fix["web/c/c.cue"] = config("c", true, 9)
			r.Author = object.Signature{Name: "Bob", Email: "bob@example.com"}
			c4 := r.CommitFiles("fix it", fix)
			wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2 - published})
			webC := c4
			if tt.inPay {
				webC = c3
			}
			wantHistory(t, e, map[cuecast.ConfigPath][]string{
				"pay/a": {at(1, c1), at(2, c4)},
				"pay/b": {at(1, c1)},
				"web/c": {at(1, c1), at(2, webC)},
			})
			st, err = tl.State(e.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Rejected) != 2 || st.Rejected[1].Commit != c3 || st.Cursor != c4 || st.Base != c4 {
				t.Errorf("state after fix: got %+v", st)
			}

			// The fix's versions carry what the rejected commits changed,
			// so each names them with their authors, not only the fixer.
			names := map[string]string{c2: "c2", c3: "c3"}
			authors := map[string]string{c2: "Alice <alice@example.com>", c3: "Carol <carol@example.com>"}
			wantCarried := map[cuecast.ConfigPath][]string{"pay/a": {"c2"}, "web/c": {"c2", "c3"}}
			if tt.inPay {
				wantCarried["web/c"] = nil // c2 did not touch web/c; c3 made its version
			}
			for cp, want := range wantCarried {
				vs := e.versions(cp)
				var got []string
				for _, cc := range vs[len(vs)-1].Carries {
					got = append(got, names[cc.Commit])
					if want := authors[cc.Commit]; cc.Author != want || cc.Message == "" {
						t.Errorf("%s carries %s by %q (%q), want by %q with its subject", cp, cc.Commit, cc.Author, cc.Message, want)
					}
				}
				if !slices.Equal(got, want) {
					t.Errorf("%s version 2 carries %q, want %q", cp, got, want)
				}
			}
		})
	}
}

// TestRejectedNamespaceOnly: a commit whose errors are all in one
// namespace's configs publishes the other namespaces' changes; the broken
// namespace keeps its versions, and so do the later commits that change it,
// until one fixes it. Each version names the rejected commits it carries,
// but not one whose change to its namespace was published already.
func TestRejectedNamespaceOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1, tl := e.basePublished()

	r.Author = object.Signature{Name: "Alice", Email: "alice@example.com"}
	c2 := r.CommitFiles("b broken, c to 9", map[string]string{"pay/b/b.cue": "package b\n\nvalue: {\n", "web/c/c.cue": config("c", true, 9)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Rejected: 1, Versions: 1})
	r.Author = object.Signature{Name: "Carol", Email: "carol@example.com"}
	c3 := r.CommitFiles("a to 5, c to 10", map[string]string{"pay/a/a.cue": config("a", true, 5), "web/c/c.cue": config("c", true, 10)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Rejected: 1, Versions: 1})
	st, err := tl.State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Rejected) != 2 || st.Rejected[0].Commit != c2 || st.Rejected[1].Commit != c3 ||
		!slices.Equal(st.Rejected[0].Namespaces, []string{"pay"}) || !slices.Equal(st.Rejected[1].Namespaces, []string{"pay"}) ||
		st.Cursor != c3 || st.Base != c1 {
		t.Fatalf("state: %+v; want c2 and c3 rejected in pay only, cursor c3, base c1", st)
	}

	r.Author = object.Signature{Name: "Bob", Email: "bob@example.com"}
	c4 := r.CommitFiles("b to 2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 2})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, c4)},
		"pay/b": {at(1, c1), at(2, c4)},
		"web/c": {at(1, c1), at(2, c2), at(3, c3)},
	})
	names := map[string]string{c2: "c2", c3: "c3"}
	for cp, want := range map[cuecast.ConfigPath][]string{"pay/a": {"c3"}, "pay/b": {"c2"}, "web/c": nil} {
		vs := e.versions(cp)
		var got []string
		for _, cc := range vs[len(vs)-1].Carries {
			got = append(got, names[cc.Commit])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s version %d carries %q, want %q", cp, vs[len(vs)-1].Version, got, want)
		}
	}
	if st, err = tl.State(e.ctx); err != nil || st.Base != c4 {
		t.Errorf("state after the fix: %+v, %v; want base c4", st, err)
	}
}

// TestRunawayConfig: a config whose evaluation never finishes in time is
// rejected at every commit that touches it, but leaves one abandoned
// evaluation running, not one per commit: the next commit is rejected at
// once, saying the previous evaluation still runs. Without the tailer's
// Runaways shared across its compiles, the second commit waited for the
// limit again and left a second evaluation behind.
func TestRunawayConfig(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	r.CommitFiles("base", baseRepo())
	// A limit the slow config cannot meet (it takes about three seconds
	// under -race on 2 cores, burning a core until it ends) and the rest
	// of the repo's configs meet with room to spare; the manifest and
	// schemas get a minute, since under -race on a loaded machine (load
	// 15) the manifest missed 300 ms too and rejected the whole commit.
	tl := e.tailer(tailer.WithSharedTimeout(tailer.Config{Timeout: 300 * time.Millisecond}, time.Minute))
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 3})
	rw := tailer.Runaways(tl)
	// Left running, the evaluation would slow the tests after this one.
	t.Cleanup(func() { <-rw.Idle() })

	slow := func(comment string) string {
		return "package slow\n\nimport \"list\"\n\n// " + comment +
			"\nn: len([for a in list.Range(0, 400, 1) for b in list.Range(0, 400, 1) if a*b < 0 {a}])\n"
	}
	for i, want := range []string{"did not finish within", "its previous evaluation, abandoned at the time limit, is still running"} {
		r.CommitFiles("slow", map[string]string{"pay/slow/slow.cue": slow(fmt.Sprint(i))})
		wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Rejected: 1})
		st, err := tl.State(e.ctx)
		if err != nil {
			t.Fatal(err)
		}
		last := st.Rejected[len(st.Rejected)-1]
		if len(last.Errors) != 1 || last.Errors[0].ID != compiler.IDConfigTimeout || !strings.Contains(last.Errors[0].Message, want) {
			t.Errorf("commit %d rejected with %+v, want one %s saying %q", i+1, last.Errors, compiler.IDConfigTimeout, want)
		}
		if n := rw.Running(); n != 1 {
			t.Errorf("after commit %d, %d abandoned evaluations run, want 1", i+1, n)
		}
	}

	// Once it ended, the fixed config publishes.
	<-rw.Idle()
	c := r.CommitFiles("fix", map[string]string{"pay/slow/slow.cue": "package slow\n\nn: 0\n"})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})
	if h := e.history("pay/slow"); len(h) != 1 || h[0] != at(1, c) {
		t.Errorf("pay/slow history %v, want %s", h, at(1, c))
	}
}

// TestRestart: a new tailer over the same NATS store (server restarted too)
// resumes after the cursor without publishing anything twice.
func TestRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1 := r.CommitFiles("initial", baseRepo())
	e.poll(e.tailer(tailer.Config{ID: "configs"}))

	e.srv.Stop()
	e.connect(natstest.StartIn(t, e.srv.Dir))
	c2 := r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	tl := e.tailer(tailer.Config{ID: "configs"})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})
	wantSummary(t, e.poll(e.tailer(tailer.Config{ID: "configs"})), tailer.Summary{})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1)}, "pay/b": {at(1, c1), at(2, c2)}, "web/c": {at(1, c1)},
	})

	// Another ID is another cursor: it replays from the root, and finds
	// every version already there (or a newer one).
	wantSummary(t, e.poll(e.tailer(tailer.Config{ID: "other"})), tailer.Summary{Commits: 2})
}

// TestFollowsLinkedWorktree: serve pointed at a `git worktree` checkout
// follows the repository's branch (go-git found no branch there: the
// worktree's .git is a file and its branches are in the main .git).
func TestFollowsLinkedWorktree(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1 := r.CommitFiles("initial", baseRepo())
	wt := r.LinkedWorktree("follow", c1)
	tl := e.tailer(tailer.Config{Repo: wt})
	c2 := r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 2, Versions: 4})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1)}, "pay/b": {at(1, c1), at(2, c2)}, "web/c": {at(1, c1)},
	})
}

// TestStartAt backfills from a given commit on an empty store.
func TestStartAt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	r.CommitFiles("initial", baseRepo())
	c2 := r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	c3 := r.CommitFiles("a2", map[string]string{"pay/a/a.cue": config("a", true, 2)})
	tl := e.tailer(tailer.Config{StartAt: c2[:10]})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 2, Versions: 4})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c2), at(2, c3)}, "pay/b": {at(1, c2)}, "web/c": {at(1, c2)},
	})
}

// TestMerge: a merge commit is diffed against its first parent and the side
// branch's commits are not processed on their own.
func TestMerge(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1, tl := e.basePublished()

	// A feature branch changes pay/b; main meanwhile changes pay/a.
	feature := r.CommitFiles("feature: b to 3", map[string]string{"pay/b/b.cue": config("b", false, 3)})
	setBranch(t, r, "main", c1)
	m1 := r.CommitFiles("main: a to 2", map[string]string{"pay/a/a.cue": config("a", true, 2), "pay/b/b.cue": config("b", false, 1)})
	r.Write(map[string]string{"pay/b/b.cue": config("b", false, 3)})
	merge := commitMerge(t, r, "merge feature", feature)

	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 2, Versions: 2})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, m1)}, "pay/b": {at(1, c1), at(2, merge)}, "web/c": {at(1, c1)},
	})
	if got := e.versions("pay/b")[1].Parent; got != m1 {
		t.Errorf("parent of the merge's version: got %s, want first parent %s", got, m1)
	}

	// main fast-forwarded to a merge whose *second* parent is the old tip:
	// the cursor is not on the first-parent chain, yet nothing was rewritten.
	side := r.Head()
	setBranch(t, r, "main", c1)
	r.Write(baseRepo())
	s1 := r.CommitFiles("side: c to 4", map[string]string{"web/c/c.cue": config("c", true, 4)})
	r.Write(map[string]string{"pay/a/a.cue": config("a", true, 2), "pay/b/b.cue": config("b", false, 3)})
	ff := commitMerge(t, r, "merge main into side", side)
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{"web/c": {at(1, c1), at(2, ff)}})
	_ = s1
}

// setBranch points a branch at a commit, leaving the work tree alone.
func setBranch(t *testing.T, r *gittest.Repo, branch, sha string) {
	t.Helper()
	ref := plumbing.NewHashReference(plumbing.NewBranchReferenceName(branch), plumbing.NewHash(sha))
	if err := r.Git.Storer.SetReference(ref); err != nil {
		t.Fatal(err)
	}
}

// commitMerge commits the work tree with HEAD and other as parents.
func commitMerge(t *testing.T, r *gittest.Repo, msg, other string) string {
	t.Helper()
	wt, err := r.Git.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		t.Fatal(err)
	}
	h, err := wt.Commit(msg, &git.CommitOptions{
		Parents: []plumbing.Hash{plumbing.NewHash(r.Head()), plumbing.NewHash(other)},
		Author:  &object.Signature{Name: "Grace Hopper", Email: "grace@example.com", When: time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC)},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h.String()
}

// basePublished commits the base configs to main and returns the commit
// and a tailer that has published it.
func (e *env) basePublished() (string, *tailer.Tailer) {
	e.t.Helper()
	c1 := e.repo.CommitFiles("initial", baseRepo())
	tl := e.tailer(tailer.Config{})
	e.poll(tl)
	return c1, tl
}

// twoPublished is where the rewrite tests start: two commits on main (the
// base, then pay/b changed) and a tailer that has published both.
func (e *env) twoPublished() (c1, c2 string, tl *tailer.Tailer) {
	e.t.Helper()
	c1 = e.repo.CommitFiles("initial", baseRepo())
	c2 = e.repo.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	tl = e.tailer(tailer.Config{})
	e.poll(tl)
	return c1, c2, tl
}

// TestRewrite: a force push halts publishing until AcceptRewrite.
func TestRewrite(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1, c2, tl := e.twoPublished()

	if err := tl.AcceptRewrite(e.ctx, c1); !errors.Is(err, tailer.ErrNotHalted) {
		t.Errorf("AcceptRewrite when not halted: got %v, want ErrNotHalted", err)
	}

	// Force push: main goes back to c1 and grows another way.
	setBranch(t, r, "main", c1)
	r.Write(baseRepo())
	r.Remove("web/c")
	n1 := r.CommitFiles("rewritten: a to 7, drop c", map[string]string{"pay/a/a.cue": config("a", true, 7)})
	n2 := r.CommitFiles("rewritten: a to 8", map[string]string{"pay/a/a.cue": config("a", true, 8)})

	for range 2 {
		sum, err := tl.Poll(e.ctx)
		var rw *tailer.RewriteError
		if !errors.As(err, &rw) || !errors.Is(err, tailer.ErrRewrite) || rw.Cursor != c2 || rw.Tip != n2 || !sum.Halted {
			t.Fatalf("Poll after force push: got %+v, %v; want a RewriteError from %s to %s", sum, err, c2, n2)
		}
		if !strings.Contains(err.Error(), c2[:12]) || !strings.Contains(err.Error(), n2[:12]) {
			t.Errorf("rewrite error %q does not name both commits", err)
		}
	}
	st, err := tl.State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rewrite == nil || st.Rewrite.Cursor != c2 || st.Rewrite.Tip != n2 {
		t.Fatalf("state while halted: got %+v", st.Rewrite)
	}
	// A new tailer (a restarted serve) stays halted.
	if _, err := e.tailer(tailer.Config{}).Poll(e.ctx); !errors.Is(err, tailer.ErrRewrite) {
		t.Fatalf("Poll of a new tailer while halted: got %v, want ErrRewrite", err)
	}
	wantHistory(t, e, map[cuecast.ConfigPath][]string{"pay/a": {at(1, c1)}, "pay/b": {at(1, c1), at(2, c2)}})

	if err := tl.AcceptRewrite(e.ctx, c2); !errors.Is(err, tailer.ErrNoCommit) {
		t.Errorf("AcceptRewrite to a commit off the branch: got %v, want ErrNoCommit", err)
	}
	// Accepted from another process's tailer: the state lives in NATS.
	if err := e.tailer(tailer.Config{}).AcceptRewrite(e.ctx, n1); err != nil {
		t.Fatalf("AcceptRewrite: %v", err)
	}
	// n1 compiles every config: pay/a changed, pay/b back to 1, web/c gone.
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 2, Versions: 4, Tombstones: 1})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, n1), at(3, n2)},
		"pay/b": {at(1, c1), at(2, c2), at(3, n1)},
		"web/c": {at(1, c1), at(2, n1) + " deleted"},
	})
}

// TestNewErrors: what a user who mistyped a flag sees.
func TestNewErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	c1 := e.repo.CommitFiles("initial", baseRepo())
	other := gittest.New(t)
	other.CommitFiles("unrelated", map[string]string{"x.cue": "package x\n"})
	notRepo := t.TempDir()
	tests := []struct {
		name string
		cfg  tailer.Config
		err  error
		says string
	}{
		{name: "not a repo", cfg: tailer.Config{Repo: notRepo}, err: tailer.ErrNotRepo, says: notRepo},
		{name: "missing path", cfg: tailer.Config{Repo: notRepo + "/nope"}, err: tailer.ErrNotRepo, says: "nope"},
		{name: "no branch", cfg: tailer.Config{Branch: "prod"}, err: tailer.ErrNoBranch, says: `"prod"`},
		{name: "bad start", cfg: tailer.Config{StartAt: "0123456789abcdef"}, err: tailer.ErrNoCommit, says: "0123456789abcdef"},
		{name: "start off branch", cfg: tailer.Config{StartAt: other.Head()}, err: tailer.ErrNoCommit},
		{name: "bad id", cfg: tailer.Config{ID: "a.b"}, err: tailer.ErrInvalidConfig, says: "a.b"},
		{name: "remote without data dir", cfg: tailer.Config{Repo: "https://example.com/x.git"}, err: tailer.ErrInvalidConfig},
		{name: "remote not a repo", cfg: tailer.Config{Repo: "file://" + notRepo, DataDir: t.TempDir()}, err: tailer.ErrNotRepo, says: notRepo},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.Repo == "" {
				tt.cfg.Repo = e.repo.Dir
			}
			_, err := tailer.New(e.ctx, tt.cfg, e.js, e.dist, e.dist)
			if !errors.Is(err, tt.err) || !strings.Contains(fmt.Sprint(err), tt.says) {
				t.Errorf("New: got %v, want %v naming %q", err, tt.err, tt.says)
			}
			if tt.err == tailer.ErrNotRepo && !errors.Is(err, cuecast.ErrNotRepo) {
				t.Errorf("New: got %v, want cuecast.ErrNotRepo", err)
			}
		})
	}
	_ = c1
}

// TestFreshCompileAgrees: what the tailer published equals a compile of HEAD
// from disk.
func TestFreshCompileAgrees(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	r.CommitFiles("initial", baseRepo())
	r.CommitFiles("lib", map[string]string{"lib/common/common.cue": "package common\n\nRegion: \"ap-southeast-1\"\n"})
	r.CommitFiles("b", map[string]string{"pay/b/b.cue": config("b", false, 11)})
	e.poll(e.tailer(tailer.Config{}))
	checkAgainstHead(t, e.ctx, e.repo.Dir, e.dist)
}

// checkAgainstHead compiles the work tree and compares every config's
// checksum with its latest version; configs gone from HEAD must be
// tombstoned.
func checkAgainstHead(t *testing.T, ctx context.Context, dir string, d *distributor.Distributor) {
	t.Helper()
	res, err := compiler.Compile(ctx, dir, compiler.Options{})
	if err != nil || !res.OK() {
		t.Fatalf("compile HEAD: %v %v", err, res.Errors)
	}
	for cp, out := range res.Outputs {
		latest, err := d.Latest(ctx, cp)
		if err != nil {
			t.Errorf("latest of %s: %v", cp, err)
			continue
		}
		if latest.Deleted || latest.Checksum != out.Checksum {
			t.Errorf("%s: latest version %d has checksum %s (deleted %v), HEAD compiles to %s", cp, latest.Version, latest.Checksum, latest.Deleted, out.Checksum)
		}
	}
	all, err := d.Configs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range all {
		if _, ok := res.Outputs[cp]; ok {
			continue
		}
		if latest, err := d.Latest(ctx, cp); err != nil || !latest.Deleted {
			t.Errorf("%s is not in HEAD: latest %+v, %v; want a tombstone", cp, latest, err)
		}
	}
}

// TestRunWake: Run polls at once when woken (the interval here is an hour)
// and returns nil when its context ends.
func TestRunWake(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	// Versions are RePublished on core subjects: wait for them there.
	sub, err := e.nc.SubscribeSync("ccr.pay.v.b")
	if err != nil {
		t.Fatal(err)
	}
	r.CommitFiles("initial", baseRepo())
	tl := e.tailer(tailer.Config{Interval: time.Hour})
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan error, 1)
	go func() { done <- tl.Run(ctx) }()

	nextVersion(t, sub, 1)
	c2 := r.CommitFiles("b2", map[string]string{"pay/b/b.cue": config("b", false, 2)})
	tl.Wake()
	if got := nextVersion(t, sub, 2); got.Commit != c2 {
		t.Errorf("pay/b v2 commit: got %s, want %s", got.Commit, c2)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run after cancel: got %v, want nil", err)
	}
}

// nextVersion waits (30 s at most) for the next version message on sub and
// checks its number.
func nextVersion(t testing.TB, sub *nats.Subscription, want uint64) cuecast.Version {
	t.Helper()
	m, err := sub.NextMsg(30 * time.Second)
	if err != nil {
		t.Fatalf("waiting for version %d: %v", want, err)
	}
	var v cuecast.Version
	if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &v); err != nil {
		t.Fatalf("decode version: %v", err)
	}
	if v.Version != want {
		t.Fatalf("got version %d, want %d", v.Version, want)
	}
	return v
}

// TestNoModuleYet: commits before the repository became a CUE module are
// passed over quietly; deleting the module later is rejected, not a mass
// tombstoning.
func TestNoModuleYet(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	r.CommitFiles("README only", map[string]string{"README.md": "# configs\n"})
	c2 := r.CommitFiles("configs", baseRepo())
	tl := e.tailer(tailer.Config{})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 2, Versions: 3})
	r.Remove("cue.mod")
	r.Commit("drop the module")
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Rejected: 1})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{"pay/a": {at(1, c2)}, "web/c": {at(1, c2)}})
}

// TestCoalescedRun: a backlog of commits touching different configs is
// compiled together, yet every version carries its own commit's content and
// attribution; a commit that adds an import the old index cannot know about
// must not let a later library change leak into its version.
func TestCoalescedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1, tl := e.basePublished()

	c2 := r.CommitFiles("docs", map[string]string{"README.md": "more\n"})
	// b starts importing the library: the index before the run says b
	// depends on nothing but itself.
	c3 := r.CommitFiles("b imports lib", map[string]string{"pay/b/b.cue": config("b", true, 3)})
	// The library changes: by the old index that affects a and c only, so
	// the run looks disjoint until the compile's own index says otherwise.
	c4 := r.CommitFiles("region", map[string]string{"lib/common/common.cue": "package common\n\nRegion: \"sa-east-1\"\n"})
	c5 := r.CommitFiles("new config", map[string]string{"web/d/d.cue": config("d", false, 4)})
	c6 := r.CommitFiles("a to 2", map[string]string{"pay/a/a.cue": config("a", true, 2)})
	c7 := r.CommitFiles("c to 5", map[string]string{"web/c/c.cue": config("c", true, 5)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 6, Versions: 7})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{
		"pay/a": {at(1, c1), at(2, c4), at(3, c6)},
		"pay/b": {at(1, c1), at(2, c3), at(3, c4)},
		"web/c": {at(1, c1), at(2, c4), at(3, c7)},
		"web/d": {at(1, c5)},
	})
	_ = c2
	tests := []struct {
		cp      cuecast.ConfigPath
		version uint64
		region  any
		value   float64
	}{
		{"pay/a", 2, "sa-east-1", 1},
		{"pay/a", 3, "sa-east-1", 2},
		{"pay/b", 2, "eu-west-1", 3},
		{"pay/b", 3, "sa-east-1", 3},
		{"web/c", 2, "sa-east-1", 1},
		{"web/c", 3, "sa-east-1", 5},
		{"web/d", 1, nil, 4},
	}
	for _, tt := range tests {
		_, b, err := e.dist.Version(e.ctx, tt.cp, tt.version)
		if err != nil {
			t.Fatalf("Version(%s, %d): %v", tt.cp, tt.version, err)
		}
		var got map[string]any
		if err := json.Unmarshal(b, &got); err != nil {
			t.Fatal(err)
		}
		if got["region"] != tt.region || got["value"] != tt.value {
			t.Errorf("%s v%d: got %v, want region %v value %v", tt.cp, tt.version, got, tt.region, tt.value)
		}
	}
	checkAgainstHead(t, e.ctx, r.Dir, e.dist)
}

// TestCarriedInACoalescedRun: when the fix after a rejected commit starts a
// run of commits compiled together, its versions still name the rejected
// commit whose changes they hold, and the run's later commits name none.
func TestCarriedInACoalescedRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	_, tl := e.basePublished()

	r.Author = object.Signature{Name: "Alice", Email: "alice@example.com"}
	bad := r.CommitFiles("a to 5, b broken", map[string]string{"pay/a/a.cue": config("a", true, 5), "pay/b/b.cue": "package b\n\nvalue: {\n"})
	r.Author = object.Signature{Name: "Bob", Email: "bob@example.com"}
	fix := r.CommitFiles("b fixed, d added", map[string]string{"pay/b/b.cue": config("b", false, 1), "web/d/d.cue": config("d", false, 4)})
	c := r.CommitFiles("c to 9", map[string]string{"web/c/c.cue": config("c", true, 9)})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 3, Rejected: 1, Versions: 3})
	want := map[cuecast.ConfigPath]string{"pay/a": fix + " carries " + bad, "web/d": fix + " carries", "web/c": c + " carries"}
	for cp, want := range want {
		vs := e.versions(cp)
		v := vs[len(vs)-1]
		got := v.Commit + " carries"
		for _, cc := range v.Carries {
			got += " " + cc.Commit
			if cc.Author != "Alice <alice@example.com>" || cc.Message != "a to 5, b broken" {
				t.Errorf("%s carries %+v, want Alice's commit with its subject", cp, cc)
			}
		}
		if got != want {
			t.Errorf("%s version %d: got %q, want %q", cp, v.Version, got, want)
		}
	}
}

// TestRewriteUndoneClearsHalt: pushing the old history back (the cursor is
// again an ancestor of the tip) ends the halt by itself, as OPERATIONS.md
// says; the commits after the cursor are then published.
func TestRewriteUndoneClearsHalt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	c1, c2, tl := e.twoPublished()

	setBranch(t, r, "main", c1)
	r.Write(baseRepo())
	r.CommitFiles("rewritten: a to 7", map[string]string{"pay/a/a.cue": config("a", true, 7)})
	if _, err := tl.Poll(e.ctx); !errors.Is(err, tailer.ErrRewrite) {
		t.Fatalf("Poll after force push: %v, want ErrRewrite", err)
	}

	// The old history comes back, with one more commit on top.
	setBranch(t, r, "main", c2)
	r.Write(baseRepo())
	r.Write(map[string]string{"pay/b/b.cue": config("b", false, 2)})
	c3 := r.CommitFiles("b3", map[string]string{"pay/b/b.cue": config("b", false, 3)})
	sum, err := tl.Poll(e.ctx)
	if err != nil || sum.Halted {
		t.Fatalf("Poll after the history was restored: %+v, %v; want the halt cleared", sum, err)
	}
	st, err := tl.State(e.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Rewrite != nil || st.Cursor != c3 {
		t.Fatalf("state after restore: rewrite %+v, cursor %s; want no halt, cursor %s", st.Rewrite, st.Cursor, c3)
	}
	wantHistory(t, e, map[cuecast.ConfigPath][]string{"pay/a": {at(1, c1)}, "pay/b": {at(1, c1), at(2, c2), at(3, c3)}})
}

// TestEmbeddedFileChange: a file matched by an @embed glob below a config's
// directory is part of that config: changing it publishes a version
// (issue 16).
func TestEmbeddedFileChange(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	r := e.repo
	files := baseRepo()
	files["pay/b/words.cue"] = "@extern(embed)\n\npackage b\n\nwords: _ @embed(glob=\"lists/*.json\")\n"
	files["pay/b/lists/en.json"] = `["a", "the"]`
	c1 := r.CommitFiles("initial", files)
	tl := e.tailer(tailer.Config{})
	e.poll(tl)
	c2 := r.CommitFiles("one more word", map[string]string{"pay/b/lists/en.json": `["a", "an", "the"]`})
	wantSummary(t, e.poll(tl), tailer.Summary{Commits: 1, Versions: 1})
	wantHistory(t, e, map[cuecast.ConfigPath][]string{"pay/b": {at(1, c1), at(2, c2)}})
}

// failingPublisher fails every Publish while fail is set.
type failingPublisher struct {
	tailer.Publisher
	fail atomic.Bool
}

func (p *failingPublisher) Publish(ctx context.Context, v cuecast.Version, content []byte) error {
	if p.fail.Load() {
		return fmt.Errorf("publish %s@%d: %w", v.Config, v.Version, nats.ErrConnectionClosed)
	}
	return p.Publisher.Publish(ctx, v, content)
}

// A poll whose publish failed while the compile stage had more commits
// ready than the hand-over holds waited for that stage for good: run's
// deferred wait for it ran before its deferred cancel (defers run last
// first), and the stage, blocked handing over the next commit, only stops
// when cancelled. The tailer then published nothing more and logged
// nothing (TestSoakFaults/external: "a tailer at the head: still <nil>",
// the goroutine dump in Tailer.run's WaitGroup.Wait and the compile
// stage's send). Poll now returns the publish error, and the next poll
// publishes the commits.
func TestPollReturnsWhenAPublishFailsMidRun(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	pub := &failingPublisher{Publisher: e.dist}
	tl, err := tailer.New(e.ctx, tailer.Config{Repo: e.repo.Dir, Logger: e.log}, e.js, pub, e.dist)
	if err != nil {
		t.Fatal(err)
	}
	e.poll(tl)
	// Six commits to six configs: one run of six steps for a hand-over
	// of two.
	for i := range 6 {
		e.repo.CommitFiles(fmt.Sprintf("n%d", i), map[string]string{fmt.Sprintf("web/n%d/n%d.cue", i, i): config(fmt.Sprintf("n%d", i), false, i)})
	}
	pub.fail.Store(true)
	done := make(chan error, 1)
	go func() {
		_, err := tl.Poll(e.ctx)
		done <- err
	}()
	if err := poll.Receive(t, "Poll's return after its first publish failed (still running)", poll.Patience, done); !errors.Is(err, nats.ErrConnectionClosed) {
		t.Fatalf("Poll with publishes failing: %v, want the publish error", err)
	}
	pub.fail.Store(false)
	if sum := e.poll(tl); sum.Versions != 6 {
		t.Fatalf("the next poll published %d versions, want 6", sum.Versions)
	}
}

// TestCommitNotProcessedUntilItsCursorIsStored: a commit whose versions
// were published but whose cursor the store refused (a full disk, here a
// sealed bucket) is not "processed": Poll fails with the write's error,
// no cursor is stored, and the log does not say "commit processed", which
// operators and cuecast_tailer_commits_total read as progress.
func TestCommitNotProcessedUntilItsCursorIsStored(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.repo.CommitFiles("initial", baseRepo())
	var logs bytes.Buffer
	tl, err := tailer.New(e.ctx, tailer.Config{Repo: e.repo.Dir, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, e.js, e.dist, e.dist)
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.js.Stream(e.ctx, "KV_"+tailer.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.CachedInfo().Config
	cfg.Sealed = true
	if _, err := e.js.UpdateStream(e.ctx, cfg); err != nil {
		t.Fatalf("seal the tailer's bucket: %v", err)
	}
	sum, err := tl.Poll(e.ctx)
	if err == nil || !strings.Contains(err.Error(), "cursor") {
		t.Fatalf("Poll with the cursor refused: %+v, %v; want the cursor's write error", sum, err)
	}
	if sum.Versions == 0 {
		t.Errorf("Poll published no version before the cursor's write: the test did not reach it")
	}
	if strings.Contains(logs.String(), "commit processed") {
		t.Errorf("the log says a commit was processed whose cursor was refused:\n%s", logs.String())
	}
	if st, err := tl.State(e.ctx); err != nil || st.Cursor != "" {
		t.Errorf("state after the refused write: %+v, %v; want no cursor", st, err)
	}
}
