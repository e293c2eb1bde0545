package rollout

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
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

// maxMeasuring bounds the queries the controller has Prometheus run at
// once, over every rollout: a stage's metrics are measured together, so
// one that does not answer costs the stage one query timeout, not one per
// metric, without a many-metric stage flooding Prometheus.
const maxMeasuring = 8

// measurement is one metric's measure, made for the evaluation of
// rollout id's stage due at due (its MetricState.Next then): one that
// answers another evaluation is dropped.
type measurement struct {
	id     string
	stage  int
	metric int
	due    time.Time
	res    analysis.Result
	err    error
}

// matches says whether m answers the evaluation of r's metric i now due.
func (m measurement) matches(r *Rollout, i int) bool {
	return m.id == r.ID && m.stage == r.Stage && m.metric == i && i < len(r.Analysis) && m.due.Equal(r.Analysis[i].Next)
}

// toMeasure lists the metrics of r's holding stage due at now that need
// Prometheus: every due one but a comparison without a baseline, and none
// when there is no Analyzer to ask.
func (c *Controller) toMeasure(r *Rollout, now time.Time, alone int) []int {
	if c.o.Analyzer == nil || r.State != StateHolding || len(r.Analysis) == 0 || r.Stage >= len(r.Policy.Stages) {
		return nil
	}
	st := r.Policy.Stages[r.Stage]
	if len(st.Analysis) != len(r.Analysis) {
		return nil
	}
	var out []int
	for i, ms := range r.Analysis {
		if !now.Before(ms.Next) && !NoBaseline(r, st, st.Analysis[i]) && !(alone > 0 && compares(st.Analysis[i])) {
			out = append(out, i)
		}
	}
	return out
}

// measure has the Analyzer measure metrics idx of r's stage, together,
// at most maxMeasuring queries at once over the controller (slots), and
// returns what it got; those cut short by ctx are left out. It reads
// only the copy of r it is given.
func (c *Controller) measure(ctx context.Context, slots chan struct{}, r Rollout, idx []int, now time.Time) []measurement {
	st := r.Policy.Stages[r.Stage]
	out := make([]measurement, len(idx))
	var wg sync.WaitGroup
	for k, i := range idx {
		out[k] = measurement{id: r.ID, stage: r.Stage, metric: i, due: r.Analysis[i].Next}
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				out[k].err = ctx.Err()
				return
			}
			defer func() { <-slots }()
			out[k].res, out[k].err = c.o.Analyzer.Measure(ctx, st.Analysis[i], r.Config, r.Version, r.From, now)
		}()
	}
	wg.Wait()
	if ctx.Err() != nil {
		// The controller is stopping, or a command took the stage over:
		// no evaluation was made.
		return nil
	}
	return out
}

// putMeasured keeps ms for cfg's next step (the caller holds c.mu).
func (c *Controller) putMeasured(cfg cuecast.ConfigPath, ms []measurement) {
	if c.measured == nil {
		c.measured = map[cuecast.ConfigPath][]measurement{}
	}
	c.measured[cfg] = append(c.measured[cfg], ms...)
}

// takeMeasured removes cfg's measurements and returns those that answer
// r's evaluations now due, by metric (the caller holds c.mu).
func (c *Controller) takeMeasured(cfg cuecast.ConfigPath, r *Rollout) map[int]measurement {
	got := map[int]measurement{}
	for _, m := range c.measured[cfg] {
		if m.matches(r, m.metric) {
			got[m.metric] = m
		}
	}
	delete(c.measured, cfg)
	return got
}

