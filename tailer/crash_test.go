package tailer_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/natsserver"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/tailer"
)

// The crash child is this test binary re-executed with these variables set:
// it runs `serve`'s moving parts (embedded NATS in the store directory, the
// distributor, the tailer) over the repository until the cursor reaches the
// branch tip, printing one line per published version, and SIGKILLs itself
// after a given number of publishes when asked.
const (
	envChild      = "CUECAST_TAILER_CRASH_CHILD"
	envRepo       = "CUECAST_TAILER_CRASH_REPO"
	envStore      = "CUECAST_TAILER_CRASH_STORE"
	envCrashAfter = "CUECAST_TAILER_CRASH_AFTER"
)

// keepAll is a retention no crash test reaches.
const keepAll = 1 << 20

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

func crashChild() int {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "crash child:", err)
		return 1
	}
	srv, err := natsserver.Start(ctx, natsserver.Options{Dir: os.Getenv(envStore), Listen: "127.0.0.1:0"})
	if err != nil {
		return fail(err)
	}
	defer srv.Shutdown()
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return fail(err)
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(err)
	}
	// Keep every version: the check reads them all back (the default
	// retention of 100 per config would purge the oldest in a soak).
	d, err := distributor.New(ctx, nc, distributor.Options{Logger: log, Retain: keepAll})
	if err != nil {
		return fail(err)
	}
	// The store directory doubles as the data directory: the high-water
	// file is kept across the kills too, and a kill must never make the
	// tailer find the stream inconsistent with it.
	tl, err := tailer.New(ctx, tailer.Config{Repo: os.Getenv(envRepo), ID: "crash", Logger: log, DataDir: os.Getenv(envStore)}, js, d, d)
	if err != nil {
		return fail(err)
	}
	crashAfter, _ := strconv.Atoi(os.Getenv(envCrashAfter))
	published := 0
	tailer.SetAfterPublish(tl, func(v cuecast.Version) {
		fmt.Printf("published %s %d\n", v.Config, v.Version)
		if published++; published == crashAfter {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
		}
	})
	for {
		sum, err := tl.Poll(ctx)
		if err != nil {
			return fail(err)
		}
		st, err := tl.State(ctx)
		if err != nil {
			return fail(err)
		}
		if sum.Commits == 0 && st.Cursor != "" && len(st.Undeployed) == 0 {
			fmt.Println("done", st.Cursor)
			return 0
		}
	}
}

