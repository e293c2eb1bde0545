package cuecast

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"
)

// ConfigPath names a config by its directory in the config repo, relative to the
// repo root and slash-separated: "payments/checkout". The first segment is the
// namespace. Segments map 1:1 to NATS subject tokens, which is why they are
// restricted to lower-case letters, digits, '_' and '-'. A variant of a config
// (docs/VARIANTS.md) is the config's path followed by one "<dim>=<value>"
// segment per dimension it uses, sorted by dimension:
// "payments/checkout/env=prod/region=eu"; '=' is valid in subject tokens and
// KV keys, and no config directory can contain it.
type ConfigPath string

// ValidSegment reports whether s may be one segment of a ConfigPath:
// [a-z0-9][a-z0-9_-]*. A loop, not a regular expression: a summarizer
// checks the path of every report it takes, and the expression was a sixth
// of its cost per report (BenchmarkSummarizerIngest).
func ValidSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		case (c == '_' || c == '-') && i > 0:
		default:
			return false
		}
	}
	return true
}

// Validate returns an error wrapping ErrInvalidPath when p is not a config path:
// at least two segments (namespace and name), each matching [a-z0-9][a-z0-9_-]*,
// optionally followed by variant segments "<dim>=<value>" (dimension and value
// each a valid segment, dimensions sorted and each once), as in
// "payments/checkout/env=prod/region=eu" (docs/VARIANTS.md).
func (p ConfigPath) Validate() error {
	plain, dims, bad := splitVariant(p)
	if bad != "" {
		if len(dims) > 0 && ValidSegment(bad) {
			return fmt.Errorf("%w: %q: plain segment %q after a <dim>=<value> segment", ErrInvalidPath, string(p), bad)
		}
		return fmt.Errorf("%w: %q: segment %q must match [a-z0-9][a-z0-9_-]*", ErrInvalidPath, string(p), bad)
	}
	if len(plain) < 2 {
		return fmt.Errorf("%w: %q: want <namespace>/<name>[/<dim>=<value>...]", ErrInvalidPath, string(p))
	}
	for i := 1; i < len(dims); i++ {
		if dims[i-1].Dim >= dims[i].Dim {
			return fmt.Errorf("%w: %q: variant dimensions must be sorted and each given once", ErrInvalidPath, string(p))
		}
	}
	return nil
}

// Namespace is the first segment of the path.
func (p ConfigPath) Namespace() string {
	ns, _, _ := strings.Cut(string(p), "/")
	return ns
}

// Name is the path below the namespace: "checkout" for "payments/checkout".
func (p ConfigPath) Name() string {
	_, name, _ := strings.Cut(string(p), "/")
	return name
}

// Tokens is the path as dot-separated NATS subject tokens: "payments.checkout".
func (p ConfigPath) Tokens() string { return strings.ReplaceAll(string(p), "/", ".") }

func (p ConfigPath) String() string { return string(p) }

// Version is one immutable compiled revision of a config, attributed to the
// commit that produced it. Versions of a config are numbered 1, 2, 3… with no
// gaps. A Deleted version is a tombstone: the config was removed on main.
type Version struct {
	Config      ConfigPath `json:"config"`
	Version     uint64     `json:"version"`
	Commit      string     `json:"commit"`
	Parent      string     `json:"parent,omitempty"`
	Author      string     `json:"author"`
	CommittedAt time.Time  `json:"committed_at"`
	Message     string     `json:"message"`
	Checksum    string     `json:"checksum"`
	Size        int64      `json:"size"`
	CompiledAt  time.Time  `json:"compiled_at"`
	Deleted     bool       `json:"deleted,omitempty"`
	// Carries names the commits whose changes the version holds besides
	// Commit's own, oldest first: commits that did not compile (nothing
	// was published from them) and changed what the config depends on,
	// among the 50 before Commit. Without it a version after a
	// broken stretch credits only the fixer (docs/PROTOCOL.md §4.1). Like
	// Author and Message it is attribution, not signed.
	Carries []CommitRef `json:"carries,omitempty"`
	// Chunks lists the stream sequences of the content chunks, in order, when
	// the content was too large for one message; empty when it is inline.
	Chunks []uint64 `json:"chunks,omitempty"`
	// Signature is the distributor's ed25519 signature over SigningBytes.
	Signature string `json:"sig,omitempty"`
}

// CommitRef names a commit: its hash, author ("Name <email>") and
// subject line.
type CommitRef struct {
	Commit  string `json:"commit"`
	Author  string `json:"author"`
	Message string `json:"message"`
}

