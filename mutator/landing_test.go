package mutator_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/soak"
	"github.com/cuecast/cuecast/mutator"
)

const landingFile = "ns/counters/counters.cue"

// landingWriters is how many writers set their own field and how many race
// on one value: 50 and 50 with CUECAST_SOAK=1 (make soak), 8 and 8
// otherwise. Each request costs a recompile and a commit, serially: the
// 100 took 58 s under -race on the shared 2-core box, a tenth of make
// test's budget.
func landingWriters() (fields, races int) {
	return soak.Length(8, 50), soak.Length(8, 50)
}

// landingRepo is a repo whose config ns/counters has fields f0… and
// shared, all 0.
func landingRepo(t *testing.T, landingFields int) *gittest.Repo {
	t.Helper()
	var b strings.Builder
	b.WriteString("// Counters every writer changes at once.\npackage counters\n\n")
	for i := range landingFields {
		fmt.Fprintf(&b, "f%d: 0 // field %d\n", i, i)
	}
	b.WriteString("\nshared: 0\n")
	r := gittest.New(t)
	r.CommitFiles("counters", map[string]string{
		"cue.mod/module.cue": "module: \"example.com/landing@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: ns: owners: [\"team\"]\n",
		landingFile:          b.String(),
	})
	return r
}

// TestLandingStrip sends concurrent requests through one Mutator:
// landingFields writers each set their own field of one file (none may be
// lost), and landingRaces writers set the same value, each expecting the
// value all of them read (exactly one wins; every other gets a conflict
// naming the winner's value). The history is linear, one commit per
// success, and the final file equals a serial replay of those commits'
// requests, in commit order, on a fresh copy of the repo.
func TestLandingStrip(t *testing.T) {
	t.Parallel()
	landingFields, landingRaces := landingWriters()
	r := landingRepo(t, landingFields)
	base := r.Head()
	m := mutator.New(r.Dir, mutator.Options{})
	ctx := context.Background()
	reqs := make([]mutator.Request, 0, landingFields+landingRaces)
	for i := range landingFields {
		reqs = append(reqs, counterReq(fmt.Sprintf("f%d", i), fmt.Sprint(i+1), ""))
	}
	for i := range landingRaces {
		reqs = append(reqs, counterReq("shared", fmt.Sprint(100+i), "0"))
	}
	results := make([]*mutator.Result, len(reqs))
	errs := make([]error, len(reqs))
	var wg sync.WaitGroup
	for i := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = m.Set(ctx, reqs[i])
		}()
	}
	wg.Wait()

	byCommit := map[string]int{}
	winner := -1
	for i, err := range errs {
		var ce *mutator.ConflictError
		switch {
		case err == nil:
			byCommit[results[i].Commit] = i
			if i >= landingFields {
				if winner >= 0 {
					t.Errorf("requests %d and %d both won the race on shared", winner, i)
				}
				winner = i
			}
		case i < landingFields:
			t.Errorf("f%d: %v (an update lost)", i, err)
		case !errors.As(err, &ce):
			t.Errorf("racer %d: %v, want a conflict", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	want := reqs[winner].Set[0].Value
	for i := landingFields; i < len(reqs); i++ {
		var ce *mutator.ConflictError
		if i != winner && (!errors.As(errs[i], &ce) || string(ce.Current) != want || string(ce.Expected) != "0") {
			t.Errorf("racer %d: %v; want a conflict naming the current value %s", i, errs[i], want)
		}
	}

	// Linear history: one commit per success, each on the one before.
	order := r.Landed(base, byCommit)

	// Serial replay.
	replay := landingRepo(t, landingFields)
	rm := mutator.New(replay.Dir, mutator.Options{})
	for _, i := range order {
		if _, err := rm.Set(ctx, reqs[i]); err != nil {
			t.Fatalf("replay of request %d: %v", i, err)
		}
	}
	got := readFile(t, filepath.Join(r.Dir, landingFile))
	if serial := readFile(t, filepath.Join(replay.Dir, landingFile)); got != serial {
		t.Errorf("concurrent result differs from the serial replay:\n%s\n---\n%s", got, serial)
	}
	if last := landingFields - 1; !strings.Contains(got, fmt.Sprintf("f%d: %d // field %d\n", last, last+1, last)) || !strings.Contains(got, "shared: "+want+"\n") {
		t.Errorf("final file:\n%s", got)
	}
	checkTrailers(t, r, plumbing.NewHash(r.Head()))
}

func counterReq(path, value, expect string) mutator.Request {
	req := mutator.Request{
		Configs: []cuecast.ConfigPath{"ns/counters"}, Set: []mutator.Assignment{{Path: path, Value: value}},
		Reason: "count", Identity: alice, Mode: mutator.ModeCommit, Tool: "landing test",
	}
	if expect != "" {
		req.Expect = []mutator.Assignment{{Path: path, Value: expect}}
	}
	return req
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// checkTrailers checks that a commit names who asked and the tool.
func checkTrailers(t *testing.T, r *gittest.Repo, h plumbing.Hash) {
	t.Helper()
	c, err := r.Git.CommitObject(h)
	if err != nil {
		t.Fatal(err)
	}
	if !hasTrailers(c) || c.Author.Name != alice.Name || c.Author.Email != alice.Email {
		t.Errorf("commit %s by %s <%s>:\n%s\nwant Alice's, with the trailers", h, c.Author.Name, c.Author.Email, c.Message)
	}
}

func hasTrailers(c *object.Commit) bool {
	return strings.Contains(c.Message, "\n"+mutator.RequestedByTrailer+": Alice <alice@example.com>\n") &&
		strings.Contains(c.Message, "\n"+mutator.Trailer+": ")
}

// TestTwoMutators: two Mutators on one repository (two processes) are not
// serialised with each other; a request whose branch moved under it fails
// with ErrConflict and writes nothing, and every request that succeeded is
// on the branch. Which ones race is up to the scheduler; what must hold
// holds either way.
func TestTwoMutators(t *testing.T) {
	t.Parallel()
	const n = 6
	r := landingRepo(t, n)
	errs := setFromTwo(r.Dir, n, func(i int) mutator.Request {
		req := counterReq(fmt.Sprintf("f%d", i), fmt.Sprint(i+1), "")
		req.Mode, req.Branch = mutator.ModeBranch, "side" // not checked out
		return req
	})
	ref, err := r.Git.Reference(plumbing.NewBranchReferenceName("side"), true)
	if err != nil {
		t.Fatal(err)
	}
	c, err := r.Git.CommitObject(ref.Hash())
	if err != nil {
		t.Fatal(err)
	}
	f, err := c.File(landingFile)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Contents()
	if err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		want := fmt.Sprintf("f%d: %d // field %d\n", i, i+1, i)
		switch {
		case err == nil && !strings.Contains(got, want):
			t.Errorf("f%d succeeded but is not on the branch:\n%s", i, got)
		case err != nil && !errors.Is(err, mutator.ErrConflict):
			t.Errorf("f%d: %v, want success or a conflict", i, err)
		case err != nil && strings.Contains(got, want):
			t.Errorf("f%d failed (%v) but is on the branch", i, err)
		}
	}
}

// TestTwoMutatorsKeepWorkTree is TestTwoMutators on the checked-out branch
// (commit mode): besides the branch, each landed change writes the work
// tree and the index. Two writers doing that at once could write the index
// over each other (one change's file staged at its old content: a later
// `git commit` would undo it), leave the work tree at an older change than
// HEAD, or refuse a request for "uncommitted changes" that were only the
// other writer's change on its way in. Every request ends in a success or
// a conflict; at the end the work tree and the index are HEAD's.
func TestTwoMutatorsKeepWorkTree(t *testing.T) {
	t.Parallel()
	const n = 6
	for round := range 5 {
		r := landingRepo(t, n)
		errs := setFromTwo(r.Dir, n, func(i int) mutator.Request {
			return counterReq(fmt.Sprintf("f%d", i), fmt.Sprint(round*10+i+1), "")
		})
		for i, err := range errs {
			if err != nil && !errors.Is(err, mutator.ErrConflict) {
				t.Errorf("round %d, f%d: %v, want success or a conflict", round, i, err)
			}
		}
		if st := r.Status(); !st.IsClean() {
			t.Errorf("round %d: the work tree or index is not HEAD's:\n%s", round, st)
		}
	}
}

// setFromTwo makes n requests at once, alternately through two Mutators
// on the repository at dir (two writers, as two processes are), and
// returns each request's error.
func setFromTwo(dir string, n int, req func(i int) mutator.Request) []error {
	ms := []*mutator.Mutator{mutator.New(dir, mutator.Options{}), mutator.New(dir, mutator.Options{})}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { _, errs[i] = ms[i%2].Set(context.Background(), req(i)) })
	}
	wg.Wait()
	return errs
}
