package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/gittest"
)

// runJSON runs a command that reports with --output json and decodes its
// stdout into v, failing the test on an exit status other than 0 or on
// stdout that is not one JSON document.
func runJSON(t *testing.T, env map[string]string, v any, args ...string) {
	t.Helper()
	code, out, errOut := runEnv(t.Context(), env, append(args, "--output", "json")...)
	if code != 0 {
		t.Fatalf("%v --output json: exit %d, stdout %q, stderr %q", args, code, out, errOut)
	}
	dec := json.NewDecoder(strings.NewReader(out.String()))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%v --output json: stdout %q: %v", args, out, err)
	}
	if dec.More() {
		t.Fatalf("%v --output json: stdout %q holds more than one JSON document", args, out)
	}
}

// TestKeysOutputJSON: keys new and keys retire report with --output json
// what their text says (README: commands that report take it).
func TestKeysOutputJSON(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	var first, second struct {
		PublicKey   string   `json:"public_key"`
		SeedFile    string   `json:"seed_file"`
		TrustedKeys string   `json:"trusted_keys_file"`
		Keys        []string `json:"keys"`
	}
	runJSON(t, nil, &first, "keys", "new", "--data", data)
	seed := filepath.Join(data, "second.nk")
	runJSON(t, nil, &second, "keys", "new", "--data", data, "--out", seed)
	trust := filepath.Join(data, "trusted-keys")
	if second.SeedFile != seed || second.TrustedKeys != trust || !slices.Equal(second.Keys, []string{first.PublicKey, second.PublicKey}) {
		t.Errorf("keys new: %+v; want seed %s, file %s listing %s and the new key", second, seed, trust, first.PublicKey)
	}
	if _, err := os.Stat(seed); err != nil {
		t.Errorf("keys new reported seed %s: %v", second.SeedFile, err)
	}
	var retired struct {
		Retired     string   `json:"retired"`
		TrustedKeys string   `json:"trusted_keys_file"`
		Keys        []string `json:"keys"`
	}
	runJSON(t, nil, &retired, "keys", "retire", first.PublicKey, "--data", data)
	if retired.Retired != first.PublicKey || retired.TrustedKeys != trust || !slices.Equal(retired.Keys, []string{second.PublicKey}) {
		t.Errorf("keys retire: %+v; want %s retired from %s, %s left", retired, first.PublicKey, trust, second.PublicKey)
	}
	if code, _, errOut := run(t.Context(), "keys", "retire", second.PublicKey, "--data", data, "--output", "yaml"); code != cli.ExitUsage {
		t.Errorf("keys retire --output yaml: exit %d, stderr %q; want %d", code, errOut, cli.ExitUsage)
	}
}

// revertJSON is `cuecast revert --output json`.
type revertJSON struct {
	Commit      string `json:"commit"`
	Reverted    string `json:"reverted"`
	Branch      string `json:"branch"`
	Subject     string `json:"subject"`
	Pushed      bool   `json:"pushed"`
	Remote      string `json:"remote"`
	PullRequest *struct {
		Number int    `json:"number"`
		URL    string `json:"url"`
	} `json:"pull_request"`
}

// TestRevertOutputJSON: revert reports the commit it made, where, and the
// push and pull request, with --output json.
func TestRevertOutputJSON(t *testing.T) {
	t.Parallel()
	repo := gittest.New(t)
	repo.CommitFiles("base", map[string]string{"payments/checkout/checkout.cue": "a: 1\n", "payments/other/other.cue": "b: 1\n"})
	first := repo.CommitFiles("checkout a=2", map[string]string{"payments/checkout/checkout.cue": "a: 2\n"})
	repo.Bare()
	var local revertJSON
	runJSON(t, nil, &local, "revert", first, "--repo", repo.Dir)
	if local.Commit != repo.Head() || local.Reverted != first || local.Branch != "main" || local.Subject != `Revert "checkout a=2"` || local.Pushed || local.PullRequest != nil {
		t.Errorf("revert: %+v; want commit %s on main reverting %s, not pushed", local, repo.Head(), first)
	}

	second := repo.CommitFiles("other b=2", map[string]string{"payments/other/other.cue": "b: 2\n"})
	var pushed revertJSON
	runJSON(t, nil, &pushed, "revert", second, "--repo", repo.Dir, "--push")
	if pushed.Commit != repo.Head() || !pushed.Pushed || pushed.Remote != "origin" || pushed.PullRequest != nil {
		t.Errorf("revert --push: %+v; want %s pushed to origin", pushed, repo.Head())
	}

	gh := newFakePulls(t)
	third := repo.CommitFiles("checkout a=3", map[string]string{"payments/checkout/checkout.cue": "a: 3\n"})
	var pr revertJSON
	runJSON(t, map[string]string{"GITHUB_TOKEN": "tok"}, &pr, "revert", third, "--repo", repo.Dir,
		"--github-pr", "--github-repo", "acme/configs", "--github-api-url", gh.URL)
	if pr.Branch != "cuecast/revert-"+cuecast.ShortCommit(third) || !pr.Pushed || pr.PullRequest == nil ||
		pr.PullRequest.Number != 7 || pr.PullRequest.URL != "https://github.example/acme/configs/pull/7" {
		t.Errorf("revert --github-pr: %+v; want the branch pushed and pull request #7", pr)
	}
}

// TestRepairOutputJSON: repair reports the commit it rebuilt from and each
// config it renumbered or published, with --output json.
func TestRepairOutputJSON(t *testing.T) {
	t.Parallel()
	repo, data := lostStore(t)
	var rep struct {
		Commit     string `json:"commit"`
		Renumbered []struct {
			Config    string `json:"config"`
			Stored    uint64 `json:"stored"`
			Published uint64 `json:"published"`
			Version   uint64 `json:"version"`
			Deleted   bool   `json:"deleted"`
		} `json:"renumbered"`
		Published []struct {
			Config  string `json:"config"`
			Version uint64 `json:"version"`
		} `json:"published"`
	}
	runJSON(t, nil, &rep, "repair", "--repo", repo.Dir, "--data", data, "--reason", "test", "--log-level", "error")
	if rep.Commit != repo.Head() || rep.Published == nil {
		t.Errorf("repair: commit %s, published %v; want %s and a list", rep.Commit, rep.Published, repo.Head())
	}
	found := false
	for _, r := range rep.Renumbered {
		if r.Config == "payments/checkout" {
			found = r.Stored == 0 && r.Published == 1 && r.Version == 2 && !r.Deleted
		}
	}
	if !found {
		t.Errorf("repair: renumbered %+v; want payments/checkout from v0 (v1 published) to v2", rep.Renumbered)
	}
}
