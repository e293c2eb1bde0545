package distributor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// storedVersion is a version's metadata with the stream sequence holding it.
type storedVersion struct {
	cuecast.Version
	Seq uint64
	// At is when the stream stored it.
	At time.Time
	// body is the content when known here and small enough to inline;
	// only the latest-version cache keeps it.
	body []byte
}

// Latest returns the newest version of cfg, a tombstone included. It returns
// an error wrapping cuecast.ErrNotFound when cfg has no version.
func (d *Distributor) Latest(ctx context.Context, cfg cuecast.ConfigPath) (cuecast.Version, error) {
	if err := cfg.Validate(); err != nil {
		return cuecast.Version{}, fmt.Errorf("get latest: %w", err)
	}
	sv, err := d.latest(ctx, cfg)
	if err != nil {
		return cuecast.Version{}, fmt.Errorf("get latest %s: %w", cfg, err)
	}
	return sv.Version, nil
}

func (d *Distributor) latest(ctx context.Context, cfg cuecast.ConfigPath) (storedVersion, error) {
	var m *jetstream.RawStreamMsg
	var err error
	if d.fenced.Load() {
		// The leader, not a replica that may lag: the next number is taken
		// from this answer (fence.go).
		m, err = LeaderLastMsg(ctx, d.nc, cuecast.Stream, cuecast.VersionSubject(cfg))
	} else {
		m, err = d.versions.GetLastMsgForSubject(ctx, cuecast.VersionSubject(cfg))
	}
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return storedVersion{}, cuecast.ErrNotFound
	}
	if err != nil {
		return storedVersion{}, err
	}
	sv, err := decodeVersionMsg(m)
	if err == nil {
		sv.body = m.Data
		d.remember(sv)
	}
	return sv, err
}

// inlinable reports whether sv's content rides in its pointer messages.
func (d *Distributor) inlinable(sv storedVersion) bool {
	return d.o.InlineLimit >= 0 && len(sv.Chunks) == 0 && sv.Size <= int64(d.o.InlineLimit)
}

// recentVersions is how many versions per config the Distributor keeps
// addresses of (number to sequence), so that deploying or rolling back to a
// recent version needs no search.
const recentVersions = 8

type versionKey struct {
	cfg cuecast.ConfigPath
	n   uint64
}

// remember caches sv's address, and sv as the latest version of its config
// unless a newer one is cached.
func (d *Distributor) remember(sv storedVersion) {
	n := sv.Version.Version
	keep := sv
	keep.body = nil
	if l, ok := d.latestCache.Load(sv.Config); !ok || n+recentVersions > l.(*storedVersion).Version.Version {
		// Only recent versions: each newer one evicts the one recentVersions
		// below it, which bounds the cache at recentVersions per config.
		d.recent.Store(versionKey{sv.Config, n}, keep)
	}
	if n > recentVersions {
		d.recent.Delete(versionKey{sv.Config, n - recentVersions})
	}
	p := &sv
	if !d.inlinable(sv) {
		p = &keep
	}
	for {
		old, loaded := d.latestCache.LoadOrStore(sv.Config, p)
		if !loaded {
			return
		}
		if old.(*storedVersion).Version.Version >= sv.Version.Version || d.latestCache.CompareAndSwap(sv.Config, old, p) {
			return
		}
	}
}

// cachedLatest is the latest version of cfg this Distributor wrote or read.
// It may be stale when another process publishes; every write that relies
// on it is a compare-and-swap, and a lost one reads afresh.
func (d *Distributor) cachedLatest(ctx context.Context, cfg cuecast.ConfigPath) (storedVersion, error) {
	if c, ok := d.latestCache.Load(cfg); ok {
		return *c.(*storedVersion), nil
	}
	return d.latest(ctx, cfg)
}

func decodeVersionMsg(m *jetstream.RawStreamMsg) (storedVersion, error) {
	var v cuecast.Version
	if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderMeta)), &v); err != nil {
		return storedVersion{}, fmt.Errorf("decode %s of message %d: %w", cuecast.HeaderMeta, m.Sequence, err)
	}
	return storedVersion{Version: v, Seq: m.Sequence, At: m.Time}, nil
}

