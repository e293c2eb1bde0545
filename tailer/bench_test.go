package tailer_test

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cputime"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/tailer"
)

// synthRepo writes a config repo straight into a repository's object store
// (no work tree, no index), so thousands of commits take seconds: per commit
// one blob, the config's tree, its namespace's tree, the root tree and the
// commit.
type synthRepo struct {
	tb        testing.TB
	repo      *gittest.Repo
	s         storer.EncodedObjectStorer
	nss       int
	perNS     int
	values    []int
	cfgTrees  [][]object.TreeEntry // per namespace: its config entries
	rootFixed []object.TreeEntry   // cue.mod, cuecast.cue, lib
	head      plumbing.Hash
	when      time.Time
}

func newSynthRepo(tb testing.TB, nss, perNS int) *synthRepo {
	tb.Helper()
	repo := gittest.New(tb)
	sr := &synthRepo{tb: tb, repo: repo, s: repo.Git.Storer, nss: nss, perNS: perNS,
		values: make([]int, nss*perNS), when: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	manifest := "package manifest\n\n"
	for n := range nss {
		manifest += fmt.Sprintf("namespaces: ns%d: owners: [\"team-%d\"]\n", n, n)
	}
	sr.rootFixed = []object.TreeEntry{
		{Name: "cue.mod", Mode: filemode.Dir, Hash: sr.tree(object.TreeEntry{Name: "module.cue", Mode: filemode.Regular,
			Hash: sr.blob("module: \"example.com/t@v0\"\nlanguage: version: \"v0.17.0\"\n")})},
		{Name: "cuecast.cue", Mode: filemode.Regular, Hash: sr.blob(manifest)},
		{Name: "lib", Mode: filemode.Dir, Hash: sr.tree(object.TreeEntry{Name: "common", Mode: filemode.Dir,
			Hash: sr.tree(object.TreeEntry{Name: "common.cue", Mode: filemode.Regular, Hash: sr.blob("package common\n\nRegion: \"eu-west-1\"\n")})})},
	}
	sr.cfgTrees = make([][]object.TreeEntry, nss)
	for n := range nss {
		for i := range perNS {
			sr.cfgTrees[n] = append(sr.cfgTrees[n], object.TreeEntry{Name: fmt.Sprintf("c%d", i), Mode: filemode.Dir, Hash: sr.configTree(n, i)})
		}
	}
	sr.commit("initial")
	return sr
}

func (sr *synthRepo) blob(content string) plumbing.Hash {
	o := sr.s.NewEncodedObject()
	o.SetType(plumbing.BlobObject)
	w, err := o.Writer()
	if err != nil {
		sr.tb.Fatal(err)
	}
	w.Write([]byte(content))
	w.Close()
	h, err := sr.s.SetEncodedObject(o)
	if err != nil {
		sr.tb.Fatal(err)
	}
	return h
}

func (sr *synthRepo) tree(entries ...object.TreeEntry) plumbing.Hash {
	entries = append([]object.TreeEntry(nil), entries...)
	sort.Sort(object.TreeEntrySorter(entries))
	o := sr.s.NewEncodedObject()
	if err := (&object.Tree{Entries: entries}).Encode(o); err != nil {
		sr.tb.Fatal(err)
	}
	h, err := sr.s.SetEncodedObject(o)
	if err != nil {
		sr.tb.Fatal(err)
	}
	return h
}

// configTree is config i of namespace n: every fifth imports the library.
func (sr *synthRepo) configTree(n, i int) plumbing.Hash {
	name := fmt.Sprintf("c%d", i)
	src := config(name, i%5 == 0, sr.values[n*sr.perNS+i])
	return sr.tree(object.TreeEntry{Name: name + ".cue", Mode: filemode.Regular, Hash: sr.blob(src)})
}

func (sr *synthRepo) commit(msg string) {
	root := append([]object.TreeEntry(nil), sr.rootFixed...)
	for n := range sr.nss {
		root = append(root, object.TreeEntry{Name: fmt.Sprintf("ns%d", n), Mode: filemode.Dir, Hash: sr.tree(sr.cfgTrees[n]...)})
	}
	sr.when = sr.when.Add(time.Second)
	sig := object.Signature{Name: "Ada Lovelace", Email: "ada@example.com", When: sr.when}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: sr.tree(root...)}
	if !sr.head.IsZero() {
		c.ParentHashes = []plumbing.Hash{sr.head}
	}
	o := sr.s.NewEncodedObject()
	if err := c.Encode(o); err != nil {
		sr.tb.Fatal(err)
	}
	h, err := sr.s.SetEncodedObject(o)
	if err != nil {
		sr.tb.Fatal(err)
	}
	sr.head = h
	if err := sr.repo.Git.Storer.SetReference(plumbing.NewHashReference(plumbing.NewBranchReferenceName("main"), h)); err != nil {
		sr.tb.Fatal(err)
	}
}

// change commits a new value for config k (of nss*perNS).
func (sr *synthRepo) change(k int) {
	n, i := k/sr.perNS, k%sr.perNS
	sr.values[k]++
	sr.cfgTrees[n][i].Hash = sr.configTree(n, i)
	sr.commit(fmt.Sprintf("ns%d/c%d to %d", n, i, sr.values[k]))
}

func (sr *synthRepo) dir() string { return sr.repo.Dir }

// BenchmarkReplay replays b.N commits, each changing one config of a
// 500-config repo, through the real compiler, distributor and embedded NATS.
// The first commit (a full compile and 500 versions) is not timed.
// `go test -run '^$' -bench Replay -benchtime 10000x ./tailer/` is the
// BENCHMARKS.md figure.
func BenchmarkReplay(b *testing.B) {
	e := &env{t: b, ctx: b.Context(), log: slog.New(slog.DiscardHandler)}
	e.connect(natstest.Start(b))
	sr := newSynthRepo(b, 5, 100)
	dep := &timedDeployer{d: e.dist}
	tl, err := tailer.New(e.ctx, tailer.Config{Repo: sr.dir(), Logger: e.log}, e.js, e.dist, dep)
	if err != nil {
		b.Fatal(err)
	}
	if sum, err := tl.Poll(e.ctx); err != nil || sum.Versions != 500 {
		b.Fatalf("initial poll: %+v, %v", sum, err)
	}
	for k := range b.N {
		sr.change((k * 7) % 500)
	}
	dep.reset()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	cpu0 := cputime.Process()
	b.ResetTimer()
	start := time.Now()
	sum, err := tl.Poll(e.ctx)
	elapsed := time.Since(start)
	cpu := cputime.Process() - cpu0
	b.StopTimer()
	if err != nil || sum.Commits != b.N || sum.Versions != b.N {
		b.Fatalf("replay: %+v, %v; want %d commits and versions", sum, err, b.N)
	}
	var after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&after)
	deploys, inDeploy := dep.stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "commits/s")
	b.ReportMetric(float64(b.N)/(elapsed-inDeploy).Seconds(), "commits/s-excl-deploy")
	b.ReportMetric(float64(deploys), "deploys")
	// CPU of the whole process (tailer, compiler, distributor and the
	// embedded NATS server): on a shared box it says more than wall time.
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/commit")
	b.ReportMetric(inDeploy.Seconds(), "s-deploying")
	b.ReportMetric(float64(after.HeapAlloc)/(1<<20), "MiB-live-heap-after")
	b.ReportMetric(float64(after.Sys)/(1<<20), "MiB-sys")
}

// timedDeployer measures the wall time during which at least one deploy of
// the real distributor is in flight.
type timedDeployer struct {
	d      tailer.Deployer
	mu     sync.Mutex
	n      int
	active int
	since  time.Time
	spent  time.Duration
}

func (t *timedDeployer) Deploy(ctx context.Context, v cuecast.Version) error {
	t.mu.Lock()
	if t.active++; t.active == 1 {
		t.since = time.Now()
	}
	t.mu.Unlock()
	err := t.d.Deploy(ctx, v)
	t.mu.Lock()
	t.n++
	if t.active--; t.active == 0 {
		t.spent += time.Since(t.since)
	}
	t.mu.Unlock()
	return err
}

func (t *timedDeployer) reset() {
	t.mu.Lock()
	t.n, t.spent = 0, 0
	t.mu.Unlock()
}

func (t *timedDeployer) stats() (int, time.Duration) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.n, t.spent
}
