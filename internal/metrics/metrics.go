// Package metrics holds the Prometheus collectors of `cuecast serve`: what the
// background write-ups say operators should measure (propagation time to
// coverage, share of instances on the target version, stragglers, drift,
// instances on last-known-good, halts and their causes, validation
// rejections) and the pipeline's own throughput (commits, compile time,
// versions published, tailer lag).
//
// The parts of the pipeline do not import this package. A Metrics observes
// them from outside, through three narrow doors:
//
//   - Publisher wraps the tailer's Publisher and counts the versions published;
//   - LogHandler wraps the slog.Handler the parts log through and reads the
//     events they log with fixed keys ("commit processed", "compiled", …);
//   - ObserveFleet, ObserveTailer and ObserveRollouts take samples of the
//     distributor's Status and reports, the tailer's State and the rollouts,
//     which the operations server (internal/web) reads periodically.
//
// Every collector is registered on the Metrics' own prometheus.Registry, never
// on the process-wide default one. No label carries an instance ID: labels are
// namespaces, config paths (bounded by the config repo), rollout states, halt
// causes and lint IDs. A Metrics is safe for concurrent use.
package metrics

import (
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/distributor"
	"github.com/cuecast/cuecast/internal/buildinfo"
)

// Result label values of cuecast_tailer_commits_total.
const (
	ResultPublished = "published" // the commit published at least one version
	ResultUnchanged = "unchanged" // the commit compiled and changed no config's output
	ResultRejected  = "rejected"  // the commit did not compile; nothing was published
)

// Metrics is the set of cuecast's collectors and the trackers that feed them.
type Metrics struct {
	reg *prometheus.Registry

	commits        *prometheus.CounterVec
	commitDuration prometheus.Histogram
	compile        prometheus.Histogram
	published      *prometheus.CounterVec
	publishErrors  prometheus.Counter
	propagation    *prometheus.HistogramVec
	rejections     *prometheus.CounterVec
	halts          *prometheus.CounterVec
	reportsDropped *prometheus.CounterVec
	drillWaits     *prometheus.CounterVec
	drillNotAsked  *prometheus.CounterVec

	mu       sync.Mutex
	fleet    fleetSample
	tailer   tailerSample
	rollouts map[string]int // state ▶ count
	prop     *propagation
	// seenRejected and seenHalts remember what was already counted, so that
	// samples of durable state count each event once.
	seenRejected map[string]bool
	seenHalts    map[string]bool
	primed       bool // the first tailer sample only primes seenRejected
	onPublish    func(cuecast.Version)
}

// Options configures a Metrics.
type Options struct {
	// Series is how many versions per config the propagation tracker keeps
	// for charts; default 5.
	Series int
	// Points is the most points one propagation series keeps; default 400.
	Points int
	// Build labels cuecast_build_info; default the running binary's.
	Build *buildinfo.Info
}

