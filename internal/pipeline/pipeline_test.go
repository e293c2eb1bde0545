package pipeline_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/nats-io/nats.go"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/revert"
)

const checkout = cuecast.ConfigPath("payments/checkout")

// fixture is a running pipeline over a real Git repo, with its data directory
// kept so a test can restart it.
type fixture struct {
	t    *testing.T
	repo *gittest.Repo
	data string
	p    *pipeline.Pipeline
	stop func()
}

func start(t *testing.T, repo *gittest.Repo, data string) *fixture {
	t.Helper()
	return startWith(t, repo, data, nil)
}

// startWith is start with the rollout policies pol (nil: the default).
func startWith(t *testing.T, repo *gittest.Repo, data string, pol rollout.Policies) *fixture {
	t.Helper()
	p, stop := pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, DataDir: data, Policies: pol})
	return &fixture{t: t, repo: repo, data: data, p: p, stop: stop}
}

func (f *fixture) waitCursor(sha string) {
	f.t.Helper()
	poll.Until(f.t, "tailer cursor", poll.Patience, func() (bool, string) {
		st, err := f.p.Tailer.State(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return st.Cursor == sha, "at " + st.Cursor
	})
}

func (f *fixture) versions(cfg cuecast.ConfigPath) []cuecast.Version {
	f.t.Helper()
	vs, err := f.p.Distributor.Versions(context.Background(), cfg)
	if err != nil {
		f.t.Fatalf("versions of %s: %v", cfg, err)
	}
	return vs
}

func (f *fixture) watcher(id, lkg string) *client.Watcher {
	f.t.Helper()
	nc, err := nats.Connect(f.p.ClientURL())
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(nc.Close)
	w := natstest.Watch(f.t, nc, checkout, []client.Option{client.WithInstance(id), client.WithTrustedKeys(f.p.PublicKey)}, client.LastKnownGood(lkg))
	return w
}

func waitApplied(t *testing.T, ws []*client.Watcher, v cuecast.Version) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("every watcher on v%d", v.Version), poll.Patience, func() (bool, string) {
		for i, w := range ws {
			s := w.Current()
			if s.Version != v.Version || s.Checksum != v.Checksum {
				return false, fmt.Sprintf("watcher %d on v%d", i, s.Version)
			}
		}
		return true, ""
	})
}

func editCheckout(t *testing.T, repo *gittest.Repo, from, to string) {
	t.Helper()
	repo.Edit("payments/checkout/checkout.cue", from, to)
}

