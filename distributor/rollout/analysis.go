package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
)

// A stage's analysis (docs/ROLLOUT.md, "Analysis"): while it holds, each
// metric of the stage is measured every Interval, cohort against baseline,
// from Prometheus; Failures failed evaluations halt the stage like any
// breach, MaxErrors evaluations in a row that could not be made (Prometheus
// unreachable, a query refused) halt it too, and the stage passes only
// once every metric's last evaluation passed. An evaluation with too few
// samples counts neither way: the stage waits for one that has them.

// Analyzer measures a metric for a rollout's cohort (the instances of cfg
// on version cohort) and baseline (those on version baseline).
type Analyzer interface {
	Measure(ctx context.Context, m cuecast.Metric, cfg cuecast.ConfigPath, cohort, baseline uint64, now time.Time) (analysis.Result, error)
}

var _ Analyzer = (*analysis.Prometheus)(nil)

// MetricState is one metric of a stage's analysis as the controller last
// evaluated it.
type MetricState struct {
	Name string `json:"name"`
	// Next is when it is evaluated next.
	Next time.Time `json:"next"`
	// Evaluations that judged (passed or failed), Failures among them;
	// Inconclusive ones (too few samples, no data); and Errors:
	// evaluations in a row that could not be made.
	Evaluations  int `json:"evaluations"`
	Failures     int `json:"failures"`
	Inconclusive int `json:"inconclusive,omitempty"`
	Errors       int `json:"errors"`
	// Outcome of the last evaluation (analysis.Outcome, or "error"; empty
	// before the first) and what it compared, for people.
	Outcome string `json:"outcome,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// outcomeError is a MetricState's Outcome when the evaluation could not be
// made; outcomeSkipped when there is nothing to compare with.
const (
	outcomeError   = "error"
	outcomeSkipped = "skipped"
)

// errNoAnalyzer is the evaluation error of a controller without an
// Analyzer: a stage with an analysis never passes unjudged.
var errNoAnalyzer = errors.New("no Prometheus to ask: serve runs without --prometheus")

// startAnalysis is the analysis of stage st whose hold starts at now: each
// metric first evaluated one Interval later, so that its window holds the
// cohort's new version.
func startAnalysis(st cuecast.Stage, now time.Time) []MetricState {
	if len(st.Analysis) == 0 {
		return nil
	}
	out := make([]MetricState, len(st.Analysis))
	for i, m := range st.Analysis {
		out[i] = MetricState{Name: m.Name, Next: now.Add(time.Duration(m.WithDefaults().Interval))}
	}
	return out
}

// analysisDue lists when r's metrics are evaluated next, so that the
// running controller judges the stage then (known.due).
func (r *Rollout) analysisDue() []time.Time {
	if r.State != StateHolding {
		return nil
	}
	out := make([]time.Time, 0, len(r.Analysis))
	for _, ms := range r.Analysis {
		out = append(out, ms.Next)
	}
	return out
}

// analyze evaluates the metrics of r's holding stage that are due, and
// halts r (halt, as a health breach does) when one fails its limit. It
// reports whether r changed.
func (c *Controller) analyze(ctx context.Context, rec *Record, r *Rollout, now time.Time) ([]AuditEntry, bool) {
	if r.State != StateHolding || len(r.Analysis) == 0 {
		return nil, false
	}
	st := r.Policy.Stages[r.Stage]
	if len(st.Analysis) != len(r.Analysis) {
		return nil, false // a record of another policy's shape; not ours to judge
	}
	changed := false
	for i := range r.Analysis {
		ms := &r.Analysis[i]
		if now.Before(ms.Next) {
			continue
		}
		m := st.Analysis[i]
		var res analysis.Result
		var err error
		switch {
		case noBaseline(r, m):
		case c.o.Analyzer == nil:
			err = errNoAnalyzer
		default:
			res, err = c.o.Analyzer.Measure(ctx, m, r.Config, r.Version, r.From, now)
			if ctx.Err() != nil {
				// The controller is stopping: no evaluation was made.
				return nil, false
			}
		}
		changed = true
		if why := evaluated(ms, m, st, r, res, err, now); why != "" {
			return halt(rec, r, st, why, now, c.rules()), true
		}
		c.log.Info("rollout analysis", "config", r.Config, "version", r.Version, "stage", st.Name, "metric", m.Name,
			"outcome", ms.Outcome, "detail", ms.Detail)
	}
	if changed {
		r.Updated = now
	}
	return nil, changed
}

// noBaseline says that metric m of r's stage has nothing to compare with:
// a first version (no version to fall back to) or a stage covering every
// bucket (nobody is left on the old version). Only a threshold is judged
// then.
func noBaseline(r *Rollout, m cuecast.Metric) bool {
	return m.Compare != cuecast.CompareThreshold && (r.From == 0 || len(r.Cohort.Buckets) == cuecast.Buckets)
}

// evaluated records one evaluation of metric m (its measure res, or the
// error that kept it from being made) in ms, and says why the stage halts,
// or "" when it does not. It is the pure half of analyze.
func evaluated(ms *MetricState, m cuecast.Metric, st cuecast.Stage, r *Rollout, res analysis.Result, err error, now time.Time) string {
	m = m.WithDefaults()
	ms.Next = now.Add(time.Duration(m.Interval))
	switch {
	case noBaseline(r, m):
		ms.Outcome, ms.Detail = outcomeSkipped, "no baseline to compare with: a first version, or a stage covering everyone"
		return ""
	case err != nil:
		ms.Errors++
		ms.Outcome, ms.Detail = outcomeError, err.Error()
		if ms.Errors >= m.MaxErrors {
			return fmt.Sprintf("stage %s: analysis %s could not be evaluated %d times in a row (max_errors %d): %v; query: %s",
				st.Name, m.Name, ms.Errors, m.MaxErrors, err, m.Query)
		}
		return ""
	}
	ms.Errors = 0
	v := analysis.Judge(m, res)
	ms.Outcome, ms.Detail = string(v.Outcome), v.Detail
	switch v.Outcome {
	case analysis.Inconclusive:
		ms.Inconclusive++
		return ""
	case analysis.Pass:
		ms.Evaluations++
		return ""
	}
	ms.Evaluations++
	ms.Failures++
	if ms.Failures >= m.Failures {
		return fmt.Sprintf("stage %s: analysis %s failed %d of %d evaluations (failures %d halt): %s; query: %s",
			st.Name, m.Name, ms.Failures, ms.Evaluations, m.Failures, v.Detail, m.Query)
	}
	return ""
}

// analysisPending says why r's stage, its hold over, cannot pass on its
// analysis yet (a metric whose last evaluation did not pass: none made
// yet, inconclusive, failed below its limit, or not made), or "" when
// every metric's last evaluation passed.
func analysisPending(r *Rollout) string {
	var waits []string
	for _, ms := range r.Analysis {
		switch ms.Outcome {
		case string(analysis.Pass), outcomeSkipped:
			continue
		case "":
			waits = append(waits, ms.Name+" not evaluated yet")
		default:
			waits = append(waits, fmt.Sprintf("%s %s (%s)", ms.Name, ms.Outcome, ms.Detail))
		}
	}
	if len(waits) == 0 {
		return ""
	}
	return fmt.Sprintf("hold over; waiting for the analysis of stage %s: %s", r.StageName(), strings.Join(waits, "; "))
}
