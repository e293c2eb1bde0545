package ci

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// Judgement is the analysis that changed configs' rollouts will be judged
// by in one stage (docs/ROLLOUT.md, "Analysis"): the metrics the
// controller queries from Prometheus, cohort against baseline, while the
// stage holds. Configs with the same stage and metrics share one.
type Judgement struct {
	Configs []cuecast.ConfigPath `json:"configs"`
	Stage   string               `json:"stage"`
	Metrics []cuecast.Metric     `json:"metrics"`
}

// judgements fills Analysis from the head's manifest: the stages with an
// analysis of every config whose output the change alters or adds.
func (r *Report) judgements(head *compiler.Result) {
	if head.Manifest == nil {
		return
	}
	byKey := map[string]int{}
	for _, cc := range r.Configs {
		switch cc.Status {
		case StatusChanged, StatusAdded, StatusRenamed, StatusFixed:
		default:
			continue
		}
		pol, _ := head.Manifest.Policy(cc.Config)
		for _, st := range pol.Stages {
			if len(st.Analysis) == 0 {
				continue
			}
			b, _ := json.Marshal(st.Analysis)
			key := st.Name + "\x00" + string(b)
			i, ok := byKey[key]
			if !ok {
				i = len(r.Analysis)
				byKey[key] = i
				r.Analysis = append(r.Analysis, Judgement{Stage: st.Name, Metrics: st.Analysis})
			}
			if !slices.Contains(r.Analysis[i].Configs, cc.Config) {
				r.Analysis[i].Configs = append(r.Analysis[i].Configs, cc.Config)
			}
		}
	}
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
		fmt.Fprintf(b, "  %s, stage %s:\n", joinPaths(j.Configs, func(s string) string { return s }), j.Stage)
		for _, m := range j.Metrics {
			fmt.Fprintf(b, "    %s\n      query: %s\n", describeMetric(m), oneLine(m.Query))
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
