package metrics

import (
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cuecast/cuecast"
)

// ConfigSample is the fleet's view of one config at one moment: what the
// distributor's Status says, plus the drift the sampler found in the reports.
type ConfigSample struct {
	Config cuecast.ConfigPath
	// Target is the latest version, whose propagation is measured.
	Target cuecast.Version
	// Instances live on the config; OnTarget of them apply Target, and
	// OnIntended run the version the rollout means each of them to run now
	// (distributor.Intent).
	Instances, OnTarget, OnIntended int
	// Stragglers are off their intended version for longer than the
	// distributor allows; LastKnownGood serve their last-known-good file;
	// Drifted report content cuecast did not publish for the version they
	// name; Unhealthy and Failing are as the distributor's Status counts them;
	// Refused refused a pointer as forged or unverifiable
	// (distributor.ConfigStatus.Refused; not failing).
	Stragglers, LastKnownGood, Drifted, Unhealthy, Failing, Refused int
}

// Coverage is OnIntended / Instances, the share of the fleet where the
// rollout means it to be now; ok is false with no instance (there is no
// share of nobody: the gauge is left out, rather than reading 1).
func (c ConfigSample) Coverage() (float64, bool) {
	if c.Instances == 0 {
		return 0, false
	}
	return float64(c.OnIntended) / float64(c.Instances), true
}

// Share is OnTarget / Instances, the share of the fleet applying the latest
// version (propagation's measure); 1 with no instance.
func (c ConfigSample) Share() float64 {
	if c.Instances == 0 {
		return 1
	}
	return float64(c.OnTarget) / float64(c.Instances)
}

// Rejection is one commit the tailer rejected and the IDs of its errors.
type Rejection struct {
	Commit string
	IDs    []string
}

// TailerSample is the tailer's state at one moment.
type TailerSample struct {
	// Lag is how many first-parent commits the branch tip is ahead of the
	// tailer's cursor; negative when unknown.
	Lag int
	// Halted is set while a history rewrite halts publishing.
	Halted bool
	// Rejected are the rejected commits the tailer still lists.
	Rejected []Rejection
}

type fleetSample struct {
	at      time.Time
	configs []ConfigSample
}

type tailerSample struct {
	set bool
	TailerSample
}

// ObserveFleet records a sample of every config for the coverage and
// instance gauges. Configs missing from the sample disappear from the gauges.
func (m *Metrics) ObserveFleet(at time.Time, configs []ConfigSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.fleet = fleetSample{at: at, configs: slices.Clone(configs)}
}

// ObservePropagation records the share of one config's live instances on its
// target version at one moment, for the propagation chart and
// cuecast_propagation_seconds. Call it whenever that share may have changed
// (a report arrived, a new target): a crossing is timed at the first call
// that sees it.
func (m *Metrics) ObservePropagation(at time.Time, c ConfigSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, r := range m.prop.observe(at, c) {
		m.propagation.WithLabelValues(c.Config.Namespace(), r.coverage).Observe(r.elapsed.Seconds())
	}
}

// PublishedVersion returns the newest version of cfg this process published,
// if any: the target of its fleet before the distributor's status says so.
func (m *Metrics) PublishedVersion(cfg cuecast.ConfigPath) (cuecast.Version, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.prop.ours[cfg]
	return v, ok
}

// Published tells the propagation tracker that this process published v, so
// that its propagation is measured even when the first sample after the
// publish already finds it everywhere. Publisher calls it.
func (m *Metrics) Published(v cuecast.Version) {
	m.mu.Lock()
	m.prop.published(v)
	hook := m.onPublish
	m.mu.Unlock()
	if hook != nil {
		hook(v)
	}
}

// OnPublish sets a function called after each version this process
// publishes (see Published), outside the Metrics' lock. The operations server
// uses it to measure the fleet at the moment of publication: a version whose
// fleet was empty then is not counted as propagating to the instances that
// come later.
func (m *Metrics) OnPublish(f func(cuecast.Version)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.onPublish = f
}

// ObserveTailer records the tailer's lag and halt, and counts the errors of
// rejected commits it has not seen before by ID. The first sample only
// learns which commits were already rejected before this process started.
func (m *Metrics) ObserveTailer(s TailerSample) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tailer = tailerSample{set: true, TailerSample: s}
	for _, rj := range s.Rejected {
		if m.seenRejected[rj.Commit] {
			continue
		}
		m.seenRejected[rj.Commit] = true
		if !m.primed {
			continue
		}
		for _, id := range rj.IDs {
			if id == "" {
				id = "unknown"
			}
			m.rejections.WithLabelValues(id).Inc()
		}
	}
	m.primed = true
}

