package cuecast

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The comparisons a Metric makes. Every one reads "higher is worse": write
// a success rate as its failure rate (1 - success) to judge it.
const (
	// CompareDifference breaches when cohort − baseline > Max.
	CompareDifference = "difference"
	// CompareRatio breaches when cohort ÷ baseline > Max; a baseline of 0
	// under a cohort above 0 breaches.
	CompareRatio = "ratio"
	// CompareThreshold breaches when cohort > Max; no baseline is queried.
	CompareThreshold = "threshold"
	// CompareMannWhitney breaches when a one-sided Mann-Whitney U test over
	// the query's points in the last Interval, cohort against baseline,
	// says the cohort's are higher with p < Alpha (as Kayenta judges a
	// metric), and the cohort's median exceeds the baseline's by more than
	// Max.
	CompareMannWhitney = "mann-whitney"
)

// Metric is one measure of a stage's analysis (docs/ROLLOUT.md,
// "Analysis"): a PromQL query the controller runs twice, once for the
// stage's cohort (the instances running the rollout's version) and once
// for the baseline (those still on the version it started from), filling
// the placeholders:
//
//   - $selector: config="<config>",version="<version>", the label
//     matchers of the cuecast_config_info series of that side, to join the
//     service's own series with `* on(instance) group_left
//     cuecast_config_info{$selector}`;
//   - $config and $version: the same values alone;
//   - $interval: Interval as a PromQL duration, for range windows.
//
// A query returns one value per side (aggregate it: sum, avg,
// histogram_quantile); Mann-Whitney takes every point of every series the
// query returns over the last Interval instead.
type Metric struct {
	Name  string `json:"name"`
	Query string `json:"query"`
	// Compare is one of the Compare* constants; Max its threshold.
	Compare string  `json:"compare"`
	Max     float64 `json:"max"`
	// Samples, when set, is a query of the number of observations behind
	// a side's value (requests, say), with the same placeholders; a side
	// with fewer than MinSamples makes the evaluation inconclusive: it
	// neither fails nor lets the stage pass. Without Samples, MinSamples
	// counts the points a Mann-Whitney test has on each side; for the
	// other comparisons MinSamples needs Samples (Validate).
	Samples    string  `json:"samples,omitempty"`
	MinSamples float64 `json:"min_samples,omitempty"`
	// Interval is how often the metric is evaluated while the stage holds,
	// the first time one Interval after the hold starts. Default 1m.
	Interval Duration `json:"interval,omitempty"`
	// Failures is how many failed evaluations in a stage halt it; default 1.
	Failures int `json:"failures,omitempty"`
	// MaxErrors is how many evaluations in a row may fail to be made
	// (Prometheus unreachable, a query error) before the stage halts;
	// until then the stage waits. Default 3.
	MaxErrors int `json:"max_errors,omitempty"`
	// Alpha is Mann-Whitney's significance level, its false-positive
	// rate per evaluation; default 0.05.
	Alpha float64 `json:"alpha,omitempty"`
}

// The defaults of a Metric's optional fields.
const (
	DefaultMetricInterval  = time.Minute
	DefaultMetricFailures  = 1
	DefaultMetricMaxErrors = 3
	DefaultMetricAlpha     = 0.05
)

// WithDefaults is m with its unset optional fields set to their defaults.
func (m Metric) WithDefaults() Metric {
	if m.Interval == 0 {
		m.Interval = Duration(DefaultMetricInterval)
	}
	if m.Failures == 0 {
		m.Failures = DefaultMetricFailures
	}
	if m.MaxErrors == 0 {
		m.MaxErrors = DefaultMetricMaxErrors
	}
	if m.Alpha == 0 && m.Compare == CompareMannWhitney {
		m.Alpha = DefaultMetricAlpha
	}
	return m
}

// placeholder matches a $word in a query.
var placeholder = regexp.MustCompile(`\$[A-Za-z_][A-Za-z0-9_]*`)

// Expand fills query's placeholders for one side: the instances of cfg
// running version.
func (m Metric) Expand(query string, cfg ConfigPath, version uint64) string {
	return placeholder.ReplaceAllStringFunc(query, func(p string) string {
		switch p {
		case "$selector":
			return fmt.Sprintf("config=%q,version=%q", string(cfg), strconv.FormatUint(version, 10))
		case "$config":
			return string(cfg)
		case "$version":
			return strconv.FormatUint(version, 10)
		case "$interval":
			return promDuration(time.Duration(m.WithDefaults().Interval))
		}
		return p
	})
}

