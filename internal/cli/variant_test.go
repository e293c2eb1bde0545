package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/gittest"
)

// variantRepo is the example repository with search/ranking made to vary
// by env: the search namespace declares env, and ranking reads it.
func variantRepo(t *testing.T) *gittest.Repo {
	t.Helper()
	repo := gittest.New(t)
	repo.CopyDir(filepath.Join(repoRoot(t), "configs-example"))
	manifest, err := os.ReadFile(filepath.Join(repo.Dir, "cuecast.cue"))
	if err != nil {
		t.Fatal(err)
	}
	ranking, err := os.ReadFile(filepath.Join(repo.Dir, "search", "ranking", "ranking.cue"))
	if err != nil {
		t.Fatal(err)
	}
	m := strings.Replace(string(manifest), "namespaces: search: {\n", "namespaces: search: {\n\tdimensions: env: [\"staging\", \"prod\"]\n", 1)
	r := strings.Replace(string(ranking), "env:   \"prod\"\n", "_env: string @tag(env,short=staging|prod)\nenv:  _env\n", 1)
	if m == string(manifest) || r == string(ranking) {
		t.Fatal("the example repository changed: the variant edits no longer apply")
	}
	repo.CommitFiles("Import the example configs, ranking varying by env", map[string]string{"cuecast.cue": m, "search/ranking/ranking.cue": r})
	return repo
}

// TestWatchVariant: watch and agent given --dim or --variant take the
// instance's variant of a config with variants; a value missing or not
// among the variants is a usage error (exit 2) naming what to pass, never
// a default.
func TestWatchVariant(t *testing.T) {
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
		{"no dimensions", nil, "has variants by env: declare this instance's values"},
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
