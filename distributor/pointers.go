package distributor

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/cuecast/cuecast"
)

// Pointer returns the pointer of one cohort bucket of cfg. It returns an
// error wrapping cuecast.ErrNotFound when the bucket has none.
func (d *Distributor) Pointer(ctx context.Context, cfg cuecast.ConfigPath, bucket int) (cuecast.Pointer, error) {
	if err := checkTarget(cfg, bucket); err != nil {
		return cuecast.Pointer{}, fmt.Errorf("get pointer: %w", err)
	}
	p, err := d.newest(ctx, cuecast.PointerSubject(cfg, bucket), cuecast.AllPointerSubject(cfg))
	if err != nil {
		return cuecast.Pointer{}, fmt.Errorf("get pointer %s bucket %d: %w", cfg, bucket, err)
	}
	return p, nil
}

// newest reads the pointers on subjs and returns the one with the highest
// revision, which is the one an instance following those subjects runs.
func (d *Distributor) newest(ctx context.Context, subjs ...string) (cuecast.Pointer, error) {
	var best cachedPointer
	for _, subj := range subjs {
		p, seq, err := d.pointer(ctx, subj)
		if errors.Is(err, cuecast.ErrNotFound) {
			continue
		}
		if err != nil {
			return cuecast.Pointer{}, err
		}
		if c := (cachedPointer{p: p, seq: seq}); c.governs(best) {
			best = c
		}
	}
	if best.seq == 0 {
		return cuecast.Pointer{}, cuecast.ErrNotFound
	}
	return best.p, nil
}

// InstancePointer returns the pointer of one instance of cfg (see
// SetInstancePointers). It returns an error wrapping cuecast.ErrNotFound
// when the instance has none.
func (d *Distributor) InstancePointer(ctx context.Context, cfg cuecast.ConfigPath, instance string) (cuecast.Pointer, error) {
	if err := cfg.Validate(); err != nil {
		return cuecast.Pointer{}, fmt.Errorf("get instance pointer: %w", err)
	}
	if err := cuecast.ValidateInstance(instance); err != nil {
		return cuecast.Pointer{}, fmt.Errorf("get instance pointer: %w", err)
	}
	p, _, err := d.pointer(ctx, cuecast.InstancePointerSubject(cfg, instance))
	if err != nil {
		return cuecast.Pointer{}, fmt.Errorf("get pointer %s instance %s: %w", cfg, instance, err)
	}
	return p, nil
}

// target is one pointer subject to write: a cohort bucket's, an instance's,
// or the one for every bucket.
type target struct {
	name string // for errors: "bucket 7", "instance web-3", "all buckets"
	subj string
	// over are the subjects whose pointer, when written later, governs the
	// instances this target is for: what they run now is the newest pointer
	// among subj and these.
	over []string
}

func bucketTarget(cfg cuecast.ConfigPath, b int) target {
	return target{name: "bucket " + strconv.Itoa(b), subj: cuecast.PointerSubject(cfg, b), over: []string{cuecast.AllPointerSubject(cfg)}}
}

func allTarget(cfg cuecast.ConfigPath) target {
	return target{name: "all buckets", subj: cuecast.AllPointerSubject(cfg)}
}

func instanceTarget(cfg cuecast.ConfigPath, id string) target {
	return target{name: "instance " + id, subj: cuecast.InstancePointerSubject(cfg, id),
		over: []string{cuecast.PointerSubject(cfg, cuecast.Cohort(cfg.Namespace(), id)), cuecast.AllPointerSubject(cfg)}}
}