// TestCrash kills the tailer process (SIGKILL, NATS inside it) at random
// points of a replay, restarts it each time, and then checks that every
// config has versions 1..N with no gap or duplicate, each attributed to the
// commit the history says, and that the latest content is what HEAD
// compiles to. CUECAST_SOAK=1 runs the full 20 kills over 500 commits.
func TestCrash(t *testing.T) {
	t.Parallel()
	trials, commits, configs := 3, 60, 8
	if os.Getenv("CUECAST_SOAK") == "1" {
		trials, commits, configs = 20, 500, 20
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("CUECAST_CRASH_SEED"); s != "" {
		seed, _ = strconv.ParseUint(s, 10, 64)
	}
	t.Logf("seed %d (set CUECAST_CRASH_SEED to replay)", seed)
	rng := rand.New(rand.NewPCG(seed, 42))

	r := gittest.New(t)
	h := generateHistory(t, r, rng, commits, configs)
	store := t.TempDir()
	total := 0
	for _, vs := range h.want {
		total += len(vs)
	}
	t.Logf("history: %d commits, %d configs, %d versions expected", commits, len(h.want), total)

	var logs bytes.Buffer
	seen := 0
	for trial := range trials {
		// Spread the kills over what is left to publish.
		left := trials - trial
		k := 1 + rng.IntN(max(1, 2*(total-seen)/(left+1)))
		self := trial%2 == 0
		lines, done := runChild(t, r.Dir, store, k, self, &logs)
		seen += lines
		t.Logf("trial %d: killed after %d publishes (self=%v), done=%v", trial, lines, self, done)
	}
	if _, done := runChild(t, r.Dir, store, 0, false, &logs); !done {
		t.Fatalf("the last run did not reach the tip; its log:\n%s", logs.String())
	}

	srv := natstest.StartIn(t, store)
	nc := srv.Connect(t)
	d, err := distributor.New(t.Context(), nc, distributor.Options{Retain: keepAll})
	if err != nil {
		t.Fatal(err)
	}
	for _, cp := range slices.Sorted(maps.Keys(h.want)) {
		vs, err := d.Versions(t.Context(), cp)
		if err != nil {
			t.Errorf("versions of %s: %v", cp, err)
			continue
		}
		slices.Reverse(vs)
		var got []string
		for i, v := range vs {
			if v.Version != uint64(i+1) {
				t.Errorf("%s: version %d at position %d: a gap or a duplicate", cp, v.Version, i+1)
			}
			got = append(got, fmt.Sprintf("%s%s", v.Commit[:10], map[bool]string{true: "-", false: ""}[v.Deleted]))
		}
		if !slices.Equal(got, h.want[cp]) {
			t.Errorf("%s: versions by commit:\n got %v\nwant %v", cp, got, h.want[cp])
		}
	}
	checkAgainstHead(t, t.Context(), r.Dir, d)
	checkDeployed(t, t.Context(), d, slices.Sorted(maps.Keys(h.want)))
	if t.Failed() {
		t.Logf("child logs:\n%s", logs.String())
	}
}

// runChild runs one crash child. With k > 0 it dies after k publishes: by its
// own SIGKILL right after the k-th (self) or by the parent's as soon as it
// reads the k-th line, which lands at some later point. It returns how many
// publishes it reported and whether it finished.
func runChild(t *testing.T, repo, store string, k int, self bool, logs *bytes.Buffer) (int, bool) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	// A child killed mid-compile leaves its compiler's scratch directory
	// behind: in the test's own, not the machine's /tmp.
	cmd.Env = append(os.Environ(), envChild+"=1", envRepo+"="+repo, envStore+"="+store, "TMPDIR="+t.TempDir())
	if self && k > 0 {
		cmd.Env = append(cmd.Env, envCrashAfter+"="+strconv.Itoa(k))
	}
	var stderr iostreams.SyncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines, done := 0, false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "published "):
			lines++
			if !self && k > 0 && lines == k {
				cmd.Process.Kill()
			}
		case strings.HasPrefix(line, "done "):
			done = true
		}
	}
	err = cmd.Wait()
	fmt.Fprintf(logs, "--- child (k=%d self=%v): %d publishes, exit %v\n%s", k, self, lines, err, stderr.String())
	if err != nil && !killed(err) {
		t.Fatalf("crash child failed: %v\n%s", err, logs.String())
	}
	return lines, done
}

func killed(err error) bool {
	ee, ok := err.(*exec.ExitError)
	if !ok {
		return false
	}
	ws, ok := ee.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL
}

// history is a generated repository and, computed from the generator's
// model alone, the versions each config must end up with: "<commit[:10]>",
// with a "-" suffix for a tombstone.
type history struct {
	want map[cuecast.ConfigPath][]string
}

// generateHistory commits a random history: value changes, library changes
// (reaching the configs that import it), files that are not CUE, configs
// deleted and re-created, and commits that do not compile followed by their
// fix. The first commit is the whole repository.
func generateHistory(t *testing.T, r *gittest.Repo, rng *rand.Rand, commits, configs int) history {
	type cfg struct {
		exists  bool
		imports bool
		value   int
	}
	model := make(map[cuecast.ConfigPath]*cfg)
	var paths []cuecast.ConfigPath
	for i := range configs {
		cp := cuecast.ConfigPath(fmt.Sprintf("%s/c%d", []string{"pay", "web"}[i%2], i))
		model[cp] = &cfg{exists: true, imports: i%3 == 0, value: 1}
		paths = append(paths, cp)
	}
	region, counter := 0, 1
	src := func(cp cuecast.ConfigPath) string {
		return config(cp.Name(), model[cp].imports, model[cp].value)
	}
	file := func(cp cuecast.ConfigPath) string { return string(cp) + "/" + cp.Name() + ".cue" }
	libFile := func() string { return fmt.Sprintf("package common\n\nRegion: \"r%d\"\n", region) }
	// key is what a config's output depends on.
	key := func(cp cuecast.ConfigPath) string {
		c := model[cp]
		if !c.exists {
			return ""
		}
		if c.imports {
			return fmt.Sprintf("%d|r%d", c.value, region)
		}
		return strconv.Itoa(c.value)
	}

	published := make(map[cuecast.ConfigPath]string) // key of the latest version; "" = none or tombstone
	want := make(map[cuecast.ConfigPath][]string)
	record := func(commit string) {
		for _, cp := range paths {
			k := key(cp)
			switch {
			case k != "" && k != published[cp]:
				want[cp] = append(want[cp], commit[:10])
			case k == "" && published[cp] != "":
				want[cp] = append(want[cp], commit[:10]+"-")
			}
			published[cp] = k
		}
	}

	files := baseRepo()
	delete(files, "pay/a/a.cue")
	delete(files, "pay/b/b.cue")
	delete(files, "web/c/c.cue")
	files["lib/common/common.cue"] = libFile()
	for _, cp := range paths {
		files[file(cp)] = src(cp)
	}
	record(r.CommitFiles("initial", files))

	var broken cuecast.ConfigPath
	for i := 1; i < commits; i++ {
		counter++
		cp := paths[rng.IntN(len(paths))]
		c := model[cp]
		if broken != "" {
			// Fix the broken config (it gets a new value) and go on.
			model[broken].value = counter
			sha := r.CommitFiles(fmt.Sprintf("%d: fix %s", i, broken), map[string]string{file(broken): src(broken)})
			broken = ""
			record(sha)
			continue
		}
		switch p := rng.IntN(100); {
		case p < 55 && c.exists:
			c.value = counter
			record(r.CommitFiles(fmt.Sprintf("%d: %s to %d", i, cp, counter), map[string]string{file(cp): src(cp)}))
		case p < 65:
			region++
			record(r.CommitFiles(fmt.Sprintf("%d: region r%d", i, region), map[string]string{"lib/common/common.cue": libFile()}))
		case p < 75:
			r.CommitFiles(fmt.Sprintf("%d: docs", i), map[string]string{"README.md": fmt.Sprintf("# configs %d\n", counter)})
			// no record: nothing may change
		case p < 83 && c.exists:
			broken = cp
			sha := r.CommitFiles(fmt.Sprintf("%d: break %s", i, cp), map[string]string{file(cp): "package " + cp.Name() + "\n\nvalue: {\n"})
			_ = sha // rejected: publishes nothing
		case p < 92 && c.exists:
			c.exists = false
			r.Remove(string(cp))
			record(r.Commit(fmt.Sprintf("%d: delete %s", i, cp)))
		case !c.exists:
			c.exists, c.value = true, counter
			record(r.CommitFiles(fmt.Sprintf("%d: create %s", i, cp), map[string]string{file(cp): src(cp)}))
		default:
			c.value = counter
			record(r.CommitFiles(fmt.Sprintf("%d: %s to %d", i, cp, counter), map[string]string{file(cp): src(cp)}))
		}
	}
	if broken != "" {
		model[broken].value = counter + 1
		record(r.CommitFiles("fix "+string(broken), map[string]string{file(broken): src(broken)}))
	}
	for cp, vs := range want {
		if len(vs) == 0 {
			delete(want, cp)
		}
	}
	return history{want: want}
}

// checkDeployed checks that every cohort of every config points at the
// config's latest version: deploys deferred to the end of a batch must
// survive a crash too.
func checkDeployed(t *testing.T, ctx context.Context, d *distributor.Distributor, configs []cuecast.ConfigPath) {
	t.Helper()
	for _, cp := range configs {
		latest, err := d.Latest(ctx, cp)
		if err != nil {
			t.Errorf("latest of %s: %v", cp, err)
			continue
		}
		for _, bucket := range []int{0, 42, cuecast.Buckets - 1} {
			p, err := d.Pointer(ctx, cp, bucket)
			if err != nil || p.Version != latest.Version {
				t.Errorf("%s cohort %d: pointer %+v, %v; want version %d", cp, bucket, p, err, latest.Version)
			}
		}
	}
}
