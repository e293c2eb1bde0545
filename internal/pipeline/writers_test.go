package pipeline_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// firstParents numbers the first-parent history of repo's main from its
// root (0) to its tip: the order in which versions must follow each other.
func firstParents(t *testing.T, repo *gittest.Repo) map[string]int {
	t.Helper()
	c, err := repo.Git.CommitObject(plumbing.NewHash(repo.Head()))
	if err != nil {
		t.Fatal(err)
	}
	var chain []string
	for {
		chain = append(chain, c.Hash.String())
		if c.NumParents() == 0 {
			break
		}
		if c, err = c.Parent(0); err != nil {
			t.Fatal(err)
		}
	}
	order := make(map[string]int, len(chain))
	for i, h := range chain {
		order[h] = len(chain) - 1 - i
	}
	return order
}

// checkMonotonic is the two-writer oracle: each config's versions, oldest
// first, are made by commits strictly increasing in first-parent order, so
// no version's content is older than its predecessor's. It returns the
// number of violations, each reported.
func checkMonotonic(t *testing.T, d *distributor.Distributor, cfgs []cuecast.ConfigPath, order map[string]int) int {
	t.Helper()
	bad := 0
	for _, cf := range cfgs {
		vs, err := d.Versions(context.Background(), cf)
		if err != nil {
			t.Errorf("versions of %s: %v", cf, err)
			bad++
			continue
		}
		for i := len(vs) - 1; i > 0; i-- { // newest first: vs[i] precedes vs[i-1]
			prev, next := vs[i], vs[i-1]
			p, pok := order[prev.Commit]
			n, nok := order[next.Commit]
			if !pok || !nok || n <= p {
				t.Errorf("%s: v%d is commit #%d (%s) after v%d of commit #%d (%s): want a later commit",
					cf, next.Version, n, short(next.Commit), prev.Version, p, short(prev.Commit))
				bad++
			}
		}
	}
	return bad
}

// TestTwoServesOneStream: issue 32, defect 1. An embedded serve and a
// second serve with --nats pointed at it follow one repository while
// commits arrive faster than either compiles; each config's versions must
// come from strictly later commits, whoever wrote them.
func TestTwoServesOneStream(t *testing.T) {
	repo, cfgs := smallRepo(t)
	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := func(cfg pipeline.Config) *pipeline.Pipeline {
		t.Helper()
		cfg.Repo, cfg.Branch, cfg.DataDir, cfg.Interval = repo.Dir, "main", t.TempDir(), 5*time.Millisecond
		if err := os.WriteFile(filepath.Join(cfg.DataDir, "signing.nk"), seed, 0o600); err != nil {
			t.Fatal(err)
		}
		p, err := pipeline.Start(ctx, cfg)
		if err != nil {
			t.Fatalf("start: %v", err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("run: %v", err)
			}
			p.Close()
		})
		return p
	}
	embedded := start(pipeline.Config{Listen: "127.0.0.1:0"})
	start(pipeline.Config{External: pipeline.External{NATS: embedded.ClientURL(), LeaseTTL: 2 * time.Second}})

	c := &commits{repo: repo, values: map[cuecast.ConfigPath]int{}, last: map[cuecast.ConfigPath]string{}}
	// Runs of changes to one config, about a compile apart: a tailer whose
	// poll began before a commit landed finds that config's latest made
	// by a commit it has not seen, when the other's poll began after.
	for i := range 100 {
		c.change(cfgs[i/25%2])
		time.Sleep(time.Duration(i*37%100) * time.Millisecond)
	}
	head := repo.Head()
	d := embedded.Distributor
	poll.Until(t, "the branch processed", poll.Patience, func() (bool, string) {
		st, err := embedded.Tailer.State(ctx)
		if err != nil {
			return false, err.Error()
		}
		return st.Cursor == head, "cursor at " + short(st.Cursor)
	})
	for _, cf := range cfgs[:2] {
		if v, err := d.Latest(ctx, cf); err != nil || v.Commit != c.last[cf] {
			t.Errorf("%s: latest v%d of commit %s (%v), want the last change %s", cf, v.Version, short(v.Commit), err, short(c.last[cf]))
		}
	}
	checkMonotonic(t, d, cfgs, firstParents(t, repo))
}
