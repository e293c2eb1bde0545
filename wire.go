package cuecast

import "strings"

// The wire vocabulary of docs/PROTOCOL.md: stream, header and subject
// prefix names, spelled once here for the distributor that writes them and
// the client that reads them.
const (
	// Stream holds versions, chunks and pointers, so a mirror can never show
	// a pointer before the content it names.
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

	// StoredPrefix is the first token of every subject Stream stores
	// (versions, chunks, pointers): cc.<ns>.….
	StoredPrefix = "cc"
	// RepublishPrefix replaces StoredPrefix on the core subjects Stream
	// RePublishes onto, which instances subscribe to: ccr.<ns>.….
	RepublishPrefix = "ccr"
	// ReportPrefix is the first token of every report subject: ccs.<ns>.….
	ReportPrefix = "ccs"
	// SummaryPrefix is the first token of every summary subject:
	// ccsum.<region>.<ns>.<name> (docs/PROTOCOL.md §4.5). The report
	// stream stores summaries beside reports.
	SummaryPrefix = "ccsum"
	// DetailPrefix is where a region's summarizer answers requests for the
	// reports it summarises: ccsumq.<ns>.<name>.
	DetailPrefix = "ccsumq"
	// DetailReplyPrefix is where a region's summarizer sends its answer to
	// a drill-down request: ccsumr.<region>.<token>. The region token is
	// bound to the region's credentials (the summarizer's and its link's),
	// as a summary's is, so the asker believes an answer only for the
	// region its subject names (docs/PROTOCOL.md §4.5).
	DetailReplyPrefix = "ccsumr"

	// FanoutStream is the hub's mirror of Stream in the fan-out account,
	// which the leafnode links from below are bound to and the regions
	// mirror (docs/SECURITY.md, a compromised node or leaf host).
	FanoutStream = "CUECAST_FANOUT"
	// FanoutAPIPrefix is where the fan-out account imports the one
	// JetStream request its mirror makes of Stream, the creation of its
	// consumer ($JS.API.CONSUMER.CREATE.CUECAST.>), and FanoutDeliverPrefix
	// where that consumer's deliveries arrive (StreamSource.External).
	FanoutAPIPrefix     = "cuecast.fanout.api"
	FanoutDeliverPrefix = "cuecast.fanout.deliver"
	// FanoutAdminPrefix is the API prefix (jetstream.WithAPIPrefix) under
	// which the distributor manages the fan-out account's streams.
	FanoutAdminPrefix = "cuecast.fanout.admin"
	// OperatorAPIPrefix is the API prefix under which the operator's
	// account reaches the one JetStream management request it may make,
	// the report stream's information. Every account has the server's own
	// $JS.API.> import, which would answer it for the operator's account,
	// which has no JetStream.
	OperatorAPIPrefix = "cuecast.operator.api"
)

// Republished is the core subject Stream RePublishes the stored subject
// subj onto: "cc.svc.p.3.flags" ▶ "ccr.svc.p.3.flags".
func Republished(subj string) string {
	return RepublishPrefix + strings.TrimPrefix(subj, StoredPrefix)
}

// Consistency is a namespace's (or a config's) consistency class, as
// written in the manifest.
type Consistency string

// The consistency classes (docs/ROLLOUT.md).
const (
	// Relaxed rolls a version out stage by stage; instances of a config may
	// run different versions meanwhile.
	Relaxed Consistency = "relaxed"
	// Strict stages a version on every instance, then activates it
	// everywhere at once (two-phase cutover).
	Strict Consistency = "strict"
)

// ShortCommit abbreviates a commit hash for people to read: its first 12
// hex digits (or all of it when shorter).
func ShortCommit(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

// CommitSubject is a commit message's first line, the one people read in a
// list of commits.
func CommitSubject(msg string) string {
	line, _, _ := strings.Cut(msg, "\n")
	return line
}