// Pointer tells the instances of one cohort which version of a config to run.
// It names a version (and the stream sequence holding it) and repeats what an
// instance needs to apply it; when Inline is set, the message carrying the
// pointer has the version's content as its body (docs/PROTOCOL.md §3), so
// that one message per instance delivers a change.
type Pointer struct {
	Config ConfigPath `json:"config"`
	// Subject is the stored subject the pointer was written to (cc.<ns>.p.…,
	// cc.<ns>.i.…, cc.<ns>.s.…, cc.<ns>.a.…). It is signed, so a pointer
	// replayed onto another subject (another bucket's, another instance's)
	// fails: a subscriber checks it against the subject it follows.
	Subject string `json:"subject,omitempty"`
	// Revision orders the pointers of one config, across all its subjects:
	// every write gets a higher one than every earlier write (Unix
	// nanoseconds when the writer's clock is ahead of the last revision,
	// else one more than it). It is signed, so subscribers decide which
	// pointer governs and what is a replay by it, never by the stream
	// sequence in unsigned headers (docs/PROTOCOL.md §5).
	Revision uint64 `json:"rev,omitempty"`
	Version  uint64 `json:"version"`
	Seq      uint64 `json:"seq"`
	Checksum string `json:"checksum"`
	Size     int64  `json:"size"`
	Commit   string `json:"commit,omitempty"`
	Deleted  bool   `json:"deleted,omitempty"`
	// Inline is not signed: the content it announces is checked against the
	// signed Checksum and Size.
	Inline bool `json:"inline,omitempty"`
	// Rollback allows instances to move to a version older than the one they
	// hold; without it they refuse to go backwards.
	Rollback bool      `json:"rollback,omitempty"`
	Rollout  string    `json:"rollout,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	SetAt    time.Time `json:"set_at"`
	// Signature is the distributor's ed25519 signature over SigningBytes.
	Signature string `json:"sig,omitempty"`
}

// Health is what a service says about itself in its reports.
type Health struct {
	Healthy bool   `json:"healthy"`
	Detail  string `json:"detail,omitempty"`
}

// Report is what an instance publishes on each apply and heartbeat. The fleet's
// state is the set of live reports.
type Report struct {
	Instance      string            `json:"instance"`
	Labels        map[string]string `json:"labels,omitempty"`
	Cohort        int               `json:"cohort"`
	Config        ConfigPath        `json:"config"`
	Version       uint64            `json:"version"`
	Checksum      string            `json:"checksum"`
	Healthy       bool              `json:"healthy"`
	LastKnownGood bool              `json:"last_known_good,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	// Refused is the last pointer the instance refused without reading
	// the version it names ("version N: pointer: detail": a bad
	// signature, a pointer for another config, an undecodable message).
	// It says the instance is being sent something forged or damaged, not
	// that it failed to apply a version: health gates ignore it.
	Refused string `json:"refused,omitempty"`
	// Staged is the version of a strict config the instance has fetched,
	// verified and validated and holds ready for the activation pointer
	// (two-phase cutover); 0 when none.
	Staged uint64 `json:"staged,omitempty"`
	// AppliedAt is when the instance applied Version. Reports are sent a
	// little after an apply (spread so a fleet does not report at once), so
	// propagation is timed from this, not from the report's arrival.
	AppliedAt time.Time `json:"applied_at,omitzero"`
	At        time.Time `json:"at"`
	// Count is set only on a report a reader made from a region's summary
	// (docs/PROTOCOL.md §4.5): the report stands for Count (1 or more)
	// instances alike in everything the fleet's readers count (version,
	// checksum, staged, cohort bucket, health, labels, the version a
	// failure names), all in bucket Cohort, and Instance is one of them.
	// An instance never sends it; a report that carries it is dropped
	// (distributor.DecodeReport). 0: an instance's own report.
	Count int `json:"count,omitempty"`
	// Region is set only by a reader, never on the wire: the summarising
	// region whose summary group or drill-down answer the report comes
	// from, as the subject it arrived on names it (the region's
	// credentials bind that subject: docs/SECURITY.md). "" for an
	// instance's own report read at this level. What a region says is
	// believed of its own instances only: a drill-down answer leaves only
	// its own region's groups (distributor.Split), and the rollout's health
	// gate judges each region's part of a cohort against its own region's
	// outside too (docs/ROLLOUT.md, "Health"). The report the rollout keeps
	// of an instance several regions answered for names them all
	// (rollout.Claimants).
	Region string `json:"-"`
}

// Weight is how many instances r stands for: r.Count for a report made
// from a summary, else 1.
func (r Report) Weight() int { return max(r.Count, 1) }

// Buckets is the number of cohort buckets an instance can hash into.
const Buckets = 100

// Cohort returns the bucket of an instance for a namespace: FNV-1a-32 of
// "<namespace>:<instance>" mod 100. It is specified this way so that a
// subscriber in any language can compute it.
func Cohort(namespace, instance string) int {
	h := fnv.New32a()
	h.Write([]byte(namespace + ":" + instance))
	return int(h.Sum32() % Buckets)
}

