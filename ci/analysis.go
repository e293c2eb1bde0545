package ci

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/termtext"
)

// Judgement is the analysis that changed configs' rollouts will be judged
// by in one stage (docs/ROLLOUT.md, "Analysis"): the metrics the
// controller queries from Prometheus, cohort against baseline, while the
// stage holds. Configs with the same stage and metrics share one.
type Judgement struct {
	Configs []cuecast.ConfigPath `json:"configs"`
	Stage   string               `json:"stage"`
	Metrics []cuecast.Metric     `json:"metrics"`
	// at is where the head's manifest writes each metric's fields
	// (compiler.Manifest.MetricPosition), by metric then field; a metric
	// without one is reported at the manifest's first line.
	at []map[string]compiler.Error
}

// judgements fills Analysis from the head's manifest: the stages with an
// analysis of every config whose output the change alters or adds, and of
// every config whose analysis the change alters (a policy-only change
// rolls nothing out, but the config's next rollout is judged by it).
func (r *Report) judgements(base, head *compiler.Result) {
	if head.Manifest == nil {
		return
	}
	byKey := map[string]int{}
	for _, cc := range r.Configs {
		pol, _ := head.Manifest.Policy(cc.Config)
		switch cc.Status {
		case StatusChanged, StatusAdded, StatusRenamed, StatusFixed:
		case StatusUnchanged:
			if !analysisChanged(base.Manifest, pol, cc.Config) {
				continue
			}
		default:
			continue
		}
		for si, st := range pol.Stages {
			if len(st.Analysis) == 0 {
				continue
			}
			b, _ := json.Marshal(st.Analysis)
			key := st.Name + "\x00" + string(b)
			i, ok := byKey[key]
			if !ok {
				i = len(r.Analysis)
				byKey[key] = i
				j := Judgement{Stage: st.Name, Metrics: st.Analysis, at: make([]map[string]compiler.Error, len(st.Analysis))}
				for mi := range st.Analysis {
					j.at[mi] = map[string]compiler.Error{}
					for _, f := range []string{"query", "samples"} {
						if at, ok := head.Manifest.MetricPosition(cc.Config, si, mi, f); ok {
							j.at[mi][f] = at
						}
					}
				}
				r.Analysis = append(r.Analysis, j)
			}
			if !slices.Contains(r.Analysis[i].Configs, cc.Config) {
				r.Analysis[i].Configs = append(r.Analysis[i].Configs, cc.Config)
			}
		}
	}
}

// analysisChanged says whether the analysis of cfg's policy at head, pol,
// differs from the base's (a base without a manifest had none).
func analysisChanged(base *compiler.Manifest, pol cuecast.Policy, cfg cuecast.ConfigPath) bool {
	var was cuecast.Policy
	if base != nil {
		was, _ = base.Policy(cfg)
	}
	analyses := func(p cuecast.Policy) string {
		var b strings.Builder
		for _, st := range p.Stages {
			if len(st.Analysis) > 0 {
				j, _ := json.Marshal(st.Analysis)
				fmt.Fprintf(&b, "%s\x00%s\x00", st.Name, j)
			}
		}
		return b.String()
	}
	return analyses(was) != analyses(pol)
}

// describe says what a metric judges, for people: "error_rate: cohort −
// baseline ≤ 0.01, every 1m, 2 failures halt, at least 100 samples".
func describeMetric(m cuecast.Metric) string {
	d := m.WithDefaults()
	var rule string
	switch m.Compare {
	case cuecast.CompareDifference:
		rule = fmt.Sprintf("cohort − baseline ≤ %g", m.Max)
	case cuecast.CompareRatio:
		rule = fmt.Sprintf("cohort ÷ baseline ≤ %g", m.Max)
	case cuecast.CompareThreshold:
		rule = fmt.Sprintf("cohort ≤ %g", m.Max)
	case cuecast.CompareMannWhitney:
		rule = fmt.Sprintf("Mann-Whitney, cohort not higher at alpha %g (median excess ≤ %g)", d.Alpha, m.Max)
	default:
		rule = m.Compare
	}
	parts := []string{rule, "every " + time.Duration(d.Interval).String(), plural(d.Failures, "failure") + " halt"}
	if m.MinSamples > 0 {
		parts = append(parts, fmt.Sprintf("at least %g samples", m.MinSamples))
	}
	return m.Name + ": " + strings.Join(parts, ", ")
}

// analysisText is the analysis section of WriteText.
func (r *Report) analysisText(b *strings.Builder) {
	if len(r.Analysis) == 0 {
		return
	}
	b.WriteString("\nanalysis the rollout is judged by (from Prometheus, cohort against baseline):\n")
	for _, j := range r.Analysis {
		fmt.Fprintf(b, "  %s, stage %s:\n", termtext.Line(joinPaths(j.Configs, func(s string) string { return s })), termtext.Line(j.Stage))
		for _, m := range j.Metrics {
			fmt.Fprintf(b, "    %s\n      query: %s\n", termtext.Line(describeMetric(m)), termtext.Line(oneLine(m.Query)))
		}
	}
}

// analysisMarkdown is the analysis section of Markdown.
func (r *Report) analysisMarkdown() string {
	if len(r.Analysis) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("### Analysis the rollout is judged by\n\n| configs | stage | metric | query |\n|---|---|---|---|\n")
	for _, j := range r.Analysis {
		for _, m := range j.Metrics {
			fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", joinPaths(j.Configs, mdCode), mdCell(j.Stage), mdCell(describeMetric(m)), mdCode(oneLine(m.Query)))
		}
	}
	b.WriteString("\n")
	return b.String()
}

func joinPaths(ps []cuecast.ConfigPath, code func(string) string) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = code(string(p))
	}
	return strings.Join(s, ", ")
}

// oneLine folds a multi-line query onto one line.
func oneLine(q string) string { return strings.Join(strings.Fields(q), " ") }

// QueryChecker has a Prometheus parse a metric's queries
// (analysis.Prometheus.Check): an error wrapping analysis.ErrQueryRefused
// when it cannot parse one, another when it cannot be asked.
type QueryChecker interface {
	Check(ctx context.Context, m cuecast.Metric, cfg cuecast.ConfigPath) error
}

var _ QueryChecker = (*analysis.Prometheus)(nil)

// CheckQueries has q parse the query of every metric in Analysis (cuecast
// check --prometheus): a query it refuses is a new error of the change in
// the manifest (manifest/analysis), which fails the check, as a rollout
// judged by it could never pass. It returns an error only when q cannot
// be asked.
func (r *Report) CheckQueries(ctx context.Context, q QueryChecker) error {
	for _, j := range r.Analysis {
		for mi, m := range j.Metrics {
			err := q.Check(ctx, m, j.Configs[0])
			switch {
			case errors.Is(err, analysis.ErrQueryRefused):
				e := compiler.Error{File: "cuecast.cue", Line: 1, Column: 1}
				field := "query"
				var re *analysis.RefusedError
				if errors.As(err, &re) {
					field = re.Field
				}
				if mi < len(j.at) {
					if at, ok := j.at[mi][field]; ok {
						e = at
					}
				}
				e.ID, e.Message = compiler.IDManifestAnalysis, fmt.Sprintf("stage %s: %v", j.Stage, err)
				e.Fix = "fix the query; docs/ROLLOUT.md, \"Analysis\", has queries to copy"
				r.Errors = append(r.Errors, Finding{Error: e})
				r.Risk.NewErrors++
			case err != nil:
				return fmt.Errorf("check analysis queries: %w", err)
			}
		}
	}
	return nil
}