// Publish stores content as version v.Version of v.Config. It is create-only:
// v.Version must be the latest version plus one (1 for a new config), and of
// two concurrent writers of the same number exactly one succeeds; the other
// gets an error wrapping cuecast.ErrConflict. Publishing a version identical
// to the latest (same number, commit and checksum) again returns nil, so a
// crashed writer can retry. Publish fills in Checksum and Size when they are
// empty; a Checksum that does not match content returns
// cuecast.ErrChecksumMismatch. A tombstone (v.Deleted) has no content.
// Content over 512 KiB is stored in chunks first. After a successful
// publish, versions beyond Options.Retain are purged (failures are logged:
// the version is published either way). After ClaimFence, a version the
// store refuses because a later term claimed the fence returns an error
// wrapping cuecast.ErrFenced, and so does every Publish after it.
func (d *Distributor) Publish(ctx context.Context, v cuecast.Version, content []byte) error {
	if err := prepareVersion("publish", &v, content); err != nil {
		return err
	}

	prev, err := d.cachedLatest(ctx, v.Config)
	switch {
	case errors.Is(err, cuecast.ErrNotFound):
	case err != nil:
		return fmt.Errorf("publish %s@%d: read latest: %w", v.Config, v.Version, err)
	}
	return d.publish(ctx, v, content, prev, true)
}

// publish writes v after prev. When prev came from the cache and the server
// says it is stale, it reads the latest version and decides again (once).
func (d *Distributor) publish(ctx context.Context, v cuecast.Version, content []byte, prev storedVersion, mayBeStale bool) error {
	var err error
	if prev.Version.Version == v.Version {
		if same(prev.Version, v) {
			return nil
		}
		return fmt.Errorf("publish %s@%d: version exists with commit %s checksum %s: %w", v.Config, v.Version, prev.Commit, prev.Checksum, cuecast.ErrConflict)
	}
	if v.Version != prev.Version.Version+1 {
		return fmt.Errorf("publish %s@%d: latest is %d, want %d: %w", v.Config, v.Version, prev.Version.Version, prev.Version.Version+1, cuecast.ErrConflict)
	}

	body := content
	if len(content) > ChunkThreshold {
		if v.Chunks, err = d.publishChunks(ctx, v, content); err != nil {
			return fmt.Errorf("publish %s@%d: %w", v.Config, v.Version, err)
		}
		body = nil
	}
	if err := d.sign("version", &v, &v.Signature); err != nil {
		return fmt.Errorf("publish %s@%d: %w", v.Config, v.Version, err)
	}
	meta, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("publish %s@%d: encode metadata: %w", v.Config, v.Version, err)
	}
	m := nats.NewMsg(cuecast.VersionSubject(v.Config))
	m.Header.Set(cuecast.HeaderMeta, string(meta))
	m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s@%d", v.Config, v.Version))
	m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(prev.Seq, 10))
	m.Data = body
	ack, err := d.storeVersion(ctx, m)
	if errors.Is(err, cuecast.ErrFenced) {
		return fmt.Errorf("publish %s@%d: %w", v.Config, v.Version, err)
	}
	if isWrongLastSeq(err) && mayBeStale {
		d.latestCache.Delete(v.Config)
		fresh, ferr := d.latest(ctx, v.Config)
		if ferr != nil && !errors.Is(ferr, cuecast.ErrNotFound) {
			return fmt.Errorf("publish %s@%d: read latest: %w", v.Config, v.Version, ferr)
		}
		v.Chunks, v.Signature = nil, ""
		return d.publish(ctx, v, content, fresh, false)
	}
	if isWrongLastSeq(err) {
		return fmt.Errorf("publish %s@%d: another writer published first: %w", v.Config, v.Version, cuecast.ErrConflict)
	}
	if isOutOfSpace(err) {
		return fmt.Errorf("publish %s@%d: %w: %w", v.Config, v.Version, ErrNoSpace, err)
	}
	if err != nil {
		return fmt.Errorf("publish %s@%d: %w", v.Config, v.Version, err)
	}
	if ack.Duplicate {
		// The same message ID within the duplicate window: our own retry or a
		// rival writer. Only the stored metadata can tell.
		got, err := d.latest(ctx, v.Config)
		if err != nil {
			return fmt.Errorf("publish %s@%d: read back duplicate: %w", v.Config, v.Version, err)
		}
		if got.Version.Version != v.Version || !same(got.Version, v) {
			return fmt.Errorf("publish %s@%d: a different version %d exists (commit %s): %w", v.Config, v.Version, got.Version.Version, got.Commit, cuecast.ErrConflict)
		}
		return nil
	}
	d.remember(storedVersion{Version: v, Seq: ack.Sequence, At: time.Now(), body: body})
	d.log.Debug("stored version", "config", v.Config, "version", v.Version, "commit", v.Commit,
		"checksum", v.Checksum, "size", v.Size, "chunks", len(v.Chunks), "seq", ack.Sequence, "deleted", v.Deleted)
	if v.Version > uint64(d.o.Retain) {
		if err := d.applyRetention(ctx, v.Config); err != nil {
			d.log.Warn("retention failed", "config", v.Config, "err", err)
		}
	}
	return nil
}

