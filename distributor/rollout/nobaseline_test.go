package rollout_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/promtest"
)

// TestEmptyBaselineHoldsSayingSo: a stage of 70 % whose live instances
// all fall in its buckets has no baseline to compare with. The controller
// asked Prometheus anyway and held on "inconclusive (no data for the
// baseline)", as if samples were short, with nothing to say that they
// would never come; it now says there is no baseline, names the advance
// that passes the stage without it, and compares again once an instance
// outside the cohort reports.
func TestEmptyBaselineHoldsSayingSo(t *testing.T) {
	t.Parallel()
	prom := promtest.Start(t, 100*time.Millisecond)
	pa, err := analysis.New(prom.URL, analysis.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := errorRate(1)
	m.Interval = cuecast.Duration(100 * time.Millisecond)
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "most", Percent: 70, Hold: cuecast.Duration(200 * time.Millisecond), Analysis: []cuecast.Metric{m}},
		{Name: "all", Percent: 100},
	}}
	e := newEnvSet(t, pol, cuecast.Relaxed, func(e *env) { e.opts = func(o *rollout.Options) { o.Analyzer = pa } })
	e.baseline()
	var ins []*instance
	for _, id := range idIn("in", 0, 70, 2) {
		ins = append(ins, e.instance(id))
	}
	waitOn(t, 1, ins...)
	e.deploy(e.publish(2, content(2)))
	waitOn(t, 2, ins...)
	want := "no baseline: every live instance (2) is in the cohort"
	rec := e.waitAnalysis(2, func(ms rollout.MetricState) bool { return strings.Contains(ms.Detail, want) })
	cur := rec.Current
	if ms := cur.Analysis[0]; cur.State != rollout.StateHolding || ms.Outcome != string(analysis.Inconclusive) {
		t.Fatalf("%s, %s %q; want holding, inconclusive saying %q", cur.State, ms.Outcome, ms.Detail, want)
	}
	poll.Until(t, "the note naming the missing baseline and the advance", poll.Patience, func() (bool, string) {
		n := e.record().Current.Note
		return strings.Contains(n, want) && strings.Contains(n, "cuecast rollout advance payments/checkout"), n
	})

	// An instance outside the cohort: the comparison is made again.
	out := e.instance(idIn("out", 70, 100, 1)[0])
	waitOn(t, 1, out)
	e.waitAnalysis(2, func(ms rollout.MetricState) bool {
		return ms.Outcome != "" && !strings.Contains(ms.Detail, "no baseline")
	})
	if cur := e.record().Current; cur.State != rollout.StateHolding || cur.Stage != 0 {
		t.Errorf("with a baseline and no data: %s at stage %d, want holding at stage 0 (%s)", cur.State, cur.Stage, fmt.Sprint(cur.Analysis))
	}
}