// moveBuckets writes p to buckets, skipping those for which skip(what they
// run) is true. When that leaves every bucket to move, or every other one
// holding an equal pointer already, it writes one pointer on the subject of
// all buckets instead of 100: one message reaches the whole fleet, as a bare
// core-NATS fan-out would. equal says a bucket's pointer may be written
// again harmlessly. With everyone, that all-buckets pointer is written even
// when every bucket already runs p: an instance pointer written after them
// may name something else, and only a newer write reaches that instance.
func (d *Distributor) moveBuckets(ctx context.Context, cfg cuecast.ConfigPath, buckets []int, p cuecast.Pointer, body []byte, skip, equal func(cuecast.Pointer) bool, everyone bool) (int, error) {
	targets := make([]target, len(buckets))
	for i, b := range buckets {
		targets[i] = bucketTarget(cfg, b)
	}
	if allBuckets(buckets) {
		cur, err := d.currentPointers(ctx, targets)
		if err != nil {
			return 0, err
		}
		moving, whole := 0, true
		for _, t := range targets {
			c := effective(cur, t)
			switch {
			case c.seq == 0 || !skip(c.p):
				moving++
			case !equal(c.p):
				whole = false // a bucket this write must not touch
			}
		}
		if moving == 0 && !everyone {
			return 0, nil
		}
		if whole {
			n, err := d.setPointers(ctx, cfg, []target{allTarget(cfg)}, p, body, func(cuecast.Pointer) bool { return false })
			if err == nil && n == 1 {
				d.dropInstancePointers(ctx, cfg)
			}
			return n, err
		}
	}
	return d.setPointers(ctx, cfg, targets, p, body, skip)
}

// dropInstancePointers purges cfg's instance pointers stored before its
// all-buckets pointer, just written: every instance follows the newer
// all-buckets pointer, so they govern nobody, and each may carry up to
// InlineLimit of content. Without this, every instance a stage ever named
// would keep a pointer message per config for good. The purge stops at the
// all-buckets pointer's sequence, so an instance pointer written since is
// kept. A failure costs only storage, so it is logged, not returned.
func (d *Distributor) dropInstancePointers(ctx context.Context, cfg cuecast.ConfigPath) {
	allSubj := cuecast.AllPointerSubject(cfg)
	c, ok := d.ptrs.Load(allSubj)
	if !ok {
		return
	}
	upTo := c.(cachedPointer).seq
	filter := cuecast.InstancePointerSubject(cfg, "*")
	if err := d.stream.Purge(ctx, jetstream.WithPurgeSubject(filter), jetstream.WithPurgeSequence(upTo)); err != nil {
		d.log.Warn("purge superseded instance pointers", "config", cfg, "before", upTo, "err", err)
		return
	}
	// The cache would hold sequences that the next compare-and-swap on
	// those subjects no longer matches.
	prefix, suffix, _ := strings.Cut(filter, "*")
	d.ptrs.Range(func(k, v any) bool {
		subj := k.(string)
		id, ok := strings.CutPrefix(subj, prefix)
		if id, ok2 := strings.CutSuffix(id, suffix); ok && ok2 && !strings.Contains(id, ".") && v.(cachedPointer).seq < upTo {
			d.ptrs.Store(subj, cachedPointer{})
		}
		return true
	})
}

// allBuckets reports whether buckets names each of the 100 buckets.
func allBuckets(buckets []int) bool {
	if len(buckets) != cuecast.Buckets {
		return false
	}
	var seen [cuecast.Buckets]bool
	for _, b := range buckets {
		if b < 0 || b >= cuecast.Buckets || seen[b] {
			return false
		}
		seen[b] = true
	}
	return true
}

// effective is the pointer the instances of t run: the newest of t's own
// and those that override it.
func effective(cur map[string]cachedPointer, t target) cachedPointer {
	c := cur[t.subj]
	for _, o := range t.over {
		if oc := cur[o]; oc.governs(c) {
			c = oc
		}
	}
	return c
}

func checkTarget(cfg cuecast.ConfigPath, bucket int) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if bucket < 0 || bucket >= cuecast.Buckets {
		return fmt.Errorf("bucket %d: want 0-%d", bucket, cuecast.Buckets-1)
	}
	return nil
}

