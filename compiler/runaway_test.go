package compiler_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// slowConfig is a config that takes about two seconds to evaluate under
// -race on 2 cores, far more than the limit the tests below give it (50 ms)
// and the compiles they run while it does (~40 ms each), and no more: every
// test waits for it to end, and it burns a core until then. comment changes
// its inputs, not its cost.
func slowConfig(comment string) *fstest.MapFile {
	return &fstest.MapFile{Data: []byte(`package slow

import "list"

// ` + comment + `
n: len([for a in list.Range(0, 350, 1) for b in list.Range(0, 350, 1) if a*b < 0 {a}])
`)}
}

// errorOf returns the error reported for cp, failing when there is none.
func errorOf(t *testing.T, res *compiler.Result, cp cuecast.ConfigPath) compiler.Error {
	t.Helper()
	for _, e := range res.Errors {
		if e.Config == cp {
			return e
		}
	}
	t.Fatalf("no error for %s; errors %v, outputs %v", cp, res.Errors, slices.Sorted(maps.Keys(res.Outputs)))
	return compiler.Error{}
}

func compileWith(t *testing.T, fsys fstest.MapFS, rw *compiler.Runaways) *compiler.Result {
	t.Helper()
	// The manifest and schemas get a minute, so that only the configs can
	// time out on a loaded machine (see TestTimeout).
	opts := compiler.Options{FS: fsys, Timeout: 50 * time.Millisecond, SharedTimeout: time.Minute, Workers: 1, Runaways: rw}
	res, err := compiler.Compile(context.Background(), "runaway", opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// TestRunawayPerConfig: a config that times out leaves one evaluation
// running in the background, and no more however often it is compiled
// again: while that runs, the config is refused without being evaluated,
// whatever changed; once it ended, the same inputs are refused again
// without being evaluated, and a fixed config compiles. Before Runaways,
// every compile abandoned one more evaluation (Running would be 3 after
// the third) and each waited for the full limit.
func TestRunawayPerConfig(t *testing.T) {
	rw := compiler.NewRunaways(2)
	// Left running, the evaluations would slow the tests after this one.
	t.Cleanup(func() { <-rw.Idle() })
	slow, _ := loadCase(t, "testdata/ok-base")
	slow["web/slow/slow.cue"] = slowConfig("first")

	res := compileWith(t, slow, rw)
	if e := errorOf(t, res, "web/slow"); e.ID != compiler.IDConfigTimeout || !strings.Contains(e.Message, "did not finish within 50ms") {
		t.Fatalf("first compile: %v, want a config/timeout", e)
	}
	if n := rw.Running(); n != 1 {
		t.Fatalf("after the timeout %d abandoned evaluations run, want 1", n)
	}

	edited := maps.Clone(slow)
	edited["web/slow/slow.cue"] = slowConfig("second")
	for i, fsys := range []fstest.MapFS{slow, edited} {
		res := compileWith(t, fsys, rw)
		e := errorOf(t, res, "web/slow")
		if e.ID != compiler.IDConfigTimeout || !strings.Contains(e.Message, "web/slow was not evaluated: its previous evaluation, abandoned at the time limit, is still running") {
			t.Errorf("compile %d while the first runs: %v, want it refused as still running", i+2, e)
		}
		if _, ok := res.Outputs["web/site"]; !ok {
			t.Errorf("compile %d: web/site not compiled beside the refused config: %v", i+2, res.Errors)
		}
		if n := rw.Running(); n != 1 {
			t.Errorf("after compile %d, %d abandoned evaluations run, want 1", i+2, n)
		}
	}

	<-rw.Idle()
	res = compileWith(t, slow, rw)
	if e := errorOf(t, res, "web/slow"); e.ID != compiler.IDConfigTimeout || !strings.Contains(e.Message, "web/slow was not evaluated: nothing it reads has changed since its evaluation exceeded the time limit") {
		t.Errorf("unchanged config after its evaluation ended: %v, want it refused as unchanged", e)
	}
	if n := rw.Running(); n != 0 {
		t.Errorf("unchanged config was evaluated: %d abandoned evaluations run, want 0", n)
	}

	fixed := maps.Clone(slow)
	fixed["web/slow/slow.cue"] = &fstest.MapFile{Data: []byte("package slow\n\nn: 0\n")}
	res = compileWith(t, fixed, rw)
	if _, ok := res.Outputs["web/slow"]; !ok || !res.OK() {
		t.Errorf("fixed config: outputs %v, errors %v; want it compiled", slices.Sorted(maps.Keys(res.Outputs)), res.Errors)
	}
}

// TestRunawayLimit: once the limit of abandoned evaluations runs, every
// other config is refused until one ends, rather than abandoned too.
func TestRunawayLimit(t *testing.T) {
	rw := compiler.NewRunaways(2)
	// Left running, the evaluations would slow the tests after this one.
	t.Cleanup(func() { <-rw.Idle() })
	fsys, _ := loadCase(t, "testdata/ok-base")
	for i := range 3 {
		fsys[fmt.Sprintf("web/runaway%d/slow.cue", i)] = slowConfig("")
	}
	res := compileWith(t, fsys, rw)
	for _, cp := range []cuecast.ConfigPath{"web/runaway0", "web/runaway1"} {
		if e := errorOf(t, res, cp); !strings.Contains(e.Message, "did not finish within") {
			t.Errorf("%s: %v, want a timeout", cp, e)
		}
	}
	for _, cp := range []cuecast.ConfigPath{"web/runaway2", "web/site"} {
		if e := errorOf(t, res, cp); e.ID != compiler.IDConfigTimeout || !strings.Contains(e.Message, "2 abandoned evaluations of configs that exceeded the time limit are still running") {
			t.Errorf("%s: %v, want it refused at the limit", cp, e)
		}
	}
	if n := rw.Running(); n != 2 {
		t.Errorf("%d abandoned evaluations run, want 2", n)
	}
}
