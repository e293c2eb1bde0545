package distributor

import (
	"strings"

	"github.com/cuecast/cuecast"
)

// The wire layout. docs/PROTOCOL.md is the specification; these names are the
// only place the distributor spells it.
const (
	// Stream holds versions, chunks and pointers, so a mirror can never show a
	// pointer before the content it names.
	Stream = "CUECAST"
	// ReportStream holds the live reports, one per instance and config.
	ReportStream = "CUECAST_REPORTS"

	// HeaderMeta carries the compact Version JSON on a version message.
	HeaderMeta = "Cuecast-Meta"
	// HeaderPointer carries the Pointer JSON on a pointer message; the body
	// is the version's content when the pointer says inline, else empty.
	HeaderPointer = "Cuecast-Pointer"
	// HeaderChunkVersion names the version a chunk belongs to.
	HeaderChunkVersion = "Cuecast-Version"
	// HeaderChunk is "i/n", 1-based, on each chunk message.
	HeaderChunk = "Cuecast-Chunk"

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
		return "ccs.>"
	}
	return cuecast.ReportWildcard(cfg)
}

// configFromVersionSubject inverts cuecast.VersionSubject; ok is false for any other subject.
func configFromVersionSubject(subj string) (cuecast.ConfigPath, bool) {
	toks := strings.Split(subj, ".")
	if len(toks) < 4 || toks[0] != "cc" || toks[2] != "v" {
		return "", false
	}
	p := cuecast.ConfigPath(toks[1] + "/" + strings.Join(toks[3:], "/"))
	if p.Validate() != nil {
		return "", false
	}
	return p, true
}