// pointer reads the pointer on subj and the sequence it is stored at.
func (d *Distributor) pointer(ctx context.Context, subj string) (cuecast.Pointer, uint64, error) {
	m, err := d.versions.GetLastMsgForSubject(ctx, subj)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return cuecast.Pointer{}, 0, cuecast.ErrNotFound
	}
	if err != nil {
		return cuecast.Pointer{}, 0, err
	}
	var p cuecast.Pointer
	if err := json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderPointer)), &p); err != nil {
		return cuecast.Pointer{}, 0, fmt.Errorf("decode pointer at %d: %w", m.Sequence, err)
	}
	return p, m.Sequence, nil
}

// describe fills in what p repeats of the stored version sv and returns the
// content to carry inline (nil when p is not inline).
func (d *Distributor) describe(ctx context.Context, p *cuecast.Pointer, sv storedVersion) ([]byte, error) {
	p.Seq, p.Checksum, p.Size = sv.Seq, sv.Checksum, sv.Size
	p.Commit, p.Deleted = sv.Commit, sv.Deleted
	body, ok, err := d.inlineContent(ctx, sv)
	p.Inline = ok
	return body, err
}

// inlineContent returns sv's content when it is small enough to ride in
// pointer messages: from the latest-version cache (a deploy right after a
// publish) or read once by sequence (a rollback).
func (d *Distributor) inlineContent(ctx context.Context, sv storedVersion) ([]byte, bool, error) {
	if !d.inlinable(sv) {
		return nil, false, nil
	}
	if sv.Deleted || sv.Size == 0 {
		return nil, true, nil
	}
	if sv.body != nil {
		return sv.body, true, nil
	}
	if l, ok := d.latestCache.Load(sv.Config); ok {
		if l := l.(*storedVersion); l.Seq == sv.Seq && l.body != nil {
			return l.body, true, nil
		}
	}
	m, err := d.versions.GetMsg(ctx, sv.Seq, "")
	if err != nil {
		return nil, false, fmt.Errorf("read version %d at %d for inlining: %w", sv.Version.Version, sv.Seq, err)
	}
	if m.Subject != cuecast.VersionSubject(sv.Config) || cuecast.Checksum(m.Data) != sv.Checksum {
		return nil, false, fmt.Errorf("read version %d at %d for inlining: stored message is not that version: %w", sv.Version.Version, sv.Seq, cuecast.ErrChecksumMismatch)
	}
	return m.Data, true, nil
}

// SetPointers points the given cohort buckets of cfg at p. p names a stored
// version: when p.Seq is 0 it is looked up (and p.Checksum and p.Size filled
// in); p.SetAt defaults to now. Buckets already running an equal pointer
// (same version, checksum and rollback flag) are left alone, except that
// all 100 buckets are always written, as one all-buckets pointer, so that it
// also overrides every instance pointer (SetInstancePointers). Each write is a
// compare-and-swap on the bucket's subject; when another writer moved a
// bucket in between, the returned error wraps cuecast.ErrConflict and the
// other buckets are still written. Unknown versions give cuecast.ErrNotFound
// or cuecast.ErrPurged.
func (d *Distributor) SetPointers(ctx context.Context, cfg cuecast.ConfigPath, buckets []int, p cuecast.Pointer) error {
	for _, b := range buckets {
		if err := checkTarget(cfg, b); err != nil {
			return fmt.Errorf("set pointers: %w", err)
		}
	}
	if p.Config == "" {
		p.Config = cfg
	}
	if p.Config != cfg {
		return fmt.Errorf("set pointers of %s: pointer names %s", cfg, p.Config)
	}
	var body []byte
	if p.Seq == 0 {
		sv, err := d.lookupVersion(ctx, cfg, p.Version)
		if err != nil {
			return fmt.Errorf("set pointers of %s to version %d: %w", cfg, p.Version, err)
		}
		if body, err = d.describe(ctx, &p, sv); err != nil {
			return fmt.Errorf("set pointers of %s to version %d: %w", cfg, p.Version, err)
		}
	} else {
		// The caller named the version's address itself: written as given,
		// without inline content.
		p.Inline = false
	}
	if p.SetAt.IsZero() {
		p.SetAt = time.Now().UTC()
	}
	equal := func(cur cuecast.Pointer) bool {
		return cur.Version == p.Version && cur.Checksum == p.Checksum && cur.Rollback == p.Rollback
	}
	if _, err := d.moveBuckets(ctx, cfg, buckets, p, body, equal, equal, true); err != nil {
		return fmt.Errorf("set pointers of %s to version %d: %w", cfg, p.Version, err)
	}
	return nil
}