func same(a, b cuecast.Version) bool {
	return a.Version == b.Version && a.Commit == b.Commit && a.Checksum == b.Checksum && a.Deleted == b.Deleted
}

// publishChunks stores content in ChunkSize pieces on the chunk subject and
// returns their sequences. Message IDs carry the checksum so that a rival
// writer's chunks for the same version number are never mistaken for ours.
func (d *Distributor) publishChunks(ctx context.Context, v cuecast.Version, content []byte) ([]uint64, error) {
	n := (len(content) + ChunkSize - 1) / ChunkSize
	seqs := make([]uint64, 0, n)
	for i := range n {
		part := content[i*ChunkSize : min((i+1)*ChunkSize, len(content))]
		m := nats.NewMsg(cuecast.ChunkSubject(v.Config))
		m.Header.Set(cuecast.HeaderChunkVersion, strconv.FormatUint(v.Version, 10))
		m.Header.Set(cuecast.HeaderChunk, fmt.Sprintf("%d/%d", i+1, n))
		m.Header.Set(jetstream.MsgIDHeader, fmt.Sprintf("%s@%d#%d/%d:%s", v.Config, v.Version, i+1, n, v.Checksum))
		m.Data = part
		ack, err := d.js.PublishMsg(ctx, m)
		if isOutOfSpace(err) {
			return nil, fmt.Errorf("store chunk %d/%d: %w: %w", i+1, n, ErrNoSpace, err)
		}
		if err != nil {
			return nil, fmt.Errorf("store chunk %d/%d: %w", i+1, n, err)
		}
		seqs = append(seqs, ack.Sequence)
	}
	return seqs, nil
}

// applyRetention keeps the last Retain versions of cfg and the chunks they
// use. Chunks of version N are stored after version N-1 and before version
// N, so everything on the chunk subject below the oldest retained version's
// first chunk (or its own sequence when it is inline) belongs to purged
// versions or to writes that lost a race.
func (d *Distributor) applyRetention(ctx context.Context, cfg cuecast.ConfigPath) error {
	if err := d.stream.Purge(ctx, jetstream.WithPurgeSubject(cuecast.VersionSubject(cfg)), jetstream.WithPurgeKeep(uint64(d.o.Retain))); err != nil {
		return fmt.Errorf("purge versions: %w", err)
	}
	oldest, err := d.first(ctx, cfg)
	if err != nil {
		return fmt.Errorf("read oldest retained version: %w", err)
	}
	cut := oldest.Seq
	if len(oldest.Chunks) > 0 {
		cut = oldest.Chunks[0]
	}
	if err := d.stream.Purge(ctx, jetstream.WithPurgeSubject(cuecast.ChunkSubject(cfg)), jetstream.WithPurgeSequence(cut)); err != nil {
		return fmt.Errorf("purge chunks below %d: %w", cut, err)
	}
	d.log.Debug("applied retention", "config", cfg, "oldest", oldest.Version.Version, "chunk_cut", cut)
	return nil
}

