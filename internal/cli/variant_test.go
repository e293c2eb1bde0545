package cli_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/poll"
)

// rankingByEnv edits the example repository in dir so that
// search/ranking varies by env: the search namespace declares env, and
// ranking reads it.
func rankingByEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	manifest, err := os.ReadFile(filepath.Join(dir, "cuecast.cue"))
	if err != nil {
		t.Fatal(err)
	}
	ranking, err := os.ReadFile(filepath.Join(dir, "search", "ranking", "ranking.cue"))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.Replace(string(manifest), "namespaces: search: {\n", "namespaces: search: {\n\tdimensions: env: [\"staging\", \"prod\"]\n", 1)
	r := strings.Replace(string(ranking), "env:   \"prod\"\n", "_env: string @tag(env,short=staging|prod)\nenv:  _env\n", 1)
	if m == string(manifest) || r == string(ranking) {
		t.Fatal("the example repository changed: the variant edits no longer apply")
	}
	return map[string]string{"cuecast.cue": m, "search/ranking/ranking.cue": r}
}

// variantRepo is the example repository with search/ranking made to vary
// by env: the search namespace declares env, and ranking reads it.
func variantRepo(t *testing.T) *gittest.Repo {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir(filepath.Join(repoRoot(t), "configs-example"))
	repo.CommitFiles("Import the example configs, ranking varying by env", rankingByEnv(t, repo.Dir))
	return repo
}

// TestWatchVariant: watch and agent given --dim or --variant take the
// instance's variant of a config with variants; a value missing or not
// among the variants is a usage error (exit 2) naming what to pass, never
// a default.
func TestWatchVariant(t *testing.T) {
	t.Parallel()
	repo := variantRepo(t)
	p := startPipeline(t, repo)
	// Watch picks its variant at start, from the index: once it is there.
	await(t, "the variants published", func() bool {
		_, err := p.Distributor.Latest(context.Background(), "search/ranking/env=staging")
		return err == nil
	})
	stdout, _ := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", "search/ranking", "--instance", "web-1",
		"--trusted-key", p.PublicKey, "--dim", "env=staging", "--label", "host=h1")
	await(t, "the staging variant applied", func() bool {
		return strings.Contains(stdout.String(), `"config":"search/ranking/env=staging","version":1`)
	})

	out := t.TempDir()
	startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-1", "--trusted-key", p.PublicKey,
		"--config", "search/ranking", "--dir", out, "--variant", "env=prod")
	await(t, "the prod variant kept as search/ranking.json", fileContains(filepath.Join(out, "search", "ranking.json"), `"env":"prod"`))

	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no dimensions", nil, "has variants by env: declare this instance's values (client.WithDimensions, or --dim on watch and agent), e.g. env=prod; its variants: env=prod; env=staging"},
		{"an unknown value", []string{"--dim", "env=qa"}, "has no variant env=qa (its variants: env=prod; env=staging)"},
		{"a dimension the config does not use only", []string{"--variant", "region=eu"}, "declares no value for env (it declares region=eu)"},
		{"a bad --dim", []string{"--dim", "Env=prod"}, "--dim Env=prod: not <dimension>=<value>"},
		{"a bad --variant", []string{"--variant", "env"}, `"env" is not <dimension>=<value>`},
		{"--dim against --variant", []string{"--variant", "env=prod", "--dim", "env=staging"}, "dimension env is prod by --variant and staging by --dim"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"watch", "--nats", p.ClientURL(), "--config", "search/ranking", "--instance", "web-2", "--trusted-key", p.PublicKey}, tc.args...)
			code, stdout, stderr := run(context.Background(), args...)
			if code != 2 || !strings.Contains(stderr.String(), tc.want) || stdout.String() != "" {
				t.Fatalf("exit %d, stdout %q, stderr %q; want exit 2 saying %q", code, stdout, stderr, tc.want)
			}
		})
	}
}

// TestOperatorVariant: status shows a config with variants as one row per
// variant; status, log and rollout take CONFIG --variant k=v or the
// variant path.
func TestOperatorVariant(t *testing.T) {
	t.Parallel()
	p := startPipeline(t, variantRepo(t))
	await(t, "the variants published", func() bool {
		_, err := p.Distributor.Latest(context.Background(), "search/ranking/env=staging")
		return err == nil
	})
	nats := p.ClientURL()
	code, stdout, stderr := run(context.Background(), "status", "--nats", nats, "search/ranking")
	if code != 0 || !strings.Contains(stdout.String(), "search/ranking/env=prod ") || !strings.Contains(stdout.String(), "search/ranking/env=staging ") {
		t.Fatalf("status search/ranking: exit %d, stdout %q, stderr %q; want a row per variant", code, stdout, stderr)
	}
	// Without arguments the base path's row is its variant index, which no
	// instance applies: it says so instead of "0/0 instances".
	code, stdout, stderr = run(context.Background(), "status", "--nats", nats)
	if code != 0 || !regexp.MustCompile(`(?m)^search/ranking +v\d+ +variant index: 2 variants\b`).MatchString(stdout.String()) ||
		!strings.Contains(stdout.String(), "search/ranking/env=prod ") {
		t.Fatalf("status: exit %d, stdout %q, stderr %q; want search/ranking's row to say it is the index of 2 variants, and a row per variant", code, stdout, stderr)
	}
	code, stdout, stderr = run(context.Background(), "status", "--nats", nats, "search/ranking", "--variant", "env=prod", "-o", "json")
	if code != 0 || !strings.Contains(stdout.String(), `"search/ranking/env=prod"`) || strings.Contains(stdout.String(), "env=staging") {
		t.Fatalf("status --variant env=prod: exit %d, stdout %q, stderr %q; want prod's row only", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"log", "search/ranking", "--variant", "env=prod"},
		{"log", "search/ranking/env=prod"},
	} {
		code, stdout, stderr = run(context.Background(), append(args, "--nats", nats)...)
		if code != 0 || !strings.Contains(stdout.String(), "1 ") {
			t.Fatalf("%v: exit %d, stdout %q, stderr %q; want version 1 listed", args, code, stdout, stderr)
		}
	}
	// The first version's rollout record may or may not be written yet
	// (it is deployed at once): either way the answer is about the variant.
	code, stdout, stderr = run(context.Background(), "rollout", "status", "search/ranking", "--variant", "env=staging", "--nats", nats)
	if both := stdout.String() + stderr.String(); !strings.Contains(both, "search/ranking/env=staging") || strings.Contains(both, "env=prod") {
		t.Fatalf("rollout status --variant: exit %d, stdout %q, stderr %q; want it about search/ranking/env=staging", code, stdout, stderr)
	}
	for _, args := range [][]string{
		{"log", "search/ranking/env=prod", "--variant", "env=prod"},
		{"status", "--variant", "env=prod"},
		{"log", "search/ranking", "--variant", "env"},
	} {
		if code, _, stderr := run(context.Background(), append(args, "--nats", nats)...); code != 2 {
			t.Fatalf("%v: exit %d (stderr %q), want 2", args, code, stderr)
		}
	}
	runVariantsDocOperatorLines(t, nats)
}