// SetInstancePointers points the named instances of cfg at p, each on its
// own subject cc.<ns>.i.<instance>.<name> beside its cohort bucket's
// pointer. An instance follows whichever of the two was written last (the
// higher signed revision, Pointer.Revision), so a stage naming a few instances moves exactly
// those, and a later write to their bucket takes them along again
// (docs/PROTOCOL.md §5.2). p is filled in and written as by SetPointers,
// with the same compare-and-swap and conflict rules.
func (d *Distributor) SetInstancePointers(ctx context.Context, cfg cuecast.ConfigPath, instances []string, p cuecast.Pointer) error {
	if err := cfg.Validate(); err != nil {
		return fmt.Errorf("set instance pointers: %w", err)
	}
	targets := make([]target, len(instances))
	for i, id := range instances {
		if err := cuecast.ValidateInstance(id); err != nil {
			return fmt.Errorf("set instance pointers of %s: %w", cfg, err)
		}
		targets[i] = instanceTarget(cfg, id)
	}
	if p.Config == "" {
		p.Config = cfg
	}
	if p.Config != cfg {
		return fmt.Errorf("set instance pointers of %s: pointer names %s", cfg, p.Config)
	}
	sv, err := d.lookupVersion(ctx, cfg, p.Version)
	if err != nil {
		return fmt.Errorf("set instance pointers of %s to version %d: %w", cfg, p.Version, err)
	}
	body, err := d.describe(ctx, &p, sv)
	if err != nil {
		return fmt.Errorf("set instance pointers of %s to version %d: %w", cfg, p.Version, err)
	}
	if p.SetAt.IsZero() {
		p.SetAt = time.Now().UTC()
	}
	_, err = d.setPointers(ctx, cfg, targets, p, body, func(cur cuecast.Pointer) bool {
		return cur.Version == p.Version && cur.Checksum == p.Checksum && cur.Rollback == p.Rollback
	})
	if err != nil {
		return fmt.Errorf("set instance pointers of %s to version %d: %w", cfg, p.Version, err)
	}
	return nil
}

// setPointers writes p (with body as the message body: the inline content)
// to every target for which skip(current) is false and returns how many it
// wrote. The current pointers come from the cache of
// what this Distributor last read or wrote (read concurrently when
// missing); the writes are pipelined, each a compare-and-swap on the
// subject's last sequence. A lost swap drops the subject from the cache, so
// a retry reads it afresh.
func (d *Distributor) setPointers(ctx context.Context, cfg cuecast.ConfigPath, targets []target, p cuecast.Pointer, body []byte, skip func(cuecast.Pointer) bool) (int, error) {
	rev, err := d.nextRevision(ctx, cfg)
	if err != nil {
		return 0, err
	}
	p.Revision = rev
	cur, err := d.currentPointers(ctx, targets)
	if err != nil {
		return 0, err
	}
	type write struct {
		target
		p   cuecast.Pointer
		ack jetstream.PubAckFuture
	}
	var writes []write
	var errs []error
	for _, t := range targets {
		own := cur[t.subj]
		if c := effective(cur, t); c.seq != 0 && skip(c.p) {
			// Never skip on the cache's word alone: another writer may
			// have moved a subject a moment ago.
			fresh, err := d.readPointers(ctx, append([]string{t.subj}, t.over...))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: read: %w", t.name, err))
				continue
			}
			own = fresh[t.subj]
			if c := effective(fresh, t); c.seq != 0 && skip(c.p) {
				continue
			}
		}
		// Signed for its subject: replayed onto another, it is refused.
		tp := p
		tp.Subject = t.subj
		enc, err := d.encodePointer(&tp)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", t.name, err))
			continue
		}
		m := pointerMsg(t.subj, enc, body)
		m.Header.Set(jetstream.ExpectedLastSubjSeqHeader, strconv.FormatUint(own.seq, 10))
		ack, err := d.js.PublishMsgAsync(m)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: write: %w", t.name, err))
			continue
		}
		writes = append(writes, write{target: t, p: tp, ack: ack})
	}
	written := 0
	for _, w := range writes {
		select {
		case pa := <-w.ack.Ok():
			d.ptrs.Store(w.subj, cachedPointer{p: w.p, seq: pa.Sequence})
			written++
		case err := <-w.ack.Err():
			d.ptrs.Delete(w.subj)
			if isWrongLastSeq(err) {
				errs = append(errs, fmt.Errorf("%s moved concurrently: %w", w.name, cuecast.ErrConflict))
			} else {
				errs = append(errs, fmt.Errorf("%s: write: %w", w.name, err))
			}
		case <-ctx.Done():
			d.ptrs.Delete(w.subj)
			errs = append(errs, fmt.Errorf("%s: write: %w", w.name, ctx.Err()))
		}
	}
	if written > 0 {
		d.log.Info("set pointers", "config", cfg, "version", p.Version, "seq", p.Seq, "rev", p.Revision, "pointers", written,
			"rollback", p.Rollback, "rollout", p.Rollout, "reason", p.Reason)
	}
	return written, errors.Join(errs...)
}