// promDuration writes d as PromQL does: whole milliseconds, seconds,
// minutes or hours ("1m", "30s", "1500ms").
func promDuration(d time.Duration) string {
	switch {
	case d%time.Hour == 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Minute == 0:
		return fmt.Sprintf("%dm", d/time.Minute)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// ErrBadMetric is wrapped by Metric.Validate's errors.
var ErrBadMetric = errors.New("bad analysis metric")

// MetricError is what Metric.Validate finds wrong with a metric. It wraps
// ErrBadMetric.
type MetricError struct {
	Metric string
	// Field is the metric's field at fault ("query", "samples",
	// "min_samples", …), for a checker to point at; "" when the metric as
	// a whole is.
	Field string
	Msg   string
}

func (e *MetricError) Error() string { return fmt.Sprintf("metric %q: %s", e.Metric, e.Msg) }

func (e *MetricError) Unwrap() error { return ErrBadMetric }

// Validate reports what makes m unusable, as cuecast check says it: an
// unknown comparison or placeholder, a query that cannot tell the cohort
// from the baseline (no $selector nor $version outside its # comments),
// brackets or quotes that do not close. It does not parse PromQL fully: `cuecast check
// --prometheus URL` has Prometheus parse each query too
// (analysis.Prometheus.Check).
func (m Metric) Validate() error {
	bad := func(field, format string, args ...any) error {
		return &MetricError{Metric: m.Name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch m.Compare {
	case CompareDifference, CompareRatio, CompareThreshold, CompareMannWhitney:
	default:
		return bad("compare", "compare %q: want difference, ratio, threshold or mann-whitney", m.Compare)
	}
	if m.Name == "" {
		return bad("", "no name")
	}
	if m.Alpha < 0 || m.Alpha >= 0.5 {
		return bad("alpha", "alpha %v: want a level in (0, 0.5)", m.Alpha)
	}
	if m.Failures < 0 || m.MaxErrors < 0 || m.MinSamples < 0 {
		return bad("", "failures, max_errors and min_samples cannot be negative")
	}
	if m.MinSamples > 0 && m.Samples == "" && m.Compare != CompareMannWhitney {
		// One value per side: without a samples query nothing counts
		// what lies behind it, and the minimum would silently not hold.
		return bad("min_samples", "min_samples: without a samples query there is nothing to count (%s compares one value per side): "+
			"add samples, the query of the observations behind a side's value, or drop min_samples", m.Compare)
	}
	for _, q := range []struct{ field, text string }{{"query", m.Query}, {"samples", m.Samples}} {
		if q.text == "" {
			if q.field == "query" {
				return bad("", "no query")
			}
			continue
		}
		// Prometheus reads nothing in a comment: a $selector there would
		// measure the cohort and the baseline alike and always pass.
		q.text = uncommented(q.text)
		for _, p := range placeholder.FindAllString(q.text, -1) {
			switch p {
			case "$selector", "$config", "$version", "$interval":
			default:
				return bad(q.field, "%s: unknown placeholder %s: use $selector, $config, $version or $interval", q.field, p)
			}
		}
		if m.Compare != CompareThreshold && !strings.Contains(q.text, "$selector") && !strings.Contains(q.text, "$version") {
			return bad(q.field, "%s: it names neither $selector nor $version, so the cohort and the baseline would be measured alike; "+
				"join cuecast_config_info{$selector}", q.field)
		}
		if err := balanced(q.text); err != nil {
			return bad(q.field, "%s: %v", q.field, err)
		}
	}
	return nil
}

// uncommented is q with its PromQL comments (# to the end of the line,
// outside string literals) blanked out, each byte a space, so columns
// still count in q.
func uncommented(q string) string {
	b := []byte(q)
	var quote byte
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case quote != 0:
			if c == quote && b[i-1] != '\\' {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '#':
			for ; i < len(b) && b[i] != '\n'; i++ {
				b[i] = ' '
			}
		}
	}
	return string(b)
}

// balanced checks that a PromQL query's brackets and quotes close, in
// order, outside its string literals.
func balanced(q string) error {
	var open []rune
	var quote rune
	closer := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for i, c := range q {
		switch {
		case quote != 0:
			if c == quote && (i == 0 || q[i-1] != '\\') {
				quote = 0
			}
		case c == '"' || c == '\'' || c == '`':
			quote = c
		case c == '(' || c == '[' || c == '{':
			open = append(open, c)
		case closer[c] != 0:
			if len(open) == 0 || open[len(open)-1] != closer[c] {
				return fmt.Errorf("unexpected %q at column %d", c, i+1)
			}
			open = open[:len(open)-1]
		}
	}
	switch {
	case quote != 0:
		return fmt.Errorf("unterminated string (%c)", quote)
	case len(open) > 0:
		return fmt.Errorf("unclosed %q", open[len(open)-1])
	}
	return nil
}