// sampled exports the latest samples as gauges. It is a collector of its
// own so that a scrape sees one consistent sample, and configs that vanished
// vanish from the output.
type sampled struct{ m *Metrics }

var (
	descCoverage = perConfig("cuecast_config_coverage_ratio",
		"Share of the config's live instances on the version the rollout means each to run now (stage, cohort, halt, pin); absent with no instance.")
	descTarget = perConfig("cuecast_config_target_version",
		"The config's latest version number, whose propagation is measured.")
	descInstances = perConfig("cuecast_config_instances",
		"Live instances reporting on the config.")
	descOnTarget = perConfig("cuecast_config_instances_on_target",
		"Live instances applying the config's target (latest) version.")
	descStragglers = perConfig("cuecast_config_stragglers",
		"Instances not on the version the rollout means them to run now for longer than the straggler threshold.")
	descLKG = perConfig("cuecast_config_instances_last_known_good",
		"Instances serving their last-known-good file because they could not confirm it with cuecast.")
	descDrifted = perConfig("cuecast_config_instances_drifted",
		"Instances reporting a checksum other than the one cuecast published for the version they name.")
	descUnhealthy = perConfig("cuecast_config_instances_unhealthy",
		"Instances whose own health check says unhealthy.")
	descFailing = perConfig("cuecast_config_instances_failing",
		"Instances whose last apply failed.")
	descRefused = perConfig("cuecast_config_instances_refused",
		"Instances whose last report says they refused a pointer as forged or unverifiable (a bad signature, an untrusted key); not failing.")
	descLag = prometheus.NewDesc("cuecast_tailer_lag_commits",
		"First-parent commits on the followed branch that the tailer has not processed yet.", nil, nil)
	descHalted = prometheus.NewDesc("cuecast_tailer_halted",
		"1 while a history rewrite (force push) halts publishing, else 0.", nil, nil)
	descRollouts = prometheus.NewDesc("cuecast_rollouts",
		"Rollouts by state.", []string{"state"}, nil)
	descSampleAge = prometheus.NewDesc("cuecast_fleet_sample_timestamp_seconds",
		"When the fleet gauges were last sampled (Unix time).", nil, nil)
)

// perConfig describes a gauge with one series per config path.
func perConfig(name, help string) *prometheus.Desc {
	return prometheus.NewDesc(name, help, []string{"config"}, nil)
}

func (s sampled) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCoverage, descTarget, descInstances, descOnTarget, descStragglers,
		descLKG, descDrifted, descUnhealthy, descFailing, descRefused, descLag, descHalted, descRollouts, descSampleAge} {
		ch <- d
	}
}

func (s sampled) Collect(ch chan<- prometheus.Metric) {
	m := s.m
	m.mu.Lock()
	defer m.mu.Unlock()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	if !m.fleet.at.IsZero() {
		gauge(descSampleAge, float64(m.fleet.at.UnixNano())/1e9)
	}
	for _, c := range m.fleet.configs {
		cfg := string(c.Config)
		if cov, ok := c.Coverage(); ok {
			gauge(descCoverage, cov, cfg)
		}
		gauge(descTarget, float64(c.Target.Version), cfg)
		gauge(descInstances, float64(c.Instances), cfg)
		gauge(descOnTarget, float64(c.OnTarget), cfg)
		gauge(descStragglers, float64(c.Stragglers), cfg)
		gauge(descLKG, float64(c.LastKnownGood), cfg)
		gauge(descDrifted, float64(c.Drifted), cfg)
		gauge(descUnhealthy, float64(c.Unhealthy), cfg)
		gauge(descFailing, float64(c.Failing), cfg)
		gauge(descRefused, float64(c.Refused), cfg)
	}
	if m.tailer.set {
		if m.tailer.Lag >= 0 {
			gauge(descLag, float64(m.tailer.Lag))
		}
		halted := 0.0
		if m.tailer.Halted {
			halted = 1
		}
		gauge(descHalted, halted)
	}
	for state, n := range m.rollouts {
		gauge(descRollouts, float64(n), state)
	}
}

func formatCoverage(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }
