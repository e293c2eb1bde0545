package cli_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/natstest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestCheckFleet: check --fleet counts the live instances on each affected
// variant (watch instances reporting to a real serve), in the text and the
// JSON report; without --fleet the report says nothing of instances.
func TestCheckFleet(t *testing.T) {
	t.Parallel()
	repo := variantRepo(t)
	base := repo.Head()
	p := startPipeline(t, repo)
	await(t, "the variants published", func() bool {
		_, err := p.Distributor.Latest(context.Background(), "search/ranking/env=staging")
		return err == nil
	})
	for _, w := range []struct{ instance, env string }{{"web-1", "staging"}, {"web-2", "staging"}, {"web-3", "prod"}} {
		startCmd(t, "watch", "--nats", p.ClientURL(), "--config", "search/ranking", "--instance", w.instance,
			"--trusted-key", p.PublicKey, "--dim", "env="+w.env)
	}
	live := func(cp cuecast.ConfigPath) int {
		reps, err := p.Distributor.Reports(context.Background(), cp)
		if err != nil {
			return -1
		}
		return len(reps)
	}
	await(t, "every instance reporting", func() bool {
		return live("search/ranking/env=staging") == 2 && live("search/ranking/env=prod") == 1
	})

	b, err := os.ReadFile(filepath.Join(repo.Dir, "search", "ranking", "ranking.cue"))
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(b), "boost_recent_days: 14", "boost_recent_days: 21", 1)
	if edited == string(b) {
		t.Fatal("the example repository changed: the edit no longer applies")
	}
	head := repo.CommitFiles("search: boost three weeks", map[string]string{"search/ranking/ranking.cue": edited})

	args := []string{"check", "--repo", repo.Dir, "--base", base, "--head", head}
	code, stdout, stderr := run(context.Background(), append(args, "--fleet", "--nats", p.ClientURL())...)
	if code != 0 {
		t.Fatalf("check --fleet: exit %d, stderr %q", code, stderr)
	}
	for _, want := range []string{
		"2 variants, 2 distinct outputs; 3 instances run them",
		"search/ranking/env=prod  (1 instance)\n",
		"search/ranking/env=staging  (2 instances)\n",
	} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("check --fleet does not say %q:\n%s", want, stdout)
		}
	}

	code, stdout, stderr = run(context.Background(), append(args, "--fleet", "--nats", p.ClientURL(), "--output", "json")...)
	if code != 0 {
		t.Fatalf("check --fleet --output json: exit %d, stderr %q", code, stderr)
	}
	var rep struct {
		Risk struct {
			Instances int  `json:"instances"`
			Counted   bool `json:"instances_counted"`
		} `json:"risk"`
		Configs []struct {
			Config    string `json:"config"`
			Instances *int   `json:"instances"`
		} `json:"configs"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &rep); err != nil {
		t.Fatalf("decode %q: %v", stdout, err)
	}
	got := map[string]int{}
	for _, c := range rep.Configs {
		if c.Instances == nil {
			t.Errorf("%s has no instance count", c.Config)
			continue
		}
		got[c.Config] = *c.Instances
	}
	if !rep.Risk.Counted || rep.Risk.Instances != 3 || len(got) != 2 ||
		got["search/ranking/env=staging"] != 2 || got["search/ranking/env=prod"] != 1 {
		t.Errorf("JSON: risk instances %d (counted %v), configs %v; want 3 (true), staging 2, prod 1", rep.Risk.Instances, rep.Risk.Counted, got)
	}

	code, stdout, stderr = run(context.Background(), args...)
	if code != 0 || strings.Contains(stdout.String(), "instance") || !strings.Contains(stdout.String(), "2 variants, 2 distinct outputs\n") {
		t.Errorf("check without --fleet: exit %d, stderr %q; want no instance counts:\n%s", code, stderr, stdout)
	}
}

// TestCheckFleetUnreachable: --fleet against a server that is not there is
// a failure that says what failed (exit 1), never a count of zero; --nats
// without --fleet is wrong usage.
func TestCheckFleetUnreachable(t *testing.T) {
	t.Parallel()
	repo := exampleRepo(t)
	base := repo.Head()
	b, err := os.ReadFile(filepath.Join(repo.Dir, "search", "ranking", "ranking.cue"))
	if err != nil {
		t.Fatal(err)
	}
	head := repo.CommitFiles("search: boost three weeks", map[string]string{
		"search/ranking/ranking.cue": strings.Replace(string(b), "boost_recent_days: 14", "boost_recent_days: 21", 1),
	})
	// A port nothing listens on: port 1, privileged, which no test's server
	// asks for. A port closed after listening on it could go to another
	// test's server meanwhile, and did (its Authorization Violation, not
	// "connection refused", in a .ci/run, 12-08).
	url := "nats://127.0.0.1:1"

	args := []string{"check", "--repo", repo.Dir, "--base", base, "--head", head}
	code, stdout, stderr := run(context.Background(), append(args, "--fleet", "--nats", url)...)
	if code != cli.ExitFailure || !strings.Contains(stderr.String(), "--fleet: connect "+url) || stdout.String() != "" {
		t.Errorf("check --fleet, no server: exit %d, stdout %q, stderr %q; want exit %d saying it could not connect to %s",
			code, stdout, stderr, cli.ExitFailure, url)
	}
	code, stdout, stderr = run(context.Background(), append(args, "--nats", url)...)
	if code != cli.ExitUsage || !strings.Contains(stderr.String(), "need --fleet") || stdout.String() != "" {
		t.Errorf("check --nats without --fleet: exit %d, stdout %q, stderr %q; want exit %d asking for --fleet", code, stdout, stderr, cli.ExitUsage)
	}
}

// TestLiveFleetReadsByNamespace: check --fleet's count answers the same
// whether it reads each path's reports (few paths of a namespace) or the
// namespace's once (cli.NamespaceReadFrom or more), and counts nobody from
// another namespace or an unnamed config. On a tree whose region
// summarises, it asks the region for the instances of its summary groups
// (it counted one instance a group).
func TestLiveFleetReadsByNamespace(t *testing.T) {
	t.Parallel()
	natstest.BothModes(t, testLiveFleetReadsByNamespace)
}

func testLiveFleetReadsByNamespace(t *testing.T) {
	t.Parallel()
	f := startReportFleet(t, distributor.Options{}, "pay", "search")
	truth := map[cuecast.ConfigPath][]string{}
	report := func(cp cuecast.ConfigPath, inst string) {
		t.Helper()
		f.reportOn(cp, inst, 1)
		truth[cp] = append(truth[cp], inst)
	}
	var many []cuecast.ConfigPath
	for c := range cli.NamespaceReadFrom + 8 {
		cp := cuecast.ConfigPath(fmt.Sprintf("pay/cfg%02d/env=prod", c))
		many = append(many, cp)
		for i := range c % 4 { // some configs nobody runs
			report(cp, fmt.Sprintf("web-%d", i))
		}
	}
	report("pay/unnamed", "web-0")
	report("search/ranking", "web-9")
	// Three instances alike in one bucket: on a tree, one summary group.
	const crowd = cuecast.ConfigPath("pay/crowd")
	for i, n := 0, 0; n < 3; i++ {
		if id := fmt.Sprintf("crowd-%d", i); cuecast.Cohort(crowd.Namespace(), id) == 7 {
			report(crowd, id)
			n++
		}
	}
	few := []cuecast.ConfigPath{many[1], many[2], many[3], "search/ranking", crowd}

	for _, tc := range []struct {
		name  string
		paths []cuecast.ConfigPath
	}{{"per path", few}, {"per namespace", append(slices.Clone(many), "search/ranking", crowd)}} {
		want := map[cuecast.ConfigPath][]string{}
		for _, cp := range tc.paths {
			if len(truth[cp]) > 0 {
				want[cp] = slices.Sorted(slices.Values(truth[cp]))
			}
		}
		counted := func() (bool, string) {
			got, err := cli.FleetInstances(t.Context(), f.d, tc.paths)
			if err != nil {
				return false, err.Error()
			}
			for cp := range got {
				slices.Sort(got[cp])
			}
			return maps.EqualFunc(got, want, slices.Equal), fmt.Sprintf("got %v\nwant %v", got, want)
		}
		if !natstest.InTree(t) {
			if ok, why := counted(); !ok {
				t.Errorf("%s: %s", tc.name, why)
			}
			continue
		}
		// On a tree, the instances reach the hub in their region's
		// summaries a moment after they report.
		poll.Until(t, tc.name+": every instance counted", poll.Patience, counted)
	}
}