// Checksum is the hex SHA-256 of compiled config bytes.
func Checksum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// ChecksumMatches reports whether Checksum(b) is want, without allocating:
// every instance checks every version it applies.
func ChecksumMatches(b []byte, want string) bool {
	s := sha256.Sum256(b)
	var h [2 * sha256.Size]byte
	hex.Encode(h[:], s[:])
	return string(h[:]) == want
}

// ValidateInstance returns an error wrapping ErrInvalidInstance unless id can
// be used as a NATS subject token: 1–128 of [A-Za-z0-9_-].
func ValidateInstance(id string) error {
	if !validInstance(id) {
		return fmt.Errorf("%w: %q: use 1-128 of [A-Za-z0-9_-]", ErrInvalidInstance, id)
	}
	return nil
}

// validInstance is ValidateInstance's check, a loop for the reason
// ValidSegment is one.
func validInstance(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		switch c := id[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
		default:
			return false
		}
	}
	return true
}

// Sentinel errors shared across packages. Callers match them with errors.Is.
var (
	// ErrInvalidPath: a config path that is not <namespace>/<name> with valid segments.
	ErrInvalidPath = errors.New("invalid config path")
	// ErrInvalidInstance: an instance ID that cannot be a subject token.
	ErrInvalidInstance = errors.New("invalid instance id")
	// ErrNotFound: no such config, version or pointer.
	ErrNotFound = errors.New("not found")
	// ErrChecksumMismatch: content whose SHA-256 differs from the one announced.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrBadSignature: a version or pointer unsigned or signed by an untrusted key.
	ErrBadSignature = errors.New("bad signature")
	// ErrConflict: a compare-and-swap lost against a concurrent writer.
	ErrConflict = errors.New("conflict")
	// ErrFenced: a writer whose lease term is over; the store refused its
	// write because another writer claimed the fence since.
	ErrFenced = errors.New("fenced out by a later writer")
	// ErrPurged: a version that retention has removed.
	ErrPurged = errors.New("version purged")
	// ErrNotRepo: a directory or remote that is not a Git repository;
	// tailer.ErrNotRepo and ci.ErrNotRepo are this error.
	ErrNotRepo = errors.New("not a git repository")
)

// SigningBytes is what the distributor signs for a version (its metadata and
// content checksum) and clients verify: one field per line, so that any
// language can rebuild it. Chunks are comma-separated decimal sequences.
func (v Version) SigningBytes() []byte {
	chunks := make([]string, len(v.Chunks))
	for i, c := range v.Chunks {
		chunks[i] = fmt.Sprint(c)
	}
	return fmt.Appendf(nil, "cuecast-version-v1\n%s\n%d\n%s\n%d\n%s\n%t\n%s\n",
		v.Config, v.Version, v.Checksum, v.Size, v.Commit, v.Deleted, strings.Join(chunks, ","))
}

// PointerSigningVersion is the first line of a pointer's signing bytes.
const PointerSigningVersion = "cuecast-pointer-v3"

// SigningBytes is what the distributor signs for a pointer: one field per
// line (docs/PROTOCOL.md §6); SetAt as Unix nanoseconds. Every instance
// builds it for every pointer it receives, so it is appended field by field
// rather than formatted (BENCHMARKS.md, "Distribution").
func (p Pointer) SigningBytes() []byte {
	b := make([]byte, 0, 160+len(p.Config)+len(p.Subject)+len(p.Checksum)+len(p.Commit))
	b = append(b, PointerSigningVersion+"\n"...)
	b = append(append(b, p.Config...), '\n')
	b = append(append(b, p.Subject...), '\n')
	b = append(strconv.AppendUint(b, p.Revision, 10), '\n')
	b = append(strconv.AppendUint(b, p.Version, 10), '\n')
	b = append(strconv.AppendUint(b, p.Seq, 10), '\n')
	b = append(append(b, p.Checksum...), '\n')
	b = append(strconv.AppendInt(b, p.Size, 10), '\n')
	b = append(append(b, p.Commit...), '\n')
	b = append(strconv.AppendBool(b, p.Deleted), '\n')
	b = append(strconv.AppendBool(b, p.Rollback), '\n')
	b = append(strconv.AppendInt(b, p.SetAt.UnixNano(), 10), '\n')
	return b
}

// Meta is the version metadata a pointer vouches for: enough to apply and
// describe the version without reading it.
func (p Pointer) Meta() Version {
	return Version{Config: p.Config, Version: p.Version, Commit: p.Commit, Checksum: p.Checksum, Size: p.Size, Deleted: p.Deleted}
}
