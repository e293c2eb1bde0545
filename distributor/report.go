package distributor

import (
	"encoding/json"
	"errors"
	"fmt"

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
	return r, nil
}
