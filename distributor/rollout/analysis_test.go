package rollout_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/analysis"
	"github.com/cuecast/cuecast/client/prominfo"
	"github.com/cuecast/cuecast/distributor/rollout"
	"github.com/cuecast/cuecast/internal/cli"
	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/poll"
	"github.com/cuecast/cuecast/internal/promtest"
)

// service is a small service embedding the client: at every scrape it
// "handles" requestsPerScrape requests at the error rate and latency its
// config says, counted in its own registry with the client's
// cuecast_config_info series (prominfo), so a bad config version in the
// cohort shows as a regression in Prometheus, and exactly as bad every run.
type service struct {
	in      *instance
	metrics http.Handler
}

const requestsPerScrape = 1000

// serviceConfig is the content of a version: the service's behaviour.
func serviceConfig(n int, errorRate float64, latencyMS int) []byte {
	return fmt.Appendf(nil, `{"limit":%d,"error_rate":%g,"latency_ms":%d}`, n, errorRate, latencyMS)
}

func (e *env) service(id string) *service {
	e.t.Helper()
	in := e.instance(id)
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_requests_total", Help: "Requests handled."})
	errs := prometheus.NewCounter(prometheus.CounterOpts{Name: "svc_errors_total", Help: "Requests failed."})
	latency := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "svc_latency_seconds", Help: "Request latency.",
		Buckets: []float64{0.025, 0.05, 0.1, 0.2, 0.4, 0.8}})
	reg.MustRegister(requests, errs, latency, prominfo.New(in.cl))
	metrics := promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	var mu sync.Mutex
	s := &service{in: in}
	s.metrics = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var c struct {
			ErrorRate float64 `json:"error_rate"`
			LatencyMS int     `json:"latency_ms"`
		}
		if cur := in.w.Current(); len(cur.Content) > 0 && json.Unmarshal(cur.Content, &c) == nil {
			mu.Lock()
			requests.Add(requestsPerScrape)
			errs.Add(math.Round(c.ErrorRate * requestsPerScrape))
			for range requestsPerScrape {
				latency.Observe(float64(c.LatencyMS) / 1000)
			}
			mu.Unlock()
		}
		metrics.ServeHTTP(w, r)
	})
	return s
}

// slot is a scrape target whose service a scenario replaces: Prometheus
// keeps scraping the same four targets, since it applies a change of
// targets only every 5 s.
type slot struct {
	srv *httptest.Server
	cur atomic.Pointer[service]
}

func newSlot(t *testing.T) *slot {
	sl := &slot{}
	sl.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := sl.cur.Load(); s != nil {
			s.metrics.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(sl.srv.Close)
	return sl
}

func (sl *slot) target() string { return strings.TrimPrefix(sl.srv.URL, "http://") }

// The analysis' queries, as docs/ROLLOUT.md gives them to copy.
const (
	errorRateQuery = `sum(increase(svc_errors_total[$interval]) * on(instance) group_left cuecast_config_info{$selector})
  / sum(increase(svc_requests_total[$interval]) * on(instance) group_left cuecast_config_info{$selector})`
	requestsQuery = `sum(increase(svc_requests_total[$interval]) * on(instance) group_left cuecast_config_info{$selector})`
	latencyQuery  = `histogram_quantile(0.9, sum by (le) (rate(svc_latency_seconds_bucket[$interval]) * on(instance) group_left cuecast_config_info{$selector}))`
)

// evalEvery is the metrics' interval, and their window: Prometheus
// scrapes five times in it.
const evalEvery = 500 * time.Millisecond

func errorRate(minSamples float64) cuecast.Metric {
	return cuecast.Metric{Name: "error_rate", Query: errorRateQuery, Compare: cuecast.CompareDifference, Max: 0.01,
		Samples: requestsQuery, MinSamples: minSamples, Interval: cuecast.Duration(evalEvery), Failures: 2, MaxErrors: 2}
}

var p90Latency = cuecast.Metric{Name: "p90_latency", Query: latencyQuery, Compare: cuecast.CompareRatio, Max: 1.5,
	Interval: cuecast.Duration(evalEvery), Failures: 1, MaxErrors: 2}

// analysisPolicy is canary (svc-0) and half (svc-0, svc-1), each holding
// hold and judged by metrics, then everyone.
func analysisPolicy(hold time.Duration, metrics ...cuecast.Metric) cuecast.Policy {
	return cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"svc-0"}, Hold: cuecast.Duration(hold), Analysis: metrics},
		{Name: "half", Instances: []string{"svc-0", "svc-1"}, Hold: cuecast.Duration(hold), Analysis: metrics},
		{Name: "all", Percent: 100},
	}}
}