// first is the oldest retained version of cfg.
func (d *Distributor) first(ctx context.Context, cfg cuecast.ConfigPath) (storedVersion, error) {
	return d.nextFrom(ctx, cfg, 1)
}

// nextFrom is the first version of cfg stored at or after seq.
func (d *Distributor) nextFrom(ctx context.Context, cfg cuecast.ConfigPath, seq uint64) (storedVersion, error) {
	m, err := d.versions.GetMsg(ctx, seq, cuecast.VersionSubject(cfg))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return storedVersion{}, cuecast.ErrNotFound
	}
	if err != nil {
		return storedVersion{}, err
	}
	return decodeVersionMsg(m)
}

// lookupVersion returns the metadata and sequence of version n of cfg, from
// the cache of recent versions when it is there and certainly retained.
func (d *Distributor) lookupVersion(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (storedVersion, error) {
	if c, ok := d.recent.Load(versionKey{cfg, n}); ok {
		if l, ok := d.latestCache.Load(cfg); ok && n+uint64(d.o.Retain) > l.(*storedVersion).Version.Version {
			return c.(storedVersion), nil
		}
	}
	sv, _, err := d.findVersion(ctx, cfg, n)
	if err == nil {
		d.remember(sv)
	}
	return sv, err
}

// Version returns version n of cfg with its content (chunks reassembled and
// the checksum verified). It returns an error wrapping cuecast.ErrNotFound
// when cfg has no version n, cuecast.ErrPurged when retention removed it,
// and cuecast.ErrChecksumMismatch when the stored content is damaged.
func (d *Distributor) Version(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (cuecast.Version, []byte, error) {
	if err := cfg.Validate(); err != nil {
		return cuecast.Version{}, nil, fmt.Errorf("get version: %w", err)
	}
	sv, body, err := d.findVersion(ctx, cfg, n)
	if err != nil {
		return cuecast.Version{}, nil, fmt.Errorf("get version %s@%d: %w", cfg, n, err)
	}
	content, err := d.content(ctx, sv, body)
	if err != nil {
		return cuecast.Version{}, nil, fmt.Errorf("get version %s@%d: %w", cfg, n, err)
	}
	return sv.Version, content, nil
}

// findVersion locates version n by binary search over the stream sequences
// between the oldest and newest retained versions: versions are numbered
// without gaps and stored in order, so the version number grows with the
// sequence.
func (d *Distributor) findVersion(ctx context.Context, cfg cuecast.ConfigPath, n uint64) (storedVersion, []byte, error) {
	last, err := d.versions.GetLastMsgForSubject(ctx, cuecast.VersionSubject(cfg))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return storedVersion{}, nil, cuecast.ErrNotFound
	}
	if err != nil {
		return storedVersion{}, nil, err
	}
	lv, err := decodeVersionMsg(last)
	if err != nil {
		return storedVersion{}, nil, err
	}
	if n == 0 || n > lv.Version.Version {
		return storedVersion{}, nil, cuecast.ErrNotFound
	}
	if n == lv.Version.Version {
		return lv, last.Data, nil
	}
	lo, hi := uint64(1), lv.Seq
	for lo <= hi {
		mid := lo + (hi-lo)/2
		m, err := d.versions.GetMsg(ctx, mid, cuecast.VersionSubject(cfg))
		if err != nil {
			return storedVersion{}, nil, err
		}
		sv, err := decodeVersionMsg(m)
		if err != nil {
			return storedVersion{}, nil, err
		}
		switch {
		case sv.Version.Version == n:
			return sv, m.Data, nil
		case sv.Version.Version < n:
			lo = m.Sequence + 1
		default:
			if mid == 1 || sv.Seq == lo {
				// The first version stored at or after lo is already newer.
				return storedVersion{}, nil, cuecast.ErrPurged
			}
			hi = mid - 1
		}
	}
	return storedVersion{}, nil, cuecast.ErrPurged
}

// content returns the version's bytes, reassembling chunks, and verifies them.
func (d *Distributor) content(ctx context.Context, sv storedVersion, body []byte) ([]byte, error) {
	if len(sv.Chunks) > 0 {
		buf := make([]byte, 0, sv.Size)
		for i, seq := range sv.Chunks {
			m, err := d.versions.GetMsg(ctx, seq, "")
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				return nil, fmt.Errorf("read chunk %d/%d at %d: %w", i+1, len(sv.Chunks), seq, cuecast.ErrPurged)
			}
			if err != nil {
				return nil, fmt.Errorf("read chunk %d/%d at %d: %w", i+1, len(sv.Chunks), seq, err)
			}
			if m.Subject != cuecast.ChunkSubject(sv.Config) || m.Header.Get(cuecast.HeaderChunkVersion) != strconv.FormatUint(sv.Version.Version, 10) {
				return nil, fmt.Errorf("read chunk %d/%d at %d: message on %s for version %q is not a chunk of this version: %w",
					i+1, len(sv.Chunks), seq, m.Subject, m.Header.Get(cuecast.HeaderChunkVersion), cuecast.ErrChecksumMismatch)
			}
			buf = append(buf, m.Data...)
		}
		body = buf
	}
	if got := cuecast.Checksum(body); got != sv.Checksum {
		return nil, fmt.Errorf("content hashes to %s, metadata says %s: %w", got, sv.Checksum, cuecast.ErrChecksumMismatch)
	}
	return body, nil
}

