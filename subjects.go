package cuecast

import (
	"strconv"
	"strings"
)

// The subjects of the CUECAST and CUECAST_REPORTS streams (docs/PROTOCOL.md
// §3), spelled once here for the distributor that writes them and the
// client that reads them. <name> is the config path below the namespace
// with "/" replaced by ".".

// SubjectName is cfg's name as subject tokens: "svc/flags" ▶ "svc.flags".
func SubjectName(cfg ConfigPath) string {
	name := []byte(cfg.Name())
	for i, c := range name {
		if c == '/' {
			name[i] = '.'
		}
	}
	return string(name)
}

// VersionSubject stores every version of cfg: cc.<ns>.v.<name>.
func VersionSubject(cfg ConfigPath) string {
	return StoredPrefix + "." + cfg.Namespace() + ".v." + SubjectName(cfg)
}

// ChunkSubject stores the chunks of cfg's large versions: cc.<ns>.c.<name>.
func ChunkSubject(cfg ConfigPath) string {
	return StoredPrefix + "." + cfg.Namespace() + ".c." + SubjectName(cfg)
}

// PointerSubject is the pointer of one cohort bucket: cc.<ns>.p.<bucket>.<name>.
func PointerSubject(cfg ConfigPath, bucket int) string {
	return StoredPrefix + "." + cfg.Namespace() + ".p." + strconv.Itoa(bucket) + "." + SubjectName(cfg)
}

// AllPointerSubject is the pointer of every cohort bucket at once:
// cc.<ns>.p.all.<name>. Every instance follows it as well as its bucket's.
func AllPointerSubject(cfg ConfigPath) string {
	return StoredPrefix + "." + cfg.Namespace() + ".p.all." + SubjectName(cfg)
}

// InstancePointerSubject is the pointer of one instance: cc.<ns>.i.<instance>.<name>.
func InstancePointerSubject(cfg ConfigPath, instance string) string {
	return StoredPrefix + "." + cfg.Namespace() + ".i." + instance + "." + SubjectName(cfg)
}

// StagedSubject announces the version of a strict config every instance
// should fetch, verify, validate and hold without applying: cc.<ns>.s.<name>.
func StagedSubject(cfg ConfigPath) string {
	return StoredPrefix + "." + cfg.Namespace() + ".s." + SubjectName(cfg)
}

// ActivationSubject tells every instance to switch to the staged version
// it names at once: cc.<ns>.a.<name>.
func ActivationSubject(cfg ConfigPath) string {
	return StoredPrefix + "." + cfg.Namespace() + ".a." + SubjectName(cfg)
}

// ReportSubject is where an instance reports on cfg: ccs.<ns>.<instance>.<name>.
func ReportSubject(cfg ConfigPath, instance string) string {
	return ReportPrefix + "." + cfg.Namespace() + "." + instance + "." + SubjectName(cfg)
}

// ReportWildcard matches every instance's report on cfg: ccs.<ns>.*.<name>.
// Readers of the fleet's live reports subscribe to it or filter the report
// stream with it.
func ReportWildcard(cfg ConfigPath) string {
	return ReportPrefix + "." + cfg.Namespace() + ".*." + SubjectName(cfg)
}

// ParseReportSubject inverts ReportSubject: the config and instance a report
// subject names; ok is false for a subject of another shape. It does not
// validate the names: a reader checks them against the report itself.
func ParseReportSubject(subj string) (cfg ConfigPath, instance string, ok bool) {
	rest, ok := strings.CutPrefix(subj, ReportPrefix+".")
	if !ok {
		return "", "", false
	}
	ns, rest, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	instance, name, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	return ConfigPath(ns + "/" + strings.ReplaceAll(name, ".", "/")), instance, true
}

// SummarySubject is where region publishes its summary of cfg's reports:
// ccsum.<region>.<ns>.<name>. The region token is what the hub's
// permissions bind to the region's link.
func SummarySubject(region string, cfg ConfigPath) string {
	return SummaryPrefix + "." + region + "." + cfg.Namespace() + "." + SubjectName(cfg)
}

// SummaryWildcard matches every region's summary of cfg: ccsum.*.<ns>.<name>.
func SummaryWildcard(cfg ConfigPath) string {
	return SummaryPrefix + ".*." + cfg.Namespace() + "." + SubjectName(cfg)
}

// ParseSummarySubject inverts SummarySubject; ok is false for a subject of
// another shape. It does not validate the names.
func ParseSummarySubject(subj string) (cfg ConfigPath, region string, ok bool) {
	rest, ok := strings.CutPrefix(subj, SummaryPrefix+".")
	if !ok {
		return "", "", false
	}
	region, rest, ok = strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	ns, name, ok := strings.Cut(rest, ".")
	if !ok {
		return "", "", false
	}
	return ConfigPath(ns + "/" + strings.ReplaceAll(name, ".", "/")), region, true
}

// DetailReplySubject is where region's summarizer answers the drill-down
// request that named token: ccsumr.<region>.<token>.
func DetailReplySubject(region, token string) string {
	return DetailReplyPrefix + "." + region + "." + token
}

// ParseDetailReplySubject inverts DetailReplySubject; ok is false for a
// subject of another shape. It does not validate the names.
func ParseDetailReplySubject(subj string) (region, token string, ok bool) {
	rest, ok := strings.CutPrefix(subj, DetailReplyPrefix+".")
	if !ok {
		return "", "", false
	}
	region, token, ok = strings.Cut(rest, ".")
	if !ok || strings.Contains(token, ".") {
		return "", "", false
	}
	return region, token, true
}

// DetailSubject is where the summarizers of every region answer requests
// for the reports they hold on cfg: ccsumq.<ns>.<name>.
func DetailSubject(cfg ConfigPath) string {
	return DetailPrefix + "." + cfg.Namespace() + "." + SubjectName(cfg)
}