// TestAnalysisJudgesCohortAgainstBaseline runs the scenarios with
// a real Prometheus scraping four real instances (one Prometheus, a fresh
// server, controller and fleet per scenario): a cohort at 5 % errors
// against a baseline at 0.1 % halts within three evaluations; equal rates
// pass every stage; a latency regression halts; too few samples waits;
// Prometheus stopped mid-stage waits, then halts saying so. Each halt's
// reason names the query, both values and the threshold.
func TestAnalysisJudgesCohortAgainstBaseline(t *testing.T) {
	t.Parallel()
	var slots []*slot
	var targets []string
	for range 4 {
		sl := newSlot(t)
		slots = append(slots, sl)
		targets = append(targets, sl.target())
	}
	prom := promtest.Start(t, evalEvery/5, targets...)
	prom.WaitUp(targets)
	pa, err := analysis.New(prom.URL, analysis.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// start publishes v1 (everyone at base) to a fresh fleet of four
	// scraped services and returns the env once Prometheus has scraped
	// them on v1.
	start := func(t *testing.T, pol cuecast.Policy, base []byte) (*env, []*instance) {
		e := newEnvSet(t, pol, cuecast.Relaxed, func(e *env) { e.opts = func(o *rollout.Options) { o.Analyzer = pa } })
		var ins []*instance
		for i, sl := range slots {
			s := e.service(fmt.Sprintf("svc-%d", i))
			sl.cur.Store(s)
			ins = append(ins, s.in)
		}
		// v1 reaches everyone at once, as a config deployed before the
		// controller existed is found (env.baseline).
		if err := e.d.Deploy(t.Context(), e.publish(1, base)); err != nil {
			t.Fatalf("Deploy v1: %v", err)
		}
		waitOn(t, 1, ins...)
		// Every point in the analysis' window ($interval) is this
		// scenario's, not the last one's.
		prom.WaitScraped(time.Now().Add(evalEvery))
		return e, ins
	}
	// halted waits for v's rollout to halt in the canary stage and for the
	// canary to be back on v1, and checks the audit names the same reason.
	halted := func(e *env, v uint64, canary *instance) rollout.Record {
		e.waitState(v, rollout.StateHalted, 0)
		var rec rollout.Record
		poll.Until(e.t, "the halt carried out", poll.Patience, func() (bool, string) {
			rec = e.record()
			return rec.Current.Reverted, fmt.Sprintf("%s, reverted %t", rec.Current.State, rec.Current.Reverted)
		})
		waitOn(e.t, 1, canary)
		audit, err := e.c.Audit(e.t.Context(), cfg)
		if err != nil {
			e.t.Fatalf("Audit: %v", err)
		}
		if len(audit) != 1 || audit[0].Action != "halt" || audit[0].Reason != rec.Current.Reason {
			e.t.Errorf("audit %+v, want one halt saying %q", audit, rec.Current.Reason)
		}
		return rec
	}

	t.Run("error rate 5% against 0.1% halts within three evaluations", func(t *testing.T) {
		e, ins := start(t, analysisPolicy(time.Minute, errorRate(100)), serviceConfig(1, 0.001, 50))
		e.deploy(e.publish(2, serviceConfig(2, 0.05, 50)))
		rec := halted(e, 2, ins[0])
		ms := rec.Current.Analysis[0]
		if ms.Evaluations > 3 {
			t.Errorf("halted after %d evaluations, want ≤ 3 (and %d without enough data)", ms.Evaluations, ms.Inconclusive)
		}
		for _, want := range []string{"stage canary: analysis error_rate failed 2 of", "cohort 0.05 − baseline 0.001 = 0.049 > max 0.01", "query: sum(increase(svc_errors_total[500ms])",
			`cuecast_config_info{config="payments/checkout",version="2"}`, `; baseline: sum(increase(svc_errors_total[500ms])`, `cuecast_config_info{config="payments/checkout",version="1"}`} {
			if !strings.Contains(rec.Current.Reason, want) {
				t.Errorf("reason %q, want it to contain %q", rec.Current.Reason, want)
			}
		}
	})

	t.Run("equal rates pass every stage", func(t *testing.T) {
		e, _ := start(t, analysisPolicy(2*evalEvery, errorRate(100), p90Latency), serviceConfig(1, 0.001, 50))
		e.deploy(e.publish(2, serviceConfig(2, 0.001, 50)))
		rec := e.waitState(2, rollout.StateComplete, -1)
		var passed []string
		for _, s := range rec.Current.Log {
			if strings.HasPrefix(s.Detail, "passed") {
				passed = append(passed, s.Stage)
			}
		}
		if fmt.Sprint(passed) != "[canary half]" {
			t.Errorf("stages passed %v, want [canary half] (then complete); log %+v", passed, rec.Current.Log)
		}
	})

	t.Run("latency regression halts", func(t *testing.T) {
		e, ins := start(t, analysisPolicy(time.Minute, p90Latency), serviceConfig(1, 0.001, 30))
		e.deploy(e.publish(2, serviceConfig(2, 0.001, 300)))
		rec := halted(e, 2, ins[0])
		for _, want := range []string{"analysis p90_latency failed 1 of 1", "÷ baseline", "> max 1.5", "histogram_quantile(0.9"} {
			if !strings.Contains(rec.Current.Reason, want) {
				t.Errorf("reason %q, want it to contain %q", rec.Current.Reason, want)
			}
		}
	})

	t.Run("too few samples waits", func(t *testing.T) {
		e, _ := start(t, analysisPolicy(evalEvery, errorRate(1e9)), serviceConfig(1, 0.001, 50))
		e.deploy(e.publish(2, serviceConfig(2, 0.05, 50)))
		// Inconclusive either way: too few samples, or, when a loaded box
		// delayed a scrape past the window, none ("no data for the
		// cohort"). Waited for until an evaluation counted too few.
		rec := e.waitAnalysis(2, func(ms rollout.MetricState) bool {
			return ms.Inconclusive >= 3 && strings.Contains(ms.Detail, "too few samples")
		})
		if cur := rec.Current; cur.State != rollout.StateHolding || cur.Stage != 0 || !strings.Contains(cur.Note, "too few samples") {
			t.Errorf("after 3 inconclusive evaluations: %s at stage %d, note %q; want holding at canary, waiting for samples", cur.State, cur.Stage, cur.Note)
		}
		// rollout status shows the analysis; rollout analyze runs it now
		// (each as of its evaluation: looked at again after one without
		// data, as above).
		for _, args := range [][]string{{"status", string(cfg)}, {"analyze", string(cfg), "--prometheus", prom.URL}} {
			poll.Until(t, "cuecast rollout "+args[0]+" showing error_rate inconclusive for too few samples", poll.Patience, func() (bool, string) {
				out := e.cli(append([]string{"rollout"}, args...)...)
				return strings.Contains(out, "error_rate") && strings.Contains(out, "inconclusive") && strings.Contains(out, "too few samples: cohort"), out
			})
		}
	})

	t.Run("prometheus stopped mid-stage waits, then halts", func(t *testing.T) {
		e, ins := start(t, analysisPolicy(time.Minute, errorRate(100)), serviceConfig(1, 0.001, 50))
		e.deploy(e.publish(2, serviceConfig(2, 0.001, 50)))
		e.waitAnalysis(2, func(ms rollout.MetricState) bool { return ms.Outcome == string(analysis.Pass) })
		prom.Stop()
		rec := e.waitAnalysis(2, func(ms rollout.MetricState) bool { return ms.Errors >= 1 })
		if cur := rec.Current; cur.State != rollout.StateHolding && !strings.Contains(cur.Reason, "could not be evaluated") {
			t.Errorf("after one failed query: %s, reason %q; want holding (a failed query is no verdict)", cur.State, cur.Reason)
		}
		rec = halted(e, 2, ins[0])
		for _, want := range []string{"analysis error_rate could not be evaluated 2 times in a row (max_errors 2)", "connection refused", "query: "} {
			if !strings.Contains(rec.Current.Reason, want) {
				t.Errorf("reason %q, want it to contain %q", rec.Current.Reason, want)
			}
		}
	})
}

// waitAnalysis polls until v's rollout has an analysis whose first
// metric satisfies ok, or has halted.
func (e *env) waitAnalysis(v uint64, ok func(rollout.MetricState) bool) rollout.Record {
	e.t.Helper()
	var rec rollout.Record
	poll.Until(e.t, fmt.Sprintf("analysis of v%d", v), poll.Patience, func() (bool, string) {
		r := e.record()
		rec = r
		cur := r.Current
		if cur == nil || cur.Version != v || len(cur.Analysis) == 0 {
			return false, "no analysis yet"
		}
		return ok(cur.Analysis[0]) || cur.State == rollout.StateHalted, fmt.Sprintf("%s %+v", cur.State, cur.Analysis[0])
	})
	return rec
}

// cli runs a cuecast command against the env's server and returns its
// output; it fails the test on a non-zero exit (4, a halted rollout,
// included).
func (e *env) cli(args ...string) string {
	e.t.Helper()
	var out, errOut iostreams.SyncBuffer
	io := &iostreams.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}
	args = append(args, "--nats", e.srv.ClientURL())
	if code := cli.Main(e.t.Context(), args, io, func(string) string { return "" }); code != 0 {
		e.t.Fatalf("cuecast %s: exit %d, stderr %q", strings.Join(args, " "), code, errOut.String())
	}
	return out.String()
}

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

