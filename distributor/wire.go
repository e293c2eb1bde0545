package distributor

import (
	"strings"

	"github.com/cuecast/cuecast"
)

// The distributor's own wire constants; the names it shares with the client
// (stream, headers, subject prefixes) are in the root package, and
// docs/PROTOCOL.md is the specification.
const (
	// ChunkThreshold is the largest content carried inline in a version
	// message; larger content is split into chunks of at most ChunkSize.
	ChunkThreshold = 512 << 10
	// ChunkSize is the size of every chunk but the last.
	ChunkSize = 512 << 10
	// DefaultInlineLimit is Options.InlineLimit's default.
	DefaultInlineLimit = 64 << 10
)

// reportFilter matches every report on cfg, or every report when cfg is "".
func reportFilter(cfg cuecast.ConfigPath) string {
	if cfg == "" {
		return cuecast.ReportPrefix + ".>"
	}
	return cuecast.ReportWildcard(cfg)
}

// summaryFilter is reportFilter's counterpart for the regions' summaries.
func summaryFilter(cfg cuecast.ConfigPath) string {
	if cfg == "" {
		return cuecast.SummaryPrefix + ".>"
	}
	return cuecast.SummaryWildcard(cfg)
}

// configFromVersionSubject inverts cuecast.VersionSubject; ok is false for any other subject.
func configFromVersionSubject(subj string) (cuecast.ConfigPath, bool) {
	toks := strings.Split(subj, ".")
	if len(toks) < 4 || toks[0] != cuecast.StoredPrefix || toks[2] != "v" {
		return "", false
	}
	p := cuecast.ConfigPath(toks[1] + "/" + strings.Join(toks[3:], "/"))
	if p.Validate() != nil {
		return "", false
	}
	return p, true
}