// analyze evaluates the metrics of r's holding stage that are due, and
// halts r (halt, as a health breach does) when one fails its limit. It
// reports whether r changed. alone, when above 0, is the number of live
// instances, every one of them in the cohort: a comparison then has no
// baseline, and is inconclusive without asking Prometheus. Under Run, Prometheus is asked outside the
// command loop (runner.measure) and a due metric without its measurement
// yet waits for it, so that an operator's command is never held up by a
// Prometheus that does not answer; without Run (an operator's or a
// test's step), the due metrics are measured here, together.
func (c *Controller) analyze(ctx context.Context, rec *Record, r *Rollout, alone int, now time.Time) ([]AuditEntry, bool) {
	if r.State != StateHolding || len(r.Analysis) == 0 {
		return nil, false
	}
	st := r.Policy.Stages[r.Stage]
	if len(st.Analysis) != len(r.Analysis) {
		return nil, false // a record of another policy's shape; not ours to judge
	}
	got := c.takeMeasured(rec.Config, r)
	if !c.running {
		var missing []int
		for _, i := range c.toMeasure(r, now, alone) {
			if _, ok := got[i]; !ok {
				missing = append(missing, i)
			}
		}
		if len(missing) > 0 {
			ms := c.measure(ctx, make(chan struct{}, maxMeasuring), *r, missing, now)
			if ms == nil {
				return nil, false
			}
			for _, m := range ms {
				got[m.metric] = m
			}
		}
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
		case NoBaseline(r, st, m):
		case alone > 0 && compares(m):
			changed = true
			noneOutside(ms, m, rec.Config, alone, now)
			continue
		case c.o.Analyzer == nil:
			err = errNoAnalyzer
		default:
			mm, ok := got[i]
			if !ok {
				continue // being measured (runner.measure)
			}
			res, err = mm.res, mm.err
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

// NoBaseline says that comparison m of stage st of r has nothing to
// compare with: a first version (no version to fall back to), or a stage
// covering every bucket (nobody is left on the old version: by its
// percent, or as the running stage's cohort). Only a threshold is judged
// then. rollout analyze asks it of every stage, the controller of the
// running one.
func NoBaseline(r *Rollout, st cuecast.Stage, m cuecast.Metric) bool {
	if !compares(m) {
		return false
	}
	running := r.State.Active() && r.Stage < len(r.Policy.Stages) && r.Policy.Stages[r.Stage].Name == st.Name
	return r.From == 0 || st.Percent >= 100 || running && len(r.Cohort.Buckets) == cuecast.Buckets
}

// compares says whether m compares the cohort with a baseline.
func compares(m cuecast.Metric) bool { return m.Compare != cuecast.CompareThreshold }

// noneOutside records an evaluation of comparison m that found no
// baseline: every one of the n live instances of cfg is in the cohort (a
// stage of 70 % on a fleet whose instances all fall in its buckets). It is
// inconclusive, and so holds the stage, as the doc's rule for a missing
// side says: passing it would promote a version its analysis never
// judged. The comparison is made again as soon as an instance outside the
// cohort reports; until then an operator's advance passes the stage.
func noneOutside(ms *MetricState, m cuecast.Metric, cfg cuecast.ConfigPath, n int, now time.Time) {
	ms.Next = now.Add(time.Duration(m.WithDefaults().Interval))
	ms.Errors = 0
	ms.Inconclusive++
	ms.Outcome = string(analysis.Inconclusive)
	ms.Detail = fmt.Sprintf("no baseline: every live instance (%d) is in the cohort; it compares again when one outside reports, or `cuecast rollout advance %s` passes the stage without it", n, cfg)
}

// evaluated records one evaluation of metric m (its measure res, or the
// error that kept it from being made) in ms, and says why the stage halts,
// or "" when it does not. It is the pure half of analyze.
func evaluated(ms *MetricState, m cuecast.Metric, st cuecast.Stage, r *Rollout, res analysis.Result, err error, now time.Time) string {
	m = m.WithDefaults()
	ms.Next = now.Add(time.Duration(m.Interval))
	switch {
	case NoBaseline(r, st, m):
		ms.Outcome, ms.Detail = outcomeSkipped, "no baseline to compare with: a first version, or a stage covering everyone"
		return ""
	case err != nil:
		ms.Errors++
		ms.Outcome, ms.Detail = outcomeError, err.Error()
		if ms.Errors >= m.MaxErrors {
			return fmt.Sprintf("stage %s: analysis %s could not be evaluated %d times in a row (max_errors %d): %v; %s",
				st.Name, m.Name, ms.Errors, m.MaxErrors, err, queriesRun(m, r))
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
		return fmt.Sprintf("stage %s: analysis %s failed %d of %d evaluations (failures %d halt): %s; %s",
			st.Name, m.Name, ms.Failures, ms.Evaluations, m.Failures, v.Detail, queriesRun(m, r))
	}
	return ""
}

// queriesRun is m's query as a halt's reason gives it: as run for r's
// cohort, placeholders filled, and for its baseline when m compares, so
// that the operator can run what the controller ran.
func queriesRun(m cuecast.Metric, r *Rollout) string {
	q := "query: " + m.Expand(m.Query, r.Config, r.Version)
	if compares(m) {
		q += "; baseline: " + m.Expand(m.Query, r.Config, r.From)
	}
	return q
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
