package distributor

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"unicode/utf8"

	"github.com/cuecast/cuecast"
)

// ErrReportSubject is wrapped by DecodeReport's errors: a report message
// whose body names another instance or config than its subject, or that is
// no report at all.
var ErrReportSubject = errors.New("report disagrees with its subject")

// Why DecodeReport drops a report message: the values of ReportError.Reason
// and of the metric cuecast_reports_dropped_total's reason label.
const (
	// DropInstance: the body names another instance than the subject.
	DropInstance = "instance"
	// DropConfig: the body names another config (or namespace) than the
	// subject.
	DropConfig = "config"
	// DropMalformed: the subject is not a report subject with a valid
	// config and instance, or the body is not a report.
	DropMalformed = "malformed"
)

// DropReasons are the values of ReportError.Reason.
func DropReasons() []string { return []string{DropInstance, DropConfig, DropMalformed} }

// ReportError says why DecodeReport dropped a report message.
type ReportError struct {
	Subject string
	Reason  string // DropInstance, DropConfig or DropMalformed
	Detail  string
}

func (e *ReportError) Error() string {
	return fmt.Sprintf("report on %s: %s: %s", e.Subject, ErrReportSubject, e.Detail)
}

func (e *ReportError) Unwrap() error { return ErrReportSubject }

// DecodeReport is the one rule for reading a report (`cuecast status`, the
// dashboard, the metrics and the rollout controller all read through it):
// the report on subject, ccs.<ns>.<instance>.<name>, whose body must name
// the instance and config the subject does. The subject is what the
// server's permissions bind (an instance's own credential may report only
// on ccs.<ns>.<instance>.>, a namespace's only on ccs.<ns>.>); the body is
// whatever the sender wrote, so a body that disagrees is dropped rather
// than believed: it would let one instance fail, halt or hide another, or
// another namespace's config. The error is a *ReportError wrapping
// ErrReportSubject.
func DecodeReport(subject string, data []byte) (cuecast.Report, error) {
	cfg, instance, ok := cuecast.ParseReportSubject(subject)
	if !ok || cfg.Validate() != nil {
		return cuecast.Report{}, notReportSubject(subject)
	}
	return decodeReport(cfg, instance, data)
}

// notReportSubject is the error for a report on a subject that names no
// valid config and instance.
func notReportSubject(subject string) error {
	return &ReportError{Subject: subject, Reason: DropMalformed, Detail: "not a report subject"}
}

// decodeReport is DecodeReport for the report subject of cfg, a valid
// config, and instance: one config's LiveReports, which takes every report
// a summarizer or the hub hears, need not build the subject again only to
// parse it and check the config once more (BenchmarkSummarizerIngest).
func decodeReport(cfg cuecast.ConfigPath, instance string, data []byte) (cuecast.Report, error) {
	drop := func(reason, detail string) (cuecast.Report, error) {
		return cuecast.Report{}, &ReportError{Subject: cuecast.ReportSubject(cfg, instance), Reason: reason, Detail: detail}
	}
	if cuecast.ValidateInstance(instance) != nil {
		return cuecast.Report{}, notReportSubject(cuecast.ReportSubject(cfg, instance))
	}
	var r cuecast.Report
	if err := json.Unmarshal(data, &r); err != nil {
		return drop(DropMalformed, err.Error())
	}
	if r.Instance != instance {
		return drop(DropInstance, fmt.Sprintf("body names instance %q", r.Instance))
	}
	if r.Config != cfg {
		return drop(DropConfig, fmt.Sprintf("body names config %q", r.Config))
	}
	if r.Count != 0 {
		// Only a summary speaks for more than one instance, and only the
		// region's credential may publish one (DecodeSummary).
		return drop(DropMalformed, fmt.Sprintf("a report speaks for one instance, this one claims %d", r.Count))
	}
	bound(cfg, &r)
	return r, nil
}

// What one report may carry into what its readers keep and send on: a
// region's summary samples its instances' texts and groups them by their
// labels, and a drill-down answer carries whole reports, so one instance
// that writes a megabyte of last_error or labels on its own subject would
// otherwise make its region's summary too big for a message and silence
// the whole region (docs/PROTOCOL.md §4.3). DecodeReport cuts a report to
// these bounds, so every reader sees the same cut report.
const (
	// MaxReportText bounds, in bytes, a report's last_error, refused and
	// checksum (a hex SHA-256 is 64): a longer one is cut to it, at a rune
	// boundary, and ends with Truncated.
	MaxReportText = 1024
	// MaxLabels bounds a report's labels: beyond it, the config's variant
	// dimensions are kept and then the first keys by name.
	MaxLabels = 32
	// MaxLabelText bounds, in bytes, each label's key and value, cut as
	// MaxReportText cuts a text.
	MaxLabelText = 256
	// Truncated ends a text cut to its bound.
	Truncated = "…(truncated)"
)

// bound cuts r to the bounds above.
func bound(cfg cuecast.ConfigPath, r *cuecast.Report) {
	r.LastError = clip(r.LastError, MaxReportText)
	r.Refused = clip(r.Refused, MaxReportText)
	r.Checksum = clip(r.Checksum, MaxReportText)
	fits := len(r.Labels) <= MaxLabels
	for k, v := range r.Labels {
		fits = fits && len(k) <= MaxLabelText && len(v) <= MaxLabelText
	}
	if fits {
		return // every honest report: no copy
	}
	// The variant's dimensions first, since drift is judged by them
	// (DriftOf); then the rest in key order, so that the cut is the same
	// at every reader. A cut key that collides with one kept is dropped.
	keys := slices.Sorted(maps.Keys(r.Labels))
	var dims []string
	for _, dv := range cfg.Variant() {
		if _, ok := r.Labels[dv.Dim]; ok {
			dims = append(dims, dv.Dim)
		}
	}
	labels := make(map[string]string, MaxLabels)
	for _, k := range append(dims, keys...) {
		if len(labels) == MaxLabels {
			break
		}
		ck := clip(k, MaxLabelText)
		if _, kept := labels[ck]; !kept {
			labels[ck] = clip(r.Labels[k], MaxLabelText)
		}
	}
	r.Labels = labels
}

// clip is s cut to at most n bytes, at a rune boundary, followed by
// Truncated; s itself when it fits.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + Truncated
}