// TestDemoPath walks the path `make demo` shows and asserts every step:
// commit ▶ versions ▶ subscribers applied ▶ revert ▶ converged; then a
// rejected commit, and a restart that neither skips nor repeats a version.
func TestDemoPath(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := gittest.New(t)
	repo.CopyDir("../../configs-example")
	first := repo.Commit("Import the example configs")
	data := t.TempDir()
	f := start(t, repo, data)
	f.waitCursor(first)

	cfgs, err := f.p.Distributor.Configs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// 7 configs without variants, and search/suggest: its variant index
	// and 4 variants (docs/VARIANTS.md).
	if len(cfgs) != 12 {
		t.Fatalf("got %d configs published (%v), want 12", len(cfgs), cfgs)
	}
	for _, c := range cfgs {
		vs := f.versions(c)
		if len(vs) != 1 || vs[0].Version != 1 || vs[0].Commit != first {
			t.Fatalf("%s: got versions %+v, want exactly v1 from %s", c, vs, first)
		}
		if vs[0].Author != "Ada Lovelace <ada@example.com>" || vs[0].Message == "" || vs[0].Signature == "" {
			t.Errorf("%s v1: author %q, message %q, signed %v: want attribution and a signature", c, vs[0].Author, vs[0].Message, vs[0].Signature != "")
		}
	}
	v1 := f.versions(checkout)[0]

	lkgDir := t.TempDir()
	var ws []*client.Watcher
	for _, id := range []string{"web-1", "web-2", "web-3"} {
		ws = append(ws, f.watcher(id, filepath.Join(lkgDir, id+".json")))
	}
	waitApplied(t, ws, v1)

	// A change to one config makes exactly one new version.
	editCheckout(t, repo, "max_amount_minor: 5_000_000", "max_amount_minor: 2_500_000")
	change := repo.Commit("checkout: halve the maximum amount")
	f.p.Tailer.Wake()
	f.waitCursor(change)
	vs := f.versions(checkout)
	if len(vs) != 2 || vs[0].Version != 2 || vs[0].Commit != change {
		t.Fatalf("checkout versions after change: got %+v, want v2 from %s first", vs, change)
	}
	v2 := vs[0]
	if v2.Checksum == v1.Checksum {
		t.Fatal("v2 has v1's checksum; the change did not change the output")
	}
	for _, c := range cfgs {
		if c != checkout && len(f.versions(c)) != 1 {
			t.Errorf("%s got a new version from a change to checkout only", c)
		}
	}
	waitApplied(t, ws, v2)
	if !strings.Contains(string(ws[0].Current().Content), `"max_amount_minor":2500000`) {
		t.Errorf("applied content lacks the change: %s", ws[0].Current().Content)
	}
	poll.Until(t, "status 3/3 on v2", poll.Patience, func() (bool, string) {
		st, err := f.p.Distributor.Status(ctx, checkout)
		if err != nil || len(st) != 1 {
			return false, fmt.Sprint(st, err)
		}
		return st[0].Latest.Version == 2 && st[0].OnLatest == 3 && st[0].Instances == 3, fmt.Sprintf("%d/%d on v%d", st[0].OnLatest, st[0].Instances, st[0].Latest.Version)
	})

	// The last-known-good file holds what was applied.
	lkg, err := os.ReadFile(filepath.Join(lkgDir, "web-1.json"))
	if err != nil {
		t.Fatalf("last-known-good file: %v", err)
	}
	if !strings.Contains(string(lkg), v2.Checksum) && !strings.Contains(string(lkg), "2500000") {
		t.Errorf("last-known-good file does not hold v2: %.200s", lkg)
	}

	// A revert commit is the rollback: a newer version with the old content.
	rev, err := revert.Commit(repo.Git, change, &object.Signature{Name: "Oncall", Email: "oncall@example.com", When: time.Now()})
	if err != nil {
		t.Fatalf("revert: %v", err)
	}
	f.p.Tailer.Wake()
	f.waitCursor(rev.String())
	vs = f.versions(checkout)
	if len(vs) != 3 || vs[0].Version != 3 || vs[0].Commit != rev.String() || vs[0].Checksum != v1.Checksum {
		t.Fatalf("after revert: got %+v, want v3 from %s with v1's checksum", vs[0], rev)
	}
	waitApplied(t, ws, vs[0])

	// A commit that does not compile publishes nothing; the fleet stays put.
	editCheckout(t, repo, `currency:         "EUR"`, `currency:         "DOGECOIN"`)
	bad := repo.Commit("checkout: an invalid currency")
	f.p.Tailer.Wake()
	f.waitCursor(bad)
	st, err := f.p.Tailer.State(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(st.Rejected); n != 1 || st.Rejected[0].Commit != bad || len(st.Rejected[0].Errors) == 0 {
		t.Fatalf("rejected commits: got %+v, want %s with its errors", st.Rejected, bad)
	}
	if e := st.Rejected[0].Errors[0]; e.File != "payments/checkout/checkout.cue" || e.Line == 0 {
		t.Errorf("rejection error: got %s:%d, want payments/checkout/checkout.cue and a line", e.File, e.Line)
	}
	if got := len(f.versions(checkout)); got != 3 {
		t.Fatalf("a rejected commit published: %d versions, want 3", got)
	}

	// Restart over the same data: nothing republished, numbering continues.
	f.stop()
	f = start(t, repo, data)
	editCheckout(t, repo, `currency:         "DOGECOIN"`, `currency:         "USD"`)
	fixed := repo.Commit("checkout: bill in dollars")
	f.waitCursor(fixed)
	vs = f.versions(checkout)
	if len(vs) != 4 || vs[0].Version != 4 || vs[0].Commit != fixed {
		t.Fatalf("after restart: got %d versions, newest %+v; want v4 from %s", len(vs), vs[0], fixed)
	}
	for _, c := range cfgs {
		if c != checkout && len(f.versions(c)) != 1 {
			t.Errorf("%s was republished after restart", c)
		}
	}
}

// TestStartErrors: bad input is named, and classified for exit status 2.
func TestStartErrors(t *testing.T) {
	repo := gittest.New(t)
	repo.CopyDir("../../configs-example")
	repo.Commit("import")
	for _, tc := range []struct {
		name, repo, branch, want string
	}{
		{"not a repo", t.TempDir(), "main", "not a git repository"},
		{"no branch", repo.Dir, "release", "release"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := pipeline.Start(context.Background(), pipeline.Config{Repo: tc.repo, Branch: tc.branch, DataDir: t.TempDir(), Listen: "127.0.0.1:0"})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
			if errors.Is(err, context.Canceled) {
				t.Fatal("unexpected cancellation")
			}
		})
	}
}

// TestStartedNotYetOpen: after Start, until OpenHTTP, the operations
// server's 503 names what the process does now, not a step Start finished
// (it read "joining the lease" while Start built the server and serve
// created the namespaces' mirrors), and what a caller says in between.
func TestStartedNotYetOpen(t *testing.T) {
	repo := gittest.New(t)
	repo.CopyDir("../../configs-example")
	repo.Commit("import")
	p, err := pipeline.Start(context.Background(), pipeline.Config{Repo: repo.Dir, DataDir: t.TempDir(), Listen: "127.0.0.1:0", HTTP: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	base := "http://" + p.HTTPAddr()
	saysStarting := func(want string) {
		t.Helper()
		if code, body := get(t, base+"/readyz"); code != http.StatusServiceUnavailable || body != "not ready: starting: "+want+"\n" {
			t.Errorf("GET /readyz before OpenHTTP = %d %q, want 503 %q", code, body, "not ready: starting: "+want)
		}
	}
	saysStarting("opening the operations server")
	p.Starting("creating the namespaces' mirrors")
	saysStarting("creating the namespaces' mirrors")
	p.OpenHTTP()
	if code, body := get(t, base+"/readyz"); strings.Contains(body, "starting") {
		t.Errorf("GET /readyz after OpenHTTP = %d %q, want the operations server's answer", code, body)
	}
}

// TestDataDirInsideTheRepoIsIgnored: serve's defaults (--repo . and
// --data .cuecast) put the data directory, signing key included, in the
// repo's work tree, where `git status` listed it as untracked and a
// `git add -A` committed the key. The data directory ignores itself.
func TestDataDirInsideTheRepoIsIgnored(t *testing.T) {
	t.Parallel()
	repo, _ := smallRepo(t)
	data := filepath.Join(repo.Dir, ".cuecast")
	pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, DataDir: data})
	if _, err := os.Stat(filepath.Join(data, "signing.nk")); err != nil {
		t.Fatalf("the signing key is not where the test looks: %v", err)
	}
	st := repo.Status()
	for name := range st {
		if strings.HasPrefix(name, ".cuecast/") {
			t.Errorf("git status lists %s: the data directory is not ignored", name)
		}
	}
}
