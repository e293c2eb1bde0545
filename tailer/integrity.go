package tailer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// ErrInconsistent: the version stream holds fewer versions of a config than
// were published before (its files were truncated, damaged or deleted).
// Publishing the next number would give a number instances already hold a
// second meaning, so nothing is published until Repair. The error is an
// *InconsistentError naming the configs.
var ErrInconsistent = errors.New("version store is behind the versions already published")

// Gap is one config whose stream is behind what was published.
type Gap struct {
	Config cuecast.ConfigPath
	// Stored is the newest version the stream holds (0: none).
	Stored uint64
	// Published is the highest number known to be taken, and Source says
	// which record knows it: "cursor" (the tailer's state in the KV
	// bucket), "data directory" (the high-water file), "rollout records".
	Published uint64
	Source    string
}

// InconsistentError lists the configs whose stream is behind.
type InconsistentError struct{ Gaps []Gap }

// summarised is how many gaps Error names; the log names every one (see
// logGaps).
const summarised = 5

// Error summarises: the configs that lost the most versions first, so the
// worst is always named, and the rest counted.
func (e *InconsistentError) Error() string {
	gaps := slices.Clone(e.Gaps)
	slices.SortStableFunc(gaps, func(a, b Gap) int { return cmp.Compare(b.Published-b.Stored, a.Published-a.Stored) })
	var b strings.Builder
	fmt.Fprintf(&b, "%d config(s) have fewer versions in the stream than were published; publishing is refused until `cuecast repair`:", len(gaps))
	for i, g := range gaps {
		if i == summarised {
			fmt.Fprintf(&b, " and %d more, each named in serve's log", len(gaps)-i)
			break
		}
		fmt.Fprintf(&b, " %s holds v%d but v%d was published (%s);", g.Config, g.Stored, g.Published, g.Source)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// logGaps logs e once per config, so an operator sees every damaged config
// and its numbers however many there are.
func (t *Tailer) logGaps(e *InconsistentError) {
	for _, g := range e.Gaps {
		t.log.Error("version store damaged: publishing refused", "config", g.Config, "stored", g.Stored,
			"published", g.Published, "source", g.Source)
	}
	t.log.Error("version store damaged: publishing refused until `cuecast repair`", "configs", len(e.Gaps))
}

// Unwrap makes errors.Is(err, ErrInconsistent) true.
func (e *InconsistentError) Unwrap() error { return ErrInconsistent }

// DeployedVersions is an optional capability of a Deployer: the highest
// version of each config its records name (the rollout controller's stable,
// current, superseded, pending and pinned versions). Those records live
// outside the version stream, so they witness numbers the stream may have
// lost.
type DeployedVersions interface {
	DeployedVersions(ctx context.Context) (map[cuecast.ConfigPath]uint64, error)
}

// Inconsistent returns the error that keeps the tailer from publishing, nil
// when the stream agrees with every record of published versions. Poll sets
// it on the first poll of a process and Repair clears it; /readyz reports it.
func (t *Tailer) Inconsistent() error {
	if e := t.gaps.Load(); e != nil {
		return e
	}
	return nil
}

// floor is the highest number of a config known taken, and by whom.
type floor struct {
	n      uint64
	source string
	// reserved is the data directory's mark: a number that may have been
	// reserved and not published (a crash between the two).
	reserved mark
}

// floors gathers, per config, the highest version number each record
// outside the stream knows of.
func (t *Tailer) floors(ctx context.Context, st *State) (map[cuecast.ConfigPath]floor, error) {
	out := make(map[cuecast.ConfigPath]floor)
	raise := func(cp cuecast.ConfigPath, n uint64, source string) {
		if f := out[cp]; n > f.n {
			f.n, f.source = n, source
			out[cp] = f
		}
	}
	for cp, n := range st.HighWater {
		raise(cp, n, "cursor")
	}
	if d, ok := t.dep.(DeployedVersions); ok {
		recs, err := d.DeployedVersions(ctx)
		if err != nil {
			return nil, fmt.Errorf("read rollout records: %w", err)
		}
		for cp, n := range recs {
			raise(cp, n, "rollout records")
		}
	}
	for cp, m := range t.hw.all() {
		f := out[cp]
		f.reserved = m
		out[cp] = f
	}
	return out, nil
}

// verify compares the stream's latest version of every config that any
// record knows with those records. A stream behind a published number is
// damage; the data directory's mark may be one ahead of the stream (a crash
// after reserving, before publishing) and is held to its meaning by
// checkNumber instead.
func (t *Tailer) verify(ctx context.Context, st *State) error {
	fl, err := t.floors(ctx, st)
	if err != nil {
		return fmt.Errorf("verify versions: %w", err)
	}
	var gaps []Gap
	for _, cp := range slices.Sorted(maps.Keys(fl)) {
		f := fl[cp]
		stored, err := t.storedLatest(ctx, cp)
		if err != nil {
			return fmt.Errorf("verify versions: %w", err)
		}
		switch {
		case stored < f.n:
			gaps = append(gaps, Gap{Config: cp, Stored: stored, Published: f.n, Source: f.source})
		case stored+1 < f.reserved.Version:
			// The mark is taken: it is only ever published with its own
			// content, and Repair numbers above it.
			gaps = append(gaps, Gap{Config: cp, Stored: stored, Published: f.reserved.Version, Source: "data directory"})
		}
	}
	if len(gaps) == 0 {
		t.gaps.Store(nil)
		return nil
	}
	e := &InconsistentError{Gaps: gaps}
	t.gaps.Store(e)
	t.logGaps(e)
	return e
}

// storedLatest is the stream's latest version number of cp, 0 when it has
// none.
func (t *Tailer) storedLatest(ctx context.Context, cp cuecast.ConfigPath) (uint64, error) {
	v, err := t.pub.Latest(ctx, cp)
	if errors.Is(err, cuecast.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("read latest version of %s: %w", cp, err)
	}
	return v.Version, nil
}

// checkNumber refuses to publish a number that is already taken, and
// reserves v's number in the data directory before it is published. The
// only number at or below a mark that may be published is the mark itself,
// with the same commit and checksum: the retry of a publish a crash cut off.
func (t *Tailer) checkNumber(st *State, v cuecast.Version) error {
	if n := st.HighWater[v.Config]; v.Version <= n {
		return t.refuse(Gap{Config: v.Config, Stored: v.Version - 1, Published: n, Source: "cursor"})
	}
	if m, ok := t.hw.get(v.Config); ok && (v.Version < m.Version || v.Version == m.Version && !m.same(v)) {
		return t.refuse(Gap{Config: v.Config, Stored: v.Version - 1, Published: m.Version, Source: "data directory"})
	}
	return t.hw.reserve(v)
}

func (t *Tailer) refuse(g Gap) error {
	e := &InconsistentError{Gaps: []Gap{g}}
	t.gaps.Store(e)
	t.logGaps(e)
	return e
}

// Renumberer stores a version as the first of its config, above numbers the
// stream no longer holds: what Repair publishes through. The distributor
// implements it (Distributor.Renumber).
type Renumberer interface {
	Renumber(ctx context.Context, v cuecast.Version, content []byte) error
}

// Renumbered is one config Repair republished.
type Renumbered struct {
	Config cuecast.ConfigPath
	// Stored is what the stream held (0: nothing), Published the highest
	// number ever taken, Version the new version (Published+1).
	Stored, Published, Version uint64
	Deleted                    bool
}

// RepairReport says what Repair did.
type RepairReport struct {
	// Commit is the branch tip the configs were rebuilt from.
	Commit string
	// Renumbered are the configs whose stream was behind: each got a new
	// version from Commit numbered above everything ever published.
	Renumbered []Renumbered
	// Published are the other configs whose output at Commit differed from
	// their latest version, published as usual.
	Published []cuecast.Version
}

// Repair is the way back from ErrInconsistent. It compiles the whole tree
// of the branch tip; every config whose stream is behind the records of
// published numbers gets a version of the tip's content (a tombstone when
// the tip lacks it) numbered one above the highest number any record knows,
// stored through rn after its old, untrustworthy versions are purged; every
// other config gets a version when its output differs, as a poll would
// publish it. Then the cursor moves to the tip (a history-rewrite halt is
// cleared: the tip is accepted), every new version is deployed, and
// publishing resumes. The caller records the report in the audit trail.
func (t *Tailer) Repair(ctx context.Context, rn Renumberer) (RepairReport, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var rep RepairReport
	r, tip, err := t.openTip(ctx)
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	st, err := t.store.load(ctx)
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	c, err := r.CommitObject(tip)
	if err != nil {
		return rep, fmt.Errorf("repair: read tip %s: %w", tip, err)
	}
	s, err := t.prepare(ctx, r, "", c)
	if err != nil {
		return rep, fmt.Errorf("repair: compile %s: %w", cuecast.ShortCommit(tip.String()), err)
	}
	if s.kind != stepPublish {
		return rep, fmt.Errorf("repair: the tip %s does not compile; fix the branch first", cuecast.ShortCommit(tip.String()))
	}
	fl, err := t.floors(ctx, &st)
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	known, err := t.listed(ctx)
	if err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	targets := slices.Concat(s.res.Configs, known, slices.Collect(maps.Keys(fl)))
	slices.Sort(targets)
	targets = slices.Compact(targets)

	rep.Commit = tip.String()
	meta := versionMeta(c)
	t.order = nil
	if st.HighWater == nil {
		st.HighWater = make(map[cuecast.ConfigPath]uint64)
	}
	undeployed := make(map[cuecast.ConfigPath]bool)
	for _, cp := range st.Undeployed {
		undeployed[cp] = true
	}
	for _, cp := range targets {
		var out *compiler.Output
		if o, ok := s.res.Outputs[cp]; ok {
			out = &o
		}
		stored, err := t.storedLatest(ctx, cp)
		if err != nil {
			return rep, fmt.Errorf("repair: %w", err)
		}
		f := fl[cp]
		top := max(f.n, f.reserved.Version)
		if stored >= top {
			v, fresh, err := t.publishConfig(ctx, &st, meta, cp, out)
			if err != nil {
				return rep, fmt.Errorf("repair: %w", err)
			}
			if v != nil {
				undeployed[cp] = true
				if fresh {
					rep.Published = append(rep.Published, *v)
				}
			}
			continue
		}
		v := meta
		v.Config, v.Version = cp, top+1
		var content []byte
		if out == nil {
			v.Deleted, v.Checksum = true, cuecast.Checksum(nil)
		} else {
			content = out.JSON
			v.Checksum, v.Size = out.Checksum, int64(len(out.JSON))
		}
		v.CompiledAt = time.Now().UTC()
		if err := t.hw.reserve(v); err != nil {
			return rep, fmt.Errorf("repair: %w", err)
		}
		if err := rn.Renumber(ctx, v, content); err != nil {
			return rep, fmt.Errorf("repair: renumber %s as v%d: %w", cp, v.Version, err)
		}
		st.HighWater[cp] = v.Version
		undeployed[cp] = true
		rep.Renumbered = append(rep.Renumbered, Renumbered{Config: cp, Stored: stored, Published: top, Version: v.Version, Deleted: v.Deleted})
		t.log.Warn("config renumbered from Git by repair", "config", cp, "stored", stored, "published", top,
			"version", v.Version, "commit", v.Commit, "deleted", v.Deleted)
	}
	st.Repo, st.Branch = t.cfg.Shown(), t.cfg.Branch
	st.Cursor, st.Base, st.From, st.Rewrite = tip.String(), tip.String(), "", nil
	st.Undeployed = slices.Sorted(maps.Keys(undeployed))
	if err := t.store.save(ctx, &st); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	t.halted = ""
	if err := t.deployPending(ctx, &st); err != nil {
		return rep, fmt.Errorf("repair: %w", err)
	}
	if err := t.verify(ctx, &st); err != nil {
		return rep, fmt.Errorf("repair: still inconsistent afterwards: %w", err)
	}
	t.verified = true
	return rep, nil
}
