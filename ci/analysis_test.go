package ci_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/promtest"
)

// analysisStage is the search namespace's half stage with an error-rate
// analysis whose query is query.
func analysisStage(query string) string {
	return `{name: "half", percent: 50, hold: "10m", max_unhealthy: 0.02, analysis: [{
			name:        "error_rate"
			query:       #"` + query + `"#
			samples:     #"` + samplesQuery + `"#
			compare:     "difference"
			max:         0.01
			min_samples: 100
			interval:    "1m"
			failures:    2
		}]},`
}

const samplesQuery = `sum(increase(http_requests_total[$interval]) * on(instance, job) group_left cuecast_config_info{$selector})`

const goodQuery = `sum(rate(http_errors_total[$interval]) * on(instance, job) group_left cuecast_config_info{$selector}) / sum(rate(http_requests_total[$interval]) * on(instance, job) group_left cuecast_config_info{$selector})`

// TestCheckShowsAnalysis: cuecast check shows the analysis a change's
// rollout will be judged by, and a query the controller could not use is
// an error of the check at the line that wrote it, not of the rollout.
func TestCheckShowsAnalysis(t *testing.T) {
	halfStage := `{name: "half", percent: 50, hold: "10m", max_unhealthy: 0.02},`
	t.Run("shown", func(t *testing.T) {
		r, _ := exampleRepo(t)
		r.Edit("cuecast.cue", halfStage, analysisStage(goodQuery))
		base := r.Commit("analysis for search")
		r.Edit("search/ranking/ranking.cue", `boost_recent_days: 14`, `boost_recent_days: 7`)
		head := r.Commit("change ranking")
		rep := check(t, r, base, head)
		if rep.Failed() || len(rep.Analysis) != 1 {
			t.Fatalf("got failed %t, analysis %+v; want one judgement", rep.Failed(), rep.Analysis)
		}
		j := rep.Analysis[0]
		if len(j.Configs) != 1 || j.Configs[0] != "search/ranking" || j.Stage != "half" || len(j.Metrics) != 1 || j.Metrics[0].Query != goodQuery {
			t.Errorf("judgement %+v, want search/ranking's stage half with its error_rate query", j)
		}
		text := textReport(t, rep)
		for _, want := range []string{"analysis the rollout is judged by", "search/ranking, stage half:",
			"error_rate: cohort − baseline ≤ 0.01, every 1m0s, 2 failures halt, at least 100 samples", "query: " + goodQuery} {
			if !strings.Contains(text, want) {
				t.Errorf("text report lacks %q:\n%s", want, text)
			}
		}
		if md := rep.Markdown(0); !strings.Contains(md, "### Analysis the rollout is judged by") {
			t.Errorf("markdown lacks the analysis section:\n%s", md)
		}
	})
	t.Run("parsed by prometheus", func(t *testing.T) {
		prom := promtest.Start(t, time.Second)
		p, err := analysis.New(prom.URL, analysis.Options{Timeout: 5 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		r, _ := exampleRepo(t)
		// Balanced and with its placeholders, so only a PromQL parser
		// finds the operator missing its operand.
		bad := `sum(rate(http_errors_total{$selector}[1m])) / / 2`
		r.Edit("cuecast.cue", halfStage, strings.Replace(analysisStage(goodQuery), "}]},", "}, {name: \"bad\", query: #\""+bad+"\"#, compare: \"threshold\", max: 1}]},", 1))
		base := r.Commit("analysis for search, one query broken")
		r.Edit("search/ranking/ranking.cue", `boost_recent_days: 14`, `boost_recent_days: 7`)
		rep := check(t, r, base, r.Commit("change ranking"))
		if rep.Failed() {
			t.Fatalf("the check failed before Prometheus parsed anything: %+v", rep.Errors)
		}
		if err := rep.CheckQueries(t.Context(), p); err != nil {
			t.Fatalf("CheckQueries: %v", err)
		}
		if !rep.Failed() || len(rep.Errors) != 1 || rep.Errors[0].ID != compiler.IDManifestAnalysis ||
			!strings.Contains(rep.Errors[0].Message, `stage half: metric "bad": query: prometheus cannot parse`) {
			t.Fatalf("after Prometheus parsed the queries: failed %t, errors %+v; want one manifest/analysis error for metric bad only", rep.Failed(), rep.Errors)
		}
		// At the bad metric's query in the manifest, not at 1:1, and
		// saying whose the column Prometheus gives is.
		line, col := sourcePos(t, r, "cuecast.cue", `query: #"`+bad)
		if e := rep.Errors[0]; e.File != "cuecast.cue" || e.Line != line || e.Column != col ||
			!strings.Contains(e.Message, "the line:column Prometheus gives is in the expanded query") {
			t.Errorf("refused query reported at %s:%d:%d %q, want cuecast.cue:%d:%d (its query field) saying the column is in the expanded query",
				e.File, e.Line, e.Column, e.Message, line, col)
		}
		prom.Stop()
		if err := rep.CheckQueries(t.Context(), p); err == nil || errors.Is(err, analysis.ErrQueryRefused) {
			t.Errorf("CheckQueries with Prometheus stopped: %v, want an error that is no refusal", err)
		}
	})
	for _, tt := range []struct{ name, stage, want, at string }{
		{"bad query", analysisStage(strings.TrimSuffix(goodQuery, ")")), `stage half: metric "error_rate": query: unclosed '('`, "query: "},
		{"no baseline", strings.Replace(analysisStage(goodQuery), "percent: 50", "percent: 100", 1), `stage half: metric "error_rate": the stage covers every instance, so no baseline is left`, "query: "},
		// Nothing counts the samples of a single value without a
		// samples query: refused where min_samples is written rather
		// than silently ignored, saying what to write instead.
		{"min_samples without samples", strings.Replace(analysisStage(goodQuery), "samples:     #\"", "// samples: #\"", 1),
			`stage half: metric "error_rate": min_samples: without a samples query there is nothing to count (difference compares one value per side): ` +
				`add samples, the query of the observations behind a side's value, or drop min_samples`, "min_samples: "},
	} {
		t.Run(tt.name, func(t *testing.T) { checkFails(t, halfStage, tt.stage, tt.want, tt.at) })
	}
}

// TestCheckPolicyOnlyChange: a change to the manifest's policy alone, no
// config's output altered, still has its analysis listed and its queries
// parsed by Prometheus: the next content change's rollout is judged by
// them, and a query Prometheus refuses would halt it.
func TestCheckPolicyOnlyChange(t *testing.T) {
	prom := promtest.Start(t, time.Second)
	p, err := analysis.New(prom.URL, analysis.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r, _ := exampleRepo(t)
	halfStage := `{name: "half", percent: 50, hold: "10m", max_unhealthy: 0.02},`
	r.Edit("cuecast.cue", halfStage, analysisStage(goodQuery))
	base := r.Commit("analysis for search")
	// Balanced, with its placeholders: only a PromQL parser refuses it.
	bad := goodQuery + " ** 2"
	r.Edit("cuecast.cue", goodQuery, bad)
	head := r.Commit("square the error rate")
	rep := check(t, r, base, head)
	if rep.Failed() {
		t.Fatalf("the check failed before Prometheus parsed anything: %+v", rep.Errors)
	}
	var listed bool
	for _, j := range rep.Analysis {
		listed = listed || slices.Contains(j.Configs, "search/ranking") && j.Metrics[0].Query == bad
	}
	if !listed {
		t.Fatalf("analysis %+v, want search/ranking's changed error_rate listed", rep.Analysis)
	}
	if err := rep.CheckQueries(t.Context(), p); err != nil {
		t.Fatalf("CheckQueries: %v", err)
	}
	line, _ := sourcePos(t, r, "cuecast.cue", `query:       #"`+bad)
	if !rep.Failed() || len(rep.Errors) != 1 || rep.Errors[0].ID != compiler.IDManifestAnalysis || rep.Errors[0].Line != line {
		t.Errorf("after Prometheus parsed the queries: failed %t, errors %+v; want one manifest/analysis error at cuecast.cue:%d", rep.Failed(), rep.Errors, line)
	}
}

// checkFails checks a change of the search namespace's stage to stage and
// wants it to fail with a manifest/analysis error saying want at the
// field that at starts ("query: ").
func checkFails(t *testing.T, from, stage, want, at string) {
	r, base := exampleRepo(t)
	r.Edit("cuecast.cue", from, stage)
	head := r.Commit("analysis the controller could not use")
	rep := check(t, r, base, head)
	if !rep.Failed() {
		t.Fatal("check passed a manifest whose analysis query does not close")
	}
	var found bool
	for _, f := range rep.Errors {
		if f.ID == compiler.IDManifestAnalysis {
			found = true
			line, col := sourcePos(t, r, "cuecast.cue", at)
			if f.File != "cuecast.cue" || f.Line != line || f.Column != col || !strings.Contains(f.Message, want) {
				t.Errorf("error %s:%d:%d %q, want cuecast.cue:%d:%d (%s) saying %q", f.File, f.Line, f.Column, f.Message, line, col, at, want)
			}
		}
	}
	if !found {
		t.Errorf("errors %+v, want one %s", rep.Errors, compiler.IDManifestAnalysis)
	}
}

// sourcePos is the line and column of the value of the field that text
// starts (with its "name: "), in file of r's work tree: where CUE places
// the field's value, its first character after the colon's blanks.
func sourcePos(t *testing.T, r *gittest.Repo, file, text string) (line, col int) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, file))
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range strings.Split(string(b), "\n") {
		if j := strings.Index(l, text); j >= 0 {
			k := j + strings.Index(text, ": ") + 1
			for k < len(l) && (l[k] == ' ' || l[k] == '\t') {
				k++
			}
			return i + 1, len([]rune(l[:k])) + 1
		}
	}
	t.Fatalf("%s has no %q", file, text)
	return 0, 0
}