// pointerMsg is a pointer message: the pointer JSON in its header, the
// inline content (or nothing) as its body, rolling up its subject.
func pointerMsg(subj string, enc, body []byte) *nats.Msg {
	m := nats.NewMsg(subj)
	m.Header.Set(jetstream.MsgRollup, jetstream.MsgRollupSubject)
	m.Header.Set(cuecast.HeaderPointer, string(enc))
	m.Data = body
	return m
}

// cachedPointer is a bucket's pointer and its stream sequence (0: none).
type cachedPointer struct {
	p   cuecast.Pointer
	seq uint64
}

// governs reports whether c was written after o, so that an instance
// following both runs c: the higher revision, and for pointers written
// before revisions existed (revision 0), the higher stream sequence.
func (c cachedPointer) governs(o cachedPointer) bool {
	if c.seq == 0 || o.seq == 0 {
		return c.seq != 0
	}
	if c.p.Revision != o.p.Revision {
		return c.p.Revision > o.p.Revision
	}
	return c.seq > o.seq
}

// currentPointers returns the pointer on each target's subject, keyed by
// subject, from the cache or read concurrently.
func (d *Distributor) currentPointers(ctx context.Context, targets []target) (map[string]cachedPointer, error) {
	out := make(map[string]cachedPointer, len(targets))
	var missing []string
	for _, t := range targets {
		for _, subj := range append([]string{t.subj}, t.over...) {
			if _, done := out[subj]; done {
				continue
			}
			if c, ok := d.ptrs.Load(subj); ok {
				out[subj] = c.(cachedPointer)
			} else if !slices.Contains(missing, subj) {
				missing = append(missing, subj)
			}
		}
	}
	read, err := d.readPointers(ctx, missing)
	maps.Copy(out, read)
	return out, err
}