// runVariantsDocOperatorLines runs docs/VARIANTS.md's "The operator's
// side" block as written, with --nats, on configs-example's search/suggest
// (four variants), checking what each line is there to show.
func runVariantsDocOperatorLines(t *testing.T, nats string) {
	t.Helper()
	doc := readDoc(t, "VARIANTS.md")
	_, block, ok := strings.Cut(doc, "\n```sh\ncuecast status search/suggest ")
	if !ok {
		t.Fatal("docs/VARIANTS.md has no sh block opening with `cuecast status search/suggest`; update runVariantsDocOperatorLines")
	}
	block, _, _ = strings.Cut("cuecast status search/suggest "+block, "\n```")
	lines := commandLines(block)
	// What each line must answer ("exit N: output"): the variants' rows,
	// prod-eu's alone, its version; the halt, or, where serve took the
	// first version to everyone at once (no instance to wait for), the
	// refusal naming the variant's complete rollout; the rollback finds
	// nothing to fall back to, as the only version is the first. Each
	// answer is about the variant: the line's words hold.
	want := []*regexp.Regexp{
		regexp.MustCompile(`(?s)^exit 0: .*search/suggest/env=prod/region=eu .*search/suggest/env=prod/region=us .*search/suggest/env=staging/region=eu `),
		regexp.MustCompile(`^exit 0: search/suggest/env=prod/region=eu +v1 `),
		regexp.MustCompile(`(?m)^exit 0: v1 `),
		regexp.MustCompile(`^exit 0: search/suggest/env=prod/region=eu: halt by .* recorded|^exit 2: cuecast: halt search/suggest/env=prod/region=eu: rollout state does not allow this: v1 is complete`),
		regexp.MustCompile(`^exit 2: cuecast: rollback search/suggest/env=prod/region=eu: no previous version known`),
	}
	if len(lines) != len(want) {
		t.Fatalf("docs/VARIANTS.md's operator block runs %d commands, want %d: %q", len(lines), len(want), lines)
	}
	for i, l := range lines {
		args := append(shellWords(l), "--nats", nats)
		if args[0] == "rollout" || args[0] == "rollback" {
			args = append(args, "--as", "ann")
		}
		// The variant's rollout record is written as serve takes the
		// version: the halt waits for it.
		poll.Until(t, "docs/VARIANTS.md: cuecast "+l, poll.Patience, func() (bool, string) {
			code, o, e := run(context.Background(), args...)
			got := fmt.Sprintf("exit %d: %s", code, o.String()+e.String())
			return want[i].MatchString(got), got
		})
	}
}

// TestWatchPicksVariantWhenConfigGainsVariants: watch and agent started on
// a plain config take their variant when the config gains variants, by
// watching it again (the client never applies the variant index).
func TestWatchPicksVariantWhenConfigGainsVariants(t *testing.T) {
	t.Parallel()
	repo, p := serveExample(t)
	stdout, stderr := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", "search/ranking", "--instance", "web-1",
		"--trusted-key", p.PublicKey, "--dim", "env=staging")
	out := t.TempDir()
	file := filepath.Join(out, "search", "ranking.json")
	startCmd(t, "agent", "--nats", p.ClientURL(), "--instance", "sidecar-1", "--trusted-key", p.PublicKey,
		"--config", "search/ranking", "--dir", out, "--dim", "env=staging")
	await(t, "the plain config applied", func() bool {
		return strings.Contains(stdout.String(), `"config":"search/ranking","version":1`)
	})
	await(t, "the agent's file", fileContains(file, `"env":"prod"`))
	repo.CommitFiles("search: ranking varies by env", rankingByEnv(t, repo.Dir))
	p.Tailer.Wake()
	poll.Until(t, "the staging variant applied by watch", 20*time.Second, func() (bool, string) {
		return strings.Contains(stdout.String(), `"config":"search/ranking/env=staging","version":1`), "stdout " + stdout.String() + "\nstderr " + stderr.String()
	})
	await(t, "the agent's file holding the staging variant", fileContains(file, `"env":"staging"`))
	if strings.Contains(stdout.String(), `"version":2`) {
		t.Errorf("watch applied the variant index (version 2 of search/ranking): %s", stdout)
	}
}