// Versions returns the retained versions of cfg, newest first, without
// content. It returns an error wrapping cuecast.ErrNotFound when cfg has none.
func (d *Distributor) Versions(ctx context.Context, cfg cuecast.ConfigPath) ([]cuecast.Version, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("list versions: %w", err)
	}
	var out []cuecast.Version
	seq := uint64(1)
	for {
		sv, err := d.nextFrom(ctx, cfg, seq)
		if errors.Is(err, cuecast.ErrNotFound) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("list versions of %s: %w", cfg, err)
		}
		out = append(out, sv.Version)
		seq = sv.Seq + 1
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("list versions of %s: %w", cfg, cuecast.ErrNotFound)
	}
	slices.Reverse(out)
	return out, nil
}

// Configs returns every config with at least one retained version, tombstoned
// ones included, sorted.
func (d *Distributor) Configs(ctx context.Context) ([]cuecast.ConfigPath, error) {
	// By direct get only (the operator's account has no JetStream API):
	// the newest version of each config in one answer, or, beyond the
	// server's limit of subjects for that, every retained version.
	seen := map[cuecast.ConfigPath]bool{}
	collect := func(m *jetstream.RawStreamMsg) error {
		if p, ok := configFromVersionSubject(m.Subject); ok {
			seen[p] = true
		}
		return nil
	}
	err := d.versions.LastPerSubject(ctx, cuecast.StoredPrefix+".*.v.>", collect)
	if errors.Is(err, ErrTooManySubjects) {
		err = d.versions.Each(ctx, cuecast.StoredPrefix+".*.v.>", collect)
	}
	if err != nil {
		return nil, fmt.Errorf("list configs: %w", err)
	}
	out := make([]cuecast.ConfigPath, 0, len(seen))
	for p := range seen {
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b cuecast.ConfigPath) int { return strings.Compare(string(a), string(b)) })
	return out, nil
}