// New returns a Metrics with its own registry, holding the Go runtime and
// process collectors as well as cuecast's.
func New(o Options) *Metrics {
	if o.Series <= 0 {
		o.Series = 5
	}
	if o.Points <= 0 {
		o.Points = 400
	}
	if o.Build == nil {
		b := buildinfo.Read()
		o.Build = &b
	}
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "cuecast_build_info",
		Help: "Always 1; the labels say which cuecast is running (version, commit, Go version).",
	}, []string{"version", "commit", "go_version"})
	build.WithLabelValues(o.Build.Version, o.Build.Commit, o.Build.GoVersion).Set(1)
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		commits: counterVec("cuecast_tailer_commits_total",
			"Commits the tailer processed, by result: published, unchanged or rejected (did not compile).",
			"result", ResultPublished, ResultUnchanged, ResultRejected),
		commitDuration: secondsHistogram("cuecast_tailer_commit_duration_seconds",
			"Time to process one commit: compile, publish and deploy."),
		compile: secondsHistogram("cuecast_compile_duration_seconds",
			"Duration of each compile the tailer runs (affected configs, or the whole tree for an index)."),
		// Namespaces come and go with the repo: none is exported before it publishes.
		published: counterVec("cuecast_versions_published_total",
			"Versions published, tombstones included, by namespace.",
			"namespace"),
		publishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "cuecast_version_publish_errors_total",
			Help: "Publishes of a version or of its first pointers (its deploy) that failed (lost races included; the tailer retries them).",
		}),
		propagation: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "cuecast_propagation_seconds",
			Help: "Time from a version's commit being picked up on the branch (its compile) until the share of live " +
				"instances applying it first reached the coverage label (0.5 or 1), by namespace.",
			Buckets: prometheus.ExponentialBucketsRange(0.01, 3600, 20),
		}, []string{"namespace", "coverage"}),
		rejections: counterVec("cuecast_validation_rejections_total",
			"Errors in rejected commits, by compiler error ID (\"cue\", or a lint such as \"secret/aws-access-key\").",
			"id", RejectionIDs()...),
		halts: counterVec("cuecast_rollout_halts_total",
			"Rollout halts, by cause.",
			"cause", HaltCauses()...),
		reportsDropped: counterVec("cuecast_reports_dropped_total",
			"Report messages serve (or, in a tree, a region's summarizer) received and ignored, by reason: the body names "+
				"another instance or another config than the subject it was published on (instance, config), or it is no report (malformed).",
			"reason", distributor.DropReasons()...),
		drillWaits: counterVec("cuecast_dashboard_drilldown_waits_total",
			"Dashboard drill-downs into the regions that had to wait, by reason: a slot (all of serve's allowed drill-downs "+
				"were in flight) or their config's turn (another load's drill-down into the same config was under way).",
			"reason", DrillDownSlot, DrillDownTurn),
		drillNotAsked: counterVec("cuecast_dashboard_drilldowns_not_asked_total",
			"Dashboard drill-downs given up while waiting, by reason: busy (no slot was freed in time; the page says it did "+
				"not ask the regions) or closed (the page was closed).",
			"reason", DrillDownBusy, DrillDownClosed),
		rollouts:     map[string]int{},
		prop:         newPropagation(o.Series, o.Points),
		seenRejected: map[string]bool{},
		seenHalts:    map[string]bool{},
	}
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.commits, m.commitDuration, m.compile, m.published, m.publishErrors,
		m.propagation, m.rejections, m.halts, m.reportsDropped, m.drillWaits, m.drillNotAsked,
		build,
		sampled{m},
	)
	return m
}

// counterVec is a counter by one label, exported at 0 from the start for
// each of values (the documented results, causes, IDs and reasons): a
// counter that appears only at 1 has no earlier sample, so rate(), absent()
// and increase() never see its first event, and the documented alerts
// missed the first halt (issue 17, item 7).
func counterVec(name, help, label string, values ...string) *prometheus.CounterVec {
	c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, []string{label})
	for _, v := range values {
		c.WithLabelValues(v)
	}
	return c
}

// secondsHistogram times a step of the tailer, from a millisecond to the
// two minutes a commit may take.
func secondsHistogram(name, help string) prometheus.Histogram {
	return prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    name,
		Help:    help,
		Buckets: prometheus.ExponentialBucketsRange(0.001, 120, 16),
	})
}

// The causes of cuecast_rollout_halts_total, as docs/OPERATIONS.md lists them.
const (
	CauseUnhealthy         = "unhealthy"
	CauseApplyFailures     = "apply_failures"
	CauseStrictStageFailed = "strict_stage_failed"
	CauseStrictUnconfirmed = "strict_unconfirmed"
	CauseOperator          = "operator"
)

// HaltCauses are the values of cuecast_rollout_halts_total's cause label,
// each exported at 0 from the start.
func HaltCauses() []string {
	return []string{CauseUnhealthy, CauseApplyFailures, CauseStrictStageFailed, CauseStrictUnconfirmed, CauseOperator}
}