// readPointers reads the pointer on each subject concurrently, caching what
// it finds; a subject without one maps to the zero cachedPointer.
func (d *Distributor) readPointers(ctx context.Context, missing []string) (map[string]cachedPointer, error) {
	out := make(map[string]cachedPointer, len(missing))
	var mu sync.Mutex
	var wg sync.WaitGroup
	var errs []error
	sem := make(chan struct{}, 32)
	for _, subj := range missing {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			p, seq, err := d.pointer(ctx, subj)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, cuecast.ErrNotFound):
				out[subj] = cachedPointer{}
			case err != nil:
				errs = append(errs, fmt.Errorf("read %s: %w", subj, err))
			default:
				out[subj] = cachedPointer{p: p, seq: seq}
				d.ptrs.Store(subj, out[subj])
			}
		}()
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// followable reports whether the pointer p, RePublished on subj at seq as
// the unsigned headers say, may replace the cached c: it must be signed by
// this Distributor's key for subj and carry a higher revision than c, so
// that a replayed or forged message cannot make the cache expect a
// sequence the stream does not have (every write would then lose its
// compare-and-swap). Without a key, the revision alone decides; between
// pointers from before revisions, the sequence.
func (d *Distributor) followable(p cuecast.Pointer, subj string, seq uint64, c cachedPointer) bool {
	if c.seq == 0 {
		return d.o.SigningKey == nil || d.signedHere(p, subj)
	}
	if p.Revision == 0 && c.p.Revision == 0 {
		return seq > c.seq
	}
	if p.Revision <= c.p.Revision {
		return false
	}
	return d.o.SigningKey == nil || d.signedHere(p, subj)
}

// encodePointer signs p (when the Distributor has a key) and encodes it.
func (d *Distributor) encodePointer(p *cuecast.Pointer) ([]byte, error) {
	if err := d.sign("pointer", p, &p.Signature); err != nil {
		return nil, err
	}
	enc, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode pointer: %w", err)
	}
	return enc, nil
}

// revisions is the last revision a Distributor gave each config's pointers.
type revisions struct {
	mu   sync.Mutex
	last map[cuecast.ConfigPath]uint64
	now  func() time.Time // nil: time.Now; tests skew it
}

// nextRevision returns the revision of the next pointer write of cfg: above
// every revision stored on cfg's pointer subjects and every one this
// Distributor gave, and the wall clock in Unix nanoseconds when that is
// higher. Reading the stored ones each time (four direct reads of the last
// message on a wildcard, one per kind of pointer subject) is what keeps the
// revisions rising across a serve restart and a failover to a replica whose
// clock is behind: the clock alone would let a write after a failover rank
// below one before it, and subscribers would not follow it. A restored
// stream holds lower revisions than subscribers saw; the clock takes the
// next write above them unless it went backwards (docs/PROTOCOL.md §5.2).
func (d *Distributor) nextRevision(ctx context.Context, cfg cuecast.ConfigPath) (uint64, error) {
	return d.nextRevisions(ctx, cfg, 1)
}

// nextRevisions is nextRevision for n writes: it returns the first of n
// consecutive revisions, all above every earlier one.
//
// Every pointer write asks for its revision first, so here a writer that
// claimed the writer fence also checks, with the same round trip, that no
// later term has claimed it since (checkFence).
func (d *Distributor) nextRevisions(ctx context.Context, cfg cuecast.ConfigPath, n int) (uint64, error) {
	fenced := make(chan error, 1)
	if d.fenced.Load() {
		go func() { fenced <- d.checkFence(ctx) }()
	} else {
		fenced <- nil
	}
	stored, err := d.storedRevision(ctx, cfg)
	if ferr := <-fenced; ferr != nil {
		return 0, fmt.Errorf("write pointers of %s: %w", cfg, ferr)
	}
	if err != nil {
		return 0, fmt.Errorf("read the revision of %s: %w", cfg, err)
	}
	d.revs.mu.Lock()
	defer d.revs.mu.Unlock()
	if d.revs.last == nil {
		d.revs.last = map[cuecast.ConfigPath]uint64{}
	}
	now := time.Now
	if d.revs.now != nil {
		now = d.revs.now
	}
	rev := max(uint64(now().UnixNano()), max(stored, d.revs.last[cfg])+1)
	d.revs.last[cfg] = rev + uint64(n) - 1
	return rev, nil
}

