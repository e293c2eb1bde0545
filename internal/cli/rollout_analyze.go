package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/termtext"
)

// analyzedMetric is one line of `cuecast rollout analyze`.
type analyzedMetric struct {
	Stage    string      `json:"stage"`
	Metric   string      `json:"metric"`
	Compare  string      `json:"compare"`
	Max      float64     `json:"max"`
	Cohort   metricValue `json:"cohort"`   // null: no data
	Baseline metricValue `json:"baseline"` // null: no data, or a threshold
	Outcome  string      `json:"outcome"`
	Detail   string      `json:"detail"`
}

// metricValue is a measured value in analyze's output. JSON has no NaN
// nor infinities: NaN, no data, is null, and an infinity (a ratio over a
// zero baseline, a query dividing by zero) the string "+Inf" or "-Inf", as
// Prometheus writes it, so that it does not read as no data.
type metricValue float64

func (v metricValue) MarshalJSON() ([]byte, error) {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return []byte("null"), nil
	case math.IsInf(f, 1):
		return []byte(`"+Inf"`), nil
	case math.IsInf(f, -1):
		return []byte(`"-Inf"`), nil
	}
	return json.Marshal(f)
}

// The outcomes of analyze besides analysis.Outcome's, the controller's
// words (distributor/rollout): a comparison with no baseline, a metric
// that could not be evaluated.
const (
	analyzeSkipped = "skipped"
	analyzeError   = "error"
)

// rolloutAnalyze runs the analysis queries of the config's rollout now:
// its current stage's metrics (every stage's, when the rollout is over or
// its stage has none), for its version against the version it started
// from, as the controller would judge them.
func rolloutAnalyze(ctx context.Context, env *Env, c *rollout.Controller, opts *RolloutOptions) error {
	url := opts.Prometheus
	if url == "" {
		url = env.Getenv("CUECAST_PROMETHEUS_URL")
	}
	if url == "" {
		return usageErrorf("pass --prometheus http://prometheus:9090 or set CUECAST_PROMETHEUS_URL", "rollout analyze needs a Prometheus to query")
	}
	p, err := analysis.New(url, analysis.Options{Timeout: opts.PrometheusTimeout})
	if err != nil {
		return &UsageError{Err: err, Hint: "pass --prometheus http://prometheus:9090"}
	}
	rec, err := c.Record(ctx, opts.Config)
	if err != nil {
		return actionError(err)
	}
	r := rec.Current
	if r == nil {
		return actionError(fmt.Errorf("%s: %w", opts.Config, rollout.ErrNoRollout))
	}
	stages := r.Policy.Stages
	if cur := r.Policy.Stages[r.Stage]; r.State.Active() && len(cur.Analysis) > 0 {
		stages = []cuecast.Stage{cur}
	}
	now := time.Now()
	var out []analyzedMetric
	failed := false
	for _, st := range stages {
		for _, m := range st.Analysis {
			a := analyzedMetric{Stage: st.Name, Metric: m.Name, Compare: m.Compare, Max: m.Max,
				Cohort: metricValue(math.NaN()), Baseline: metricValue(math.NaN())}
			if rollout.NoBaseline(r, st, m) {
				a.Outcome, a.Detail = analyzeSkipped, "no baseline to compare with: a first version, or a stage covering everyone"
				out = append(out, a)
				continue
			}
			res, err := p.Measure(ctx, m, r.Config, r.Version, r.From, now)
			if err != nil {
				a.Outcome, a.Detail = analyzeError, err.Error()+timeoutHint(err)
				failed = true
			} else {
				v := analysis.Judge(m, res)
				a.Outcome, a.Detail = string(v.Outcome), v.Detail
				a.Cohort, a.Baseline = metricValue(v.Cohort), metricValue(v.Baseline)
			}
			out = append(out, a)
		}
	}
	// A metric that could not be evaluated is never a pass: a script
	// must not read the table as one.
	done := func(err error) error {
		if err == nil && failed {
			return &silentError{code: ExitFailure}
		}
		return err
	}
	if opts.Output == "json" {
		if out == nil {
			out = []analyzedMetric{}
		}
		return done(writeJSON(env.IO.Out, out))
	}
	if len(out) == 0 {
		fmt.Fprintf(env.IO.Out, "%s: the policy of v%d has no analysis\n", opts.Config, r.Version)
		return nil
	}
	fmt.Fprintf(env.IO.Out, "%s: v%d (cohort) against v%d (baseline), %s\n", opts.Config, r.Version, r.From, rollout.FormatTime(now))
	tw := newTable(env.IO.Out)
	tw.row("STAGE", "METRIC", "COHORT", "BASELINE", "OUTCOME", "DETAIL")
	for _, a := range out {
		tw.row(termtext.Line(a.Stage), termtext.Line(a.Metric), value(a.Cohort), value(a.Baseline), a.Outcome, termtext.Line(a.Detail))
	}
	tw.flush()
	return done(nil)
}

func value(v metricValue) string {
	f := float64(v)
	switch {
	case math.IsNaN(f):
		return "-"
	case math.IsInf(f, 0):
		return fmt.Sprintf("%+g", f)
	}
	return fmt.Sprintf("%.4g", f)
}

// printAnalysis writes the current stage's analysis as the controller
// last evaluated it, one line per metric, for rollout status.
func printAnalysis(w io.Writer, r *rollout.Rollout) {
	if !r.State.Active() && r.State != rollout.StateHalted {
		return
	}
	for _, ms := range r.Analysis {
		if ms.Outcome == "" {
			fmt.Fprintf(w, "  analysis %s: first evaluation at %s\n", termtext.Line(ms.Name), rollout.FormatTime(ms.Next))
			continue
		}
		// The name is the policy's, a commit's choice; the detail quotes
		// the query it holds.
		fmt.Fprintf(w, "  analysis %s: %s, %d evaluations, %d failed, %d inconclusive: %s\n", termtext.Line(ms.Name), ms.Outcome, ms.Evaluations, ms.Failures, ms.Inconclusive, termtext.Line(ms.Detail))
	}
}
