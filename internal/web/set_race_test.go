package web

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/soak"
	"github.com/cuecast/cuecast/mutator"
)

// raceWriters is how many requests of TestSetAPIConcurrent set a value of
// their own and how many race on one: every request costs an evaluation
// and each success a recompile and a commit, serially, twice with the
// replay, so make test sends 100 requests with 7 successes and the soak
// (CUECAST_SOAK=1) 100 with 51.
func raceWriters() (own, race int) {
	return soak.Length(6, 50), soak.Length(94, 50)
}

// raceRepo has two configs, ns/a and ns/b, with fields v0… at 0, and
// ns/a's shared at 0.
func raceRepo(t *testing.T, fields int) *gittest.Repo {
	t.Helper()
	files := map[string]string{
		"cue.mod/module.cue": "module: \"example.com/race@v0\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: ns: owners: [\"team\"]\n",
	}
	for _, cfg := range []string{"a", "b"} {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\n// Every writer's own value.\n", cfg)
		for i := range fields {
			fmt.Fprintf(&b, "v%d: 0\n", i)
		}
		if cfg == "a" {
			b.WriteString("\n// The value they race on.\nshared: 0 // keep this comment\n")
		}
		files["ns/"+cfg+"/"+cfg+".cue"] = b.String()
	}
	r := gittest.New(t)
	r.CommitFiles("race", files)
	return r
}

// TestSetAPIConcurrent sends 100 concurrent set requests through the HTTP
// API, all expecting the value they read: some set a value of their own
// (alternately in ns/a and ns/b: none may be lost or reported as a
// conflict), the rest race on one value (exactly one wins; every other
// gets a 409 naming the winner's value). The history is one commit per
// success, each on the one before, and replaying the successes serially,
// in commit order, through the API on a fresh copy of the repo gives the
// same files.
func TestSetAPIConcurrent(t *testing.T) {
	t.Parallel()
	own, race := raceWriters()
	fields := (own + 1) / 2
	s := serveSet(t, raceRepo(t, fields), mutator.Options{})
	base := s.repo.Head()
	var bodies []obj
	for i := range own {
		cfg := []string{"ns/a", "ns/b"}[i%2]
		bodies = append(bodies, setReq(cfg, fmt.Sprintf("v%d", i/2), fmt.Sprint(i+1), obj{"expect": []obj{{"path": fmt.Sprintf("v%d", i/2), "value": "0"}}}))
	}
	for i := range race {
		bodies = append(bodies, setReq("ns/a", "shared", fmt.Sprint(1000+i), obj{"expect": []obj{{"path": "shared", "value": "0"}}}))
	}
	codes := make([]int, len(bodies))
	results := make([]mutator.Result, len(bodies))
	errs := make([]setErrorBody, len(bodies))
	var wg sync.WaitGroup
	for i, b := range bodies {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var raw rawAnswer
			code, err := s.do("/api/set", operatorToken, b, &raw)
			if err != nil {
				t.Errorf("request %d: %v", i, err)
				return
			}
			codes[i] = code
			raw.decode(t, code, &results[i], &errs[i])
		}()
	}
	wg.Wait()

	byCommit := map[string]int{}
	winner := -1
	for i, code := range codes {
		switch {
		case code == 200:
			byCommit[results[i].Commit] = i
			if i >= own {
				if winner >= 0 {
					t.Errorf("requests %d and %d both won the race", winner, i)
				}
				winner = i
			}
		case i < own:
			t.Errorf("own value %d: %d %s (an update lost)", i, code, errs[i].Error)
		case code != 409:
			t.Errorf("racer %d: %d %s, want 409", i, code, errs[i].Error)
		}
	}
	if winner < 0 {
		t.Fatal("no racer won")
	}
	want := fmt.Sprint(1000 + winner - own)
	for i := own; i < len(bodies); i++ {
		if c := errs[i].Conflict; i != winner && (c == nil || string(c.Current) != want || string(c.Expected) != "0" || c.Path != "shared") {
			t.Errorf("racer %d: %+v; want a conflict naming the current value %s", i, errs[i], want)
		}
	}

	order := s.repo.Landed(base, byCommit)
	if len(order) != own+1 || len(byCommit) != own+1 {
		t.Fatalf("%d commits on main, %d successes, want %d", len(order), len(byCommit), own+1)
	}

	replay := serveSet(t, raceRepo(t, fields), mutator.Options{})
	for _, i := range order {
		if code := replay.post(t, "/api/set", operatorToken, bodies[i], nil); code != 200 {
			t.Fatalf("replay of request %d: %d", i, code)
		}
	}
	for _, f := range []string{"ns/a/a.cue", "ns/b/b.cue"} {
		got, serial := readRepoFile(t, s.repo, f), readRepoFile(t, replay.repo, f)
		if got != serial {
			t.Errorf("%s differs from the serial replay:\n%s\n---\n%s", f, got, serial)
		}
		if f == "ns/a/a.cue" && !strings.Contains(got, "shared: "+want+" // keep this comment\n") {
			t.Errorf("%s:\n%s", f, got)
		}
	}
}

// rawAnswer keeps an answer to decode once its status is known.
type rawAnswer struct{ json []byte }

func (r *rawAnswer) UnmarshalJSON(b []byte) error {
	r.json = append([]byte(nil), b...)
	return nil
}

func (r *rawAnswer) decode(t *testing.T, code int, res *mutator.Result, e *setErrorBody) {
	var err error
	if code == 200 {
		err = json.Unmarshal(r.json, res)
	} else {
		err = json.Unmarshal(r.json, e)
	}
	if err != nil {
		t.Errorf("answer %d %s: %v", code, r.json, err)
	}
}

func readRepoFile(t *testing.T, r *gittest.Repo, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