// storedRevision is the highest revision on cfg's stored pointers: the one
// on the last message of each kind of pointer subject, since each write's
// revision is above every one stored before it.
func (d *Distributor) storedRevision(ctx context.Context, cfg cuecast.ConfigPath) (uint64, error) {
	ns, name := cfg.Namespace(), cuecast.SubjectName(cfg)
	filters := [...]string{
		cuecast.StoredPrefix + "." + ns + ".p.*." + name, // every bucket's and the all-buckets pointer
		cuecast.InstancePointerSubject(cfg, "*"),
		cuecast.StagedSubject(cfg),
		cuecast.ActivationSubject(cfg),
	}
	var (
		mu   sync.Mutex
		wg   sync.WaitGroup
		rev  uint64
		errs []error
	)
	for _, f := range filters {
		wg.Go(func() {
			m, err := d.versions.GetLastMsgForSubject(ctx, f)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case errors.Is(err, jetstream.ErrMsgNotFound):
			case err != nil:
				errs = append(errs, fmt.Errorf("read %s: %w", f, err))
			default:
				var p cuecast.Pointer
				if json.Unmarshal([]byte(m.Header.Get(cuecast.HeaderPointer)), &p) == nil {
					rev = max(rev, p.Revision)
				}
			}
		})
	}
	wg.Wait()
	return rev, errors.Join(errs...)
}

// sign sets *sig to the signature of m's SigningBytes under the signing key
// (unpadded base64url ed25519, docs/PROTOCOL.md §6): m is a version or a
// pointer, named by what in an error. Without a key it leaves *sig alone.
func (d *Distributor) sign(what string, m interface{ SigningBytes() []byte }, sig *string) error {
	if d.o.SigningKey == nil {
		return nil
	}
	*sig = ""
	raw, err := d.o.SigningKey.Sign(m.SigningBytes())
	if err != nil {
		return fmt.Errorf("sign %s: %w", what, err)
	}
	*sig = base64.RawURLEncoding.EncodeToString(raw)
	return nil
}

// Deploy points every cohort bucket of v.Config at version v.Version. It is
// idempotent: buckets already on v are skipped, and so are buckets on a newer
// version (Deploy never moves a bucket backwards; SetPointers with Rollback
// does). v must be published: Deploy returns cuecast.ErrNotFound or
// cuecast.ErrPurged otherwise, and cuecast.ErrConflict when the stored
// version has another checksum. A bucket moved by a concurrent writer is
// re-read and retried a few times.
//
// The rollout controller replaces this with staged rollout.
func (d *Distributor) Deploy(ctx context.Context, v cuecast.Version) error {
	if err := v.Config.Validate(); err != nil {
		return fmt.Errorf("deploy: %w", err)
	}
	// A version just published needs no read: its address is cached.
	sv, err := d.lookupVersion(ctx, v.Config, v.Version)
	if err != nil {
		return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
	}
	if v.Checksum != "" && v.Checksum != sv.Checksum {
		return fmt.Errorf("deploy %s@%d: checksum %s, stored version has %s: %w", v.Config, v.Version, v.Checksum, sv.Checksum, cuecast.ErrConflict)
	}
	p := cuecast.Pointer{Config: v.Config, Version: sv.Version.Version, Rollout: "deploy", SetAt: time.Now().UTC()}
	body, err := d.describe(ctx, &p, sv)
	if err != nil {
		return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
	}
	buckets := make([]int, cuecast.Buckets)
	for i := range buckets {
		buckets[i] = i
	}
	equal := func(cur cuecast.Pointer) bool {
		return cur.Version == p.Version && cur.Checksum == p.Checksum && !cur.Rollback
	}
	skip := func(cur cuecast.Pointer) bool {
		return equal(cur) || (cur.Version > p.Version && !cur.Rollback)
	}
	for attempt := 1; ; attempt++ {
		_, err := d.moveBuckets(ctx, v.Config, buckets, p, body, skip, equal, false)
		if err == nil {
			return nil
		}
		if !errors.Is(err, cuecast.ErrConflict) || attempt == 3 {
			return fmt.Errorf("deploy %s@%d: %w", v.Config, v.Version, err)
		}
		d.log.Warn("deploy lost a race, retrying", "config", v.Config, "version", v.Version, "attempt", attempt, "err", err)
	}
}
