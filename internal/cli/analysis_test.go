package cli_test

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/promtest"
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

// TestRolloutAnalyzeOutcomes: rollout analyze, against a real Prometheus,
// on a config's first version: a comparison is skipped (no baseline), as
// the controller says, rather than inconclusive; a cohort of +Inf is
// "+Inf" in JSON, not null (which is no data); a query Prometheus refuses
// is an error and exits 1, as does a Prometheus it cannot reach, whose
// password it does not print.
func TestRolloutAnalyzeOutcomes(t *testing.T) {
	t.Parallel()
	prom := promtest.Start(t, time.Second)
	repo := exampleRepo(t)
	pol := rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 50, Hold: cuecast.Duration(time.Hour), Analysis: []cuecast.Metric{
			{Name: "errors", Compare: cuecast.CompareDifference, Max: 0, Query: "vector($version)"},
			{Name: "latency", Compare: cuecast.CompareThreshold, Max: 1, Query: "vector(+Inf)"},
		}},
		{Name: "all", Percent: 100},
	}}}
	p := servePipeline(t, repo, pol)
	ctx := t.Context()
	url := p.ClientURL()
	awaitHolding(t, url, "payments/checkout")
	code, out, errOut := run(ctx, "rollout", "analyze", "--nats", url, "payments/checkout", "--prometheus", prom.URL, "-o", "json")
	var got []struct {
		Metric  string `json:"metric"`
		Outcome string `json:"outcome"`
		Detail  string `json:"detail"`
		Cohort  any    `json:"cohort"`
	}
	if err := json.Unmarshal([]byte(out.String()), &got); err != nil || code != 0 || len(got) != 2 {
		t.Fatalf("analyze: exit %d, %v, stdout %s, stderr %s; want 2 metrics, exit 0", code, err, out, errOut)
	}
	if got[0].Outcome != "skipped" || !strings.Contains(got[0].Detail, "no baseline") {
		t.Errorf("a difference on a first version: %s %q, want skipped (no baseline), as the controller says", got[0].Outcome, got[0].Detail)
	}
	if got[1].Outcome != "fail" || got[1].Cohort != "+Inf" {
		t.Errorf("a threshold over +Inf: %s, cohort %#v; want fail with cohort \"+Inf\"", got[1].Outcome, got[1].Cohort)
	}
	unreachable := "http://promuser:" + promPassword + "@127.0.0.1:1"
	code, out, errOut = run(ctx, "rollout", "analyze", "--nats", url, "payments/checkout", "--prometheus", unreachable)
	if all := out.String() + errOut.String(); code != cli.ExitFailure || !strings.Contains(all, "error") || strings.Contains(all, promPassword) {
		t.Errorf("analyze with Prometheus unreachable: exit %d (want %d), output:\n%s\nwant the errors shown, the password not", code, cli.ExitFailure, all)
	}
}

// TestPrometheusTimeoutFlag: check --prometheus and rollout analyze take
// serve's --prometheus-timeout. A Prometheus that answers in 6 s is waited
// for under --prometheus-timeout 30s and given up on at the 5 s default
// and under 1s, with an error naming the bound; a bound of 0 or less is
// wrong usage, as in serve.
func TestPrometheusTimeoutFlag(t *testing.T) {
	t.Parallel()
	prom := promtest.Start(t, time.Second)
	slow := prom.Slow(6 * time.Second)
	dir := analysisStage(t)
	p := servePipeline(t, exampleRepo(t), rollout.Static{P: cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Percent: 50, Hold: cuecast.Duration(time.Hour), Analysis: []cuecast.Metric{
			{Name: "latency", Compare: cuecast.CompareThreshold, Max: 1, Query: "vector($version - 1)"},
		}},
		{Name: "all", Percent: 100},
	}}})
	awaitHolding(t, p.ClientURL(), "payments/checkout")
	check := []string{"check", "--repo", dir, "--base", "HEAD~1", "--head", "HEAD", "--prometheus", slow}
	analyze := []string{"rollout", "analyze", "--nats", p.ClientURL(), "payments/checkout", "--prometheus", slow}
	for _, cmd := range []struct {
		name string
		args []string
	}{{"check", check}, {"analyze", analyze}} {
		for _, tt := range []struct {
			name string
			flag []string
			code int
			want string
		}{
			{"30s", []string{"--prometheus-timeout", "30s"}, cli.ExitOK, ""},
			{"default", nil, cli.ExitFailure, "no answer within 5s"},
			{"1s", []string{"--prometheus-timeout", "1s"}, cli.ExitFailure, "no answer within 1s"},
			{"0s", []string{"--prometheus-timeout", "0s"}, cli.ExitUsage, "--prometheus-timeout 0s: want a positive duration"},
			{"-1s", []string{"--prometheus-timeout=-1s"}, cli.ExitUsage, "--prometheus-timeout -1s: want a positive duration"},
		} {
			t.Run(cmd.name+" "+tt.name, func(t *testing.T) {
				t.Parallel()
				code, out, errOut := runCLI(t, nil, append(slices.Clone(cmd.args), tt.flag...)...)
				if code != tt.code || !strings.Contains(out+errOut, tt.want) {
					t.Errorf("exit %d (want %d), output:\n%s%s\nwant it to say %q", code, tt.code, out, errOut, tt.want)
				}
				if tt.code == cli.ExitFailure && !strings.Contains(out+errOut, "--prometheus-timeout") {
					t.Errorf("output:\n%s%s\nwant it to name --prometheus-timeout", out, errOut)
				}
			})
		}
	}
}
