package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nkeys"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/poll"
)

// replica is one serve process against a shared NATS server.
type replica struct {
	p      *pipeline.Pipeline
	cancel context.CancelFunc
	done   chan error
}

func startReplica(t *testing.T, repo *gittest.Repo, url, id string, seed []byte) *replica {
	t.Helper()
	data := t.TempDir()
	// Replicas sign with one key, so clients trust either.
	if err := os.WriteFile(filepath.Join(data, "signing.nk"), seed, 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p, err := pipeline.Start(ctx, pipeline.Config{
		Repo:     repo.Dir,
		Branch:   "main",
		DataDir:  data,
		Interval: 20 * time.Millisecond,
		External: pipeline.External{NATS: url, LeaseTTL: time.Second, ReplicaID: id},
	})
	if err != nil {
		cancel()
		t.Fatalf("start replica %s: %v", id, err)
	}
	r := &replica{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.cancel(); <-r.done; p.Close() })
	return r
}

// smallRepo is four configs in two namespaces; value makes one differ.
func smallRepo(t *testing.T) (*gittest.Repo, []cuecast.ConfigPath) {
	repo := gittest.New(t)
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: pay: owners: [\"team-pay\"]\nnamespaces: web: owners: [\"team-web\"]\n",
	}
	cfgs := []cuecast.ConfigPath{"pay/a", "pay/b", "web/c", "web/d"}
	for _, c := range cfgs {
		files[string(c)+"/c.cue"] = fmt.Sprintf("package %s\n\nvalue: 0\n", c.Name())
	}
	repo.CommitFiles("Initial configs", files)
	return repo, cfgs
}

func TestReplicaTakeoverDuringReplay(t *testing.T) {
	t.Parallel()
	repo, cfgs := smallRepo(t)
	// 200 commits, each changing one config: 50 new versions per config.
	commits := map[cuecast.ConfigPath][]string{}
	for i := 1; i <= 200; i++ {
		c := cfgs[i%len(cfgs)]
		sha := repo.CommitFiles(fmt.Sprintf("%s: value %d", c, i), map[string]string{
			string(c) + "/c.cue": fmt.Sprintf("package %s\n\nvalue: %d\n", c.Name(), i),
		})
		commits[c] = append(commits[c], sha)
	}
	head := repo.Head()

	kp, err := nkeys.CreateAccount()
	if err != nil {
		t.Fatal(err)
	}
	seed, _ := kp.Seed()
	srv := natstest.Start(t)
	a := startReplica(t, repo, srv.ClientURL(), "a", seed)
	b := startReplica(t, repo, srv.ClientURL(), "b", seed)

	// Kill whichever holds the lease once it is part-way through.
	var active, survivor *replica
	var cursorAtKill string
	poll.Until(t, "an active replica part-way through the replay", 30*time.Second, func() (bool, string) {
		for _, r := range []*replica{a, b} {
			vs, err := r.p.Distributor.Versions(context.Background(), cfgs[0])
			if err == nil && len(vs) >= 5 {
				holder, _, _ := r.p.Lease.Holder(context.Background())
				if holder == "a" {
					active, survivor = a, b
				} else {
					active, survivor = b, a
				}
				return true, ""
			}
		}
		return false, "no versions yet"
	})
	st, _ := active.p.Tailer.State(context.Background())
	cursorAtKill = st.Cursor
	// Abruptly: the connection goes first, so the lease is not released and
	// the survivor must wait for it to expire.
	active.p.NC.Close()
	active.cancel()
	<-active.done
	active.done <- nil // for Cleanup
	if cursorAtKill == head {
		t.Fatalf("the active replica had finished the replay before it was killed")
	}

	poll.Until(t, "the survivor finishing the replay", 60*time.Second, func() (bool, string) {
		st, err := survivor.p.Tailer.State(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return st.Cursor == head, "at " + st.Cursor
	})
	for _, c := range cfgs {
		vs, err := survivor.p.Distributor.Versions(context.Background(), c)
		if err != nil {
			t.Fatalf("versions of %s: %v", c, err)
		}
		want := append([]string{""}, commits[c]...) // version 1 is the initial commit
		if len(vs) != len(want) {
			t.Errorf("%s: %d versions, want %d", c, len(vs), len(want))
			continue
		}
		for i, v := range vs { // newest first
			n := uint64(len(vs) - i)
			if v.Version != n {
				t.Errorf("%s: version %d at position %d, want %d (gap or duplicate)", c, v.Version, i, n)
			}
			if n > 1 && v.Commit != want[n-1] {
				t.Errorf("%s@%d: commit %s, want %s", c, n, v.Commit, want[n-1])
			}
		}
	}
	t.Logf("killed the active replica at commit %s of %s", short(cursorAtKill), short(head))
}

func short(sha string) string {
	if len(sha) > 10 {
		return sha[:10]
	}
	return sha
}
