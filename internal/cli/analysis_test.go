package cli_test

import (
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/cli"
)

// promPassword is the password of the Prometheus URLs the tests pass,
// which no output may hold.
const promPassword = "S3cretPW"

// analysisStage gives configs-example's search namespace's half stage an
// analysis, so that a change of search/ranking has queries to check.
func analysisStage(t *testing.T) (dir string) {
	t.Helper()
	repo := exampleRepo(t)
	repo.Edit("cuecast.cue", `{name: "half", percent: 50, hold: "10m", max_unhealthy: 0.02},`,
		`{name: "half", percent: 50, hold: "10m", max_unhealthy: 0.02, analysis: [{
			name:    "error_rate"
			query:   #"sum(rate(http_errors_total[$interval]) * on(instance, job) group_left cuecast_config_info{$selector})"#
			compare: "difference"
			max:     0.01
		}]},`)
	repo.Commit("analysis for search")
	repo.Edit("search/ranking/ranking.cue", `boost_recent_days: 14`, `boost_recent_days: 7`)
	repo.Commit("change ranking")
	return repo.Dir
}

// TestPrometheusPasswordNotPrinted: the password of a --prometheus URL is
// printed by no command, in no error: check with a Prometheus it cannot
// reach, check and serve with a URL that does not parse.
func TestPrometheusPasswordNotPrinted(t *testing.T) {
	t.Parallel()
	dir := analysisStage(t)
	unreachable := "http://promuser:" + promPassword + "@127.0.0.1:1"
	unparsable := "http://promuser:" + promPassword + "@127.0.0.1:notaport"
	for _, tt := range []struct {
		name string
		args []string
		code int
	}{
		{"check, unreachable", []string{"check", "--repo", dir, "--base", "HEAD~1", "--head", "HEAD", "--prometheus", unreachable}, cli.ExitFailure},
		{"check, unparsable", []string{"check", "--repo", dir, "--base", "HEAD~1", "--head", "HEAD", "--prometheus", unparsable}, cli.ExitUsage},
		{"serve, unparsable", []string{"serve", "--repo", dir, "--data", t.TempDir(), "--listen", "127.0.0.1:0", "--prometheus", unparsable}, cli.ExitUsage},
	} {
		t.Run(tt.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, nil, tt.args...)
			if code != tt.code || strings.Contains(out+errOut, promPassword) || !strings.Contains(out+errOut, "promuser:") {
				t.Errorf("exit %d (want %d), output:\n%s%s\nwant the URL named without its password", code, tt.code, out, errOut)
			}
		})
	}
}