// latestOfAll returns the newest version of every config, decoded, by
// Configs' one multi-last direct get; a stream with more configs than the
// server answers that way gives an error wrapping ErrTooManySubjects (read
// each config's latest then). It is for counting, not numbering: any
// replica may answer a direct get, so unlike latest it neither reads from
// the leader when fenced nor feeds the cache a publish numbers from.
func (d *Distributor) latestOfAll(ctx context.Context) (map[cuecast.ConfigPath]storedVersion, error) {
	out := map[cuecast.ConfigPath]storedVersion{}
	err := d.versions.LastPerSubject(ctx, cuecast.StoredPrefix+".*.v.>", func(m *jetstream.RawStreamMsg) error {
		cfg, ok := configFromVersionSubject(m.Subject)
		if !ok {
			return nil
		}
		sv, err := decodeVersionMsg(m)
		if err != nil {
			return fmt.Errorf("latest version of %s: %w", cfg, err)
		}
		out[cfg] = sv
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the latest versions: %w", err)
	}
	return out, nil
}

// Renumber stores v as the first retained version of its config, whatever
// number the stream's latest has: every version and chunk the stream holds
// for the config is purged first, then v is published create-only (the
// subject must still be empty). It exists for `cuecast repair`: when the
// stream lost versions that instances may hold, the config restarts above
// the highest number ever published (v.Version), so no number is given a
// second meaning; the versions in between are never stored, and reading them
// returns cuecast.ErrPurged. Everything else is as for Publish.
// prepareVersion checks v against its content and fills what the content
// decides (checksum, size), for Publish and Renumber alike; verb names the
// caller in errors.
func prepareVersion(verb string, v *cuecast.Version, content []byte) error {
	if err := v.Config.Validate(); err != nil {
		return fmt.Errorf("%s version: %w", verb, err)
	}
	if v.Version == 0 {
		return fmt.Errorf("%s %s: version numbers start at 1", verb, v.Config)
	}
	if v.Deleted && len(content) > 0 {
		return fmt.Errorf("%s %s@%d: a tombstone carries no content", verb, v.Config, v.Version)
	}
	sum := cuecast.Checksum(content)
	if v.Checksum == "" {
		v.Checksum = sum
	} else if v.Checksum != sum {
		return fmt.Errorf("%s %s@%d: checksum %s, content hashes to %s: %w", verb, v.Config, v.Version, v.Checksum, sum, cuecast.ErrChecksumMismatch)
	}
	v.Size = int64(len(content))
	v.Chunks, v.Signature = nil, ""
	return nil
}

func (d *Distributor) Renumber(ctx context.Context, v cuecast.Version, content []byte) error {
	if err := prepareVersion("renumber", &v, content); err != nil {
		return err
	}
	for _, subj := range []string{cuecast.VersionSubject(v.Config), cuecast.ChunkSubject(v.Config)} {
		if err := d.stream.Purge(ctx, jetstream.WithPurgeSubject(subj)); err != nil {
			return fmt.Errorf("renumber %s@%d: purge %s: %w", v.Config, v.Version, subj, err)
		}
	}
	d.forget(v.Config)
	// An empty subject (sequence 0) as the predecessor, numbered one below v.
	prev := storedVersion{Version: cuecast.Version{Config: v.Config, Version: v.Version - 1}}
	if err := d.publish(ctx, v, content, prev, false); err != nil {
		return fmt.Errorf("renumber: %w", err)
	}
	return nil
}

// forget drops every cached address and latest version of cfg.
func (d *Distributor) forget(cfg cuecast.ConfigPath) {
	d.latestCache.Delete(cfg)
	d.recent.Range(func(k, _ any) bool {
		if k.(versionKey).cfg == cfg {
			d.recent.Delete(k)
		}
		return true
	})
}

// ErrNoSpace: JetStream refused to store a message for lack of space (its
// disk is full or its max_file_store limit is reached). Nothing is lost:
// the tailer retries the publish at its next poll, so publishing resumes by
// itself once space is freed.
var ErrNoSpace = errors.New("JetStream has no space left (disk full or store limit reached; publishing resumes once space is freed)")

// errCodeInsufficientResources is the server's JSInsufficientResourcesErr
// (nats.go's jetstream package has no constant for it).
const errCodeInsufficientResources jetstream.ErrorCode = 10023

// isOutOfSpace reports JetStream's "insufficient resources" refusal.
func isOutOfSpace(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == errCodeInsufficientResources
}