// silentPrometheus is a Prometheus that does not answer: it accepts
// connections and never replies, as a paused or overloaded one does. It
// counts the connections it accepted.
func silentPrometheus(t *testing.T) (url string, accepted *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = &atomic.Int64{}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + l.Addr().String(), accepted
}

// TestHaltDuringSlowAnalysis: an operator's halt is carried out while the
// stage's analysis waits on a Prometheus that does not answer. The
// controller asked its metrics one after another inside its command loop,
// so six metrics at a 20 s query timeout held a halt for two minutes (the
// CLI gives up after 30 s: "recorded but not carried out").
func TestHaltDuringSlowAnalysis(t *testing.T) {
	t.Parallel()
	const (
		metrics      = 6
		queryTimeout = 20 * time.Second
	)
	url, accepted := silentPrometheus(t)
	pa, err := analysis.New(url, analysis.Options{Timeout: queryTimeout})
	if err != nil {
		t.Fatal(err)
	}
	var ms []cuecast.Metric
	for i := range metrics {
		ms = append(ms, cuecast.Metric{Name: fmt.Sprintf("m%d", i), Query: `sum(svc_errors_total * on(instance) group_left cuecast_config_info{$selector})`,
			Compare: cuecast.CompareThreshold, Max: 1, Interval: cuecast.Duration(100 * time.Millisecond), MaxErrors: 3})
	}
	pol := cuecast.Policy{Stages: []cuecast.Stage{
		{Name: "canary", Instances: []string{"svc-0"}, Hold: cuecast.Duration(time.Hour), Analysis: ms},
		{Name: "all", Percent: 100},
	}}
	e := newEnvSet(t, pol, cuecast.Relaxed, func(e *env) { e.opts = func(o *rollout.Options) { o.Analyzer = pa } })
	e.baseline()
	canary := e.instance("svc-0")
	waitOn(t, 1, canary)
	e.deploy(e.publish(2, content(2)))
	e.waitState(2, rollout.StateHolding, 0)
	waitOn(t, 2, canary)
	poll.Until(t, "the analysis asking the silent Prometheus", poll.Patience, func() (bool, string) {
		return accepted.Load() > 0, "no connection yet"
	})

	// The operator's CLI: a controller without policies, which records the
	// halt and waits for serve's to carry it out.
	op, err := rollout.New(t.Context(), e.nc, e.d, nil, rollout.Options{Heartbeat: heartbeat, Logger: logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	halted := make(chan error, 1)
	go func() {
		_, err := op.Halt(context.Background(), cfg, rollout.Action{Actor: "ann", Reason: "prometheus is down, stop"})
		halted <- err
	}()
	// Well below one query's timeout, let alone six of them: not how fast
	// the halt is, but that it does not wait for the queries.
	bound := queryTimeout / 2
	poll.Until(t, "the operator's halt carried out", bound, func() (bool, string) {
		cur := e.record().Current
		return cur.State == rollout.StateHalted && cur.Reverted, fmt.Sprintf("%s, reverted %t, note %q", cur.State, cur.Reverted, cur.Note)
	})
	if err := poll.Receive(t, "the operator's halt returning", bound, halted); err != nil {
		t.Errorf("Halt: %v", err)
	}
	waitOn(t, 1, canary)
}