// RejectionIDs are the values of cuecast_validation_rejections_total's id
// label exported at 0 from the start: every error and lint ID the compiler
// defines, and "unknown" for an error without one.
func RejectionIDs() []string {
	return append(compiler.IDs(), "unknown")
}

// Registry is the registry holding every collector, for tests and for
// serving it elsewhere.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// CountHalt counts one halt of a rollout with its cause. key identifies the
// halt (rollout ID and time, say), so that the same halt seen twice in
// samples counts once; an empty key always counts.
func (m *Metrics) CountHalt(key, cause string) {
	if cause == "" {
		cause = "unknown"
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if key != "" {
		if m.seenHalts[key] {
			return
		}
		m.seenHalts[key] = true
	}
	m.halts.WithLabelValues(cause).Inc()
}

// DroppedReport counts one report message dropped for reason (a
// distributor.ReportError's Reason): its body disagrees with its subject.
// A reason not among distributor.DropReasons counts as malformed, so the
// label stays bounded.
func (m *Metrics) DroppedReport(reason string) { m.DroppedReports(reason, 1) }

// DroppedReports counts n report messages dropped for reason, as
// DroppedReport does: those a region's summarizer dropped, which its
// summary counts (distributor.Summary.Dropped).
func (m *Metrics) DroppedReports(reason string, n int) {
	if !slices.Contains(distributor.DropReasons(), reason) {
		reason = distributor.DropMalformed
	}
	m.reportsDropped.WithLabelValues(reason).Add(float64(n))
}

// The labels of the dashboard's drill-down counters: what a drill-down
// waited on (cuecast_dashboard_drilldown_waits_total's reason), and why one
// was given up (cuecast_dashboard_drilldowns_not_asked_total's reason).
const (
	DrillDownSlot   = "slot"
	DrillDownTurn   = "turn"
	DrillDownBusy   = "busy"
	DrillDownClosed = "closed"
)

// DrillDownWaited counts a dashboard drill-down that waited on a slot
// (DrillDownSlot) or its config's turn (DrillDownTurn).
func (m *Metrics) DrillDownWaited(reason string) { m.drillWaits.WithLabelValues(reason).Inc() }

// DrillDownNotAsked counts a dashboard drill-down given up while it
// waited: no slot in time (DrillDownBusy) or its page closed
// (DrillDownClosed).
func (m *Metrics) DrillDownNotAsked(reason string) { m.drillNotAsked.WithLabelValues(reason).Inc() }

// SeenHalt remembers a halt without counting it: one that happened before
// this process started, found by its first sample, so that a restart does not
// look like a new halt to increase().
func (m *Metrics) SeenHalt(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seenHalts[key] = true
}

// ObserveRollouts records how many rollouts are in each state.
func (m *Metrics) ObserveRollouts(byState map[string]int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rollouts = make(map[string]int, len(byState))
	for s, n := range byState {
		m.rollouts[s] = n
	}
}

// Propagation returns the propagation series kept for cfg, oldest version
// first: the share of live instances applying each version over time since
// its compile.
func (m *Metrics) Propagation(cfg cuecast.ConfigPath) []Series {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.prop.series(cfg)
}

// LogHandler wraps next so that the events the parts log feed the metrics;
// every record is passed on to next unchanged when next is enabled for its
// level. It reads, with fixed message texts and keys:
//
//   - "commit processed" (tailer; "versions", "elapsed"): a commit published
//     something or nothing, and how long it took;
//   - "commit affects no config" (tailer, debug): an unchanged commit;
//   - "commit rejected: …" (tailer): a rejected commit (its error IDs are
//     counted from the tailer's State, see ObserveTailer);
//   - "compiled" (compiler, debug; "elapsed"): one compile.
func (m *Metrics) LogHandler(next slog.Handler) slog.Handler {
	return &tap{m: m, next: next}
}

func (m *Metrics) observeCommit(result string, elapsed time.Duration) {
	m.commits.WithLabelValues(result).Inc()
	if elapsed > 0 {
		m.commitDuration.Observe(elapsed.Seconds())
	}
}
