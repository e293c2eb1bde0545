package tailer

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/gitfs"
)

// run processes commits in a two-stage pipeline: one goroutine diffs and
// compiles commit k+1 (CPU) while this one publishes commit k and moves the
// cursor (NATS round trips). The stages meet only through the steps channel:
// compiling k+1 needs the base and dependency index after k, which the
// compile stage itself knows as soon as k compiled. Publishing and the
// cursor stay strictly in commit order. When run returns, the compile stage
// has stopped; if it got ahead, the index it leaves describes a commit past
// the cursor, and the next poll rebuilds it (Tailer.index keys it by commit).
func (t *Tailer) run(ctx context.Context, r *git.Repository, st *State, commits []*object.Commit, sum *Summary) error {
	ctx, cancel := context.WithCancel(ctx)
	type prepared struct {
		s   *step
		err error
	}
	steps := make(chan prepared, 2)
	var wg sync.WaitGroup
	// Cancel first, then wait: the compile stage must not outlive run, and
	// when run returns early it may be blocked handing over a step, which
	// only the cancel ends (two defers would run the other way round:
	// TestPollReturnsWhenAPublishFailsMidRun).
	defer func() {
		cancel()
		wg.Wait()
	}()
	wg.Go(func() {
		defer close(steps)
		base := st.Base
		for i := 0; i < len(commits); {
			run, err := t.prepareRun(ctx, r, base, commits[i:])
			if err != nil {
				run = append(run, nil)
			}
			for _, s := range run {
				p := prepared{s: s}
				if s == nil {
					p.err = err
				}
				select {
				case steps <- p:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				return
			}
			base = run[len(run)-1].base
			i += len(run)
		}
	})
	lastDeploy := time.Now()
	for p := range steps {
		if p.err != nil {
			return p.err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := t.apply(ctx, st, p.s, sum); err != nil {
			return fmt.Errorf("commit %s: %w", cuecast.ShortCommit(p.s.c.Hash.String()), err)
		}
		sum.Cursor = st.Cursor
		if time.Since(lastDeploy) >= deployEvery {
			if err := t.deployPending(ctx, st); err != nil {
				return err
			}
			lastDeploy = time.Now()
		}
	}
	return ctx.Err()
}

// maxRun bounds the commits compiled together by prepareRun.
const maxRun = 64

// prepareRun prepares the next commits. A replay of many small commits is
// dominated by the compiler's fixed cost per call (module, manifest, schemas,
// listing the tree), so consecutive commits whose affected configs are
// disjoint are compiled together, once, from the tree of the last of them:
// a config affected only by commit j has, at the last commit, the output it
// had at j, and its version is attributed to j. That holds when no later
// commit of the run touches anything the config depends on, which is
// checked twice: with the index before the run (to choose it) and with the
// index of the compile itself (a commit may add an import the old index
// cannot know). When the check fails, or the run does not compile (one of
// its commits must be rejected, and which one only a commit-by-commit
// compile tells), the first commit is prepared on its own instead.
//
// It returns at least one step unless err is set; the steps before an error
// are valid.
func (t *Tailer) prepareRun(ctx context.Context, r *git.Repository, base string, commits []*object.Commit) ([]*step, error) {
	single := func() ([]*step, error) {
		s, err := t.prepare(ctx, r, base, commits[0])
		if err != nil {
			return nil, fmt.Errorf("commit %s: %w", cuecast.ShortCommit(commits[0].Hash.String()), err)
		}
		return []*step{s}, nil
	}
	if base == "" || len(commits) < 2 {
		return single()
	}
	idx, err := t.index(ctx, r, base)
	if err != nil {
		return nil, err
	}
	run, err := t.disjointRun(r, idx, base, commits[:min(len(commits), maxRun)])
	if err != nil {
		return nil, err
	}
	n := len(run.changed)
	if n < 2 || len(run.union) == 0 {
		return single()
	}
	last := commits[n-1]
	fsys, err := t.cache.FS(r.Storer, last.TreeHash, last.Committer.When)
	if err != nil {
		return nil, err
	}
	targets := slices.Sorted(maps.Keys(run.union))
	res, err := compiler.Compile(ctx, t.src.dir, compiler.Options{
		Configs: targets, FS: fsys, Workers: t.cfg.Workers, Timeout: t.cfg.Timeout, SharedTimeout: t.cfg.sharedTimeout, Runaways: t.runaways, Logger: t.cfg.Logger,
	})
	if err != nil && !errors.Is(err, compiler.ErrNoModule) {
		return nil, fmt.Errorf("compile commits %s..%s: %w", cuecast.ShortCommit(commits[0].Hash.String()), cuecast.ShortCommit(last.Hash.String()), err)
	}
	if err != nil || !res.OK() {
		return single()
	}
	next := idx.Merge(res.Index, res.Configs)
	if !t.stillDisjoint(next, commits, run) {
		return single()
	}
	t.idx, t.idxCommit = next, last.Hash.String()
	out := make([]*step, n)
	now := time.Now()
	for j := range n {
		s := &step{c: commits[j], start: now, base: commits[j].Hash.String(), kind: stepSkip}
		if len(run.affected[j]) > 0 {
			s.kind, s.res, s.targets = stepPublish, res, run.affected[j]
		}
		out[j] = s
	}
	if out[0].carries, err = t.carried(r, base, commits[0], next); err != nil {
		return nil, err
	}
	return out, nil
}

// disjoint is the longest prefix of a batch of commits whose affected
// configs are disjoint: each commit's changed files and affected configs,
// and their union.
type disjoint struct {
	changed  [][]string
	affected [][]cuecast.ConfigPath
	union    map[cuecast.ConfigPath]bool
}

// disjointRun diffs commits one after the other, from base, and stops
// before the first that affects every config or a config an earlier one
// of the run affects (by idx, the index at base).
func (t *Tailer) disjointRun(r *git.Repository, idx *compiler.Index, base string, commits []*object.Commit) (disjoint, error) {
	out := disjoint{union: make(map[cuecast.ConfigPath]bool)}
	bc, err := r.CommitObject(plumbing.NewHash(base))
	if err != nil {
		return out, fmt.Errorf("read base commit %s: %w", cuecast.ShortCommit(base), err)
	}
	prevTree := bc.TreeHash
	for _, c := range commits {
		ch, err := gitfs.Diff(r.Storer, t.cache, prevTree, c.TreeHash)
		if err != nil {
			return out, fmt.Errorf("diff %s: %w", cuecast.ShortCommit(c.Hash.String()), err)
		}
		if slices.ContainsFunc(ch, compiler.AffectsAll) {
			break
		}
		aff := idx.Affected(ch)
		if slices.ContainsFunc(aff, func(cp cuecast.ConfigPath) bool { return out.union[cp] }) {
			break
		}
		for _, cp := range aff {
			out.union[cp] = true
		}
		out.changed, out.affected = append(out.changed, ch), append(out.affected, aff)
		prevTree = c.TreeHash
	}
	return out, nil
}

// stillDisjoint checks the run against next, the index of its compile: a
// commit may add an import the index at base cannot know, and then affects
// a config the run did not attribute to it.
func (t *Tailer) stillDisjoint(next *compiler.Index, commits []*object.Commit, run disjoint) bool {
	for l := range run.changed {
		for _, cp := range next.Affected(run.changed[l]) {
			if !slices.Contains(run.affected[l], cp) {
				t.log.Debug("run split: a commit affects a config the old index did not show",
					"commit", commits[l].Hash.String(), "config", cp)
				return false
			}
		}
	}
	return true
}

// deployEvery bounds how long a long batch of commits (a replay after
// downtime) defers its deploys. Deploying a version that a later commit of
// the batch replaces only starts a rollout to be superseded, and costs the
// distributor a pointer per cohort (BENCHMARKS.md, "Replay"). Until the
// batch ends the fleet keeps running what it ran, which is safe; the bound
// only keeps a backlog of hours from hiding every change.
const deployEvery = 5 * time.Minute

// deployWorkers is how many deploys run at once when a batch ends.
const deployWorkers = 4

// deployPending deploys the latest version of every config in
// st.Undeployed and empties it. During a batch the tailer publishes every
// version but deploys only each config's newest, at the end of the batch (or
// every deployEvery): a rollout of a version that the next commit replaces
// at once would only be superseded. The set is saved with the cursor, so a
// crash between a publish and its deploy is repaired by the next poll.
func (t *Tailer) deployPending(ctx context.Context, st *State) error {
	if len(st.Undeployed) == 0 {
		return nil
	}
	work := make(chan cuecast.ConfigPath)
	errs := make(chan error, deployWorkers)
	var wg sync.WaitGroup
	for range min(deployWorkers, len(st.Undeployed)) {
		wg.Go(func() {
			for cp := range work {
				latest, err := t.pub.Latest(ctx, cp)
				if errors.Is(err, cuecast.ErrNotFound) {
					continue
				}
				if err == nil {
					err = t.deploy(ctx, latest)
				} else {
					err = fmt.Errorf("read latest version of %s: %w", cp, err)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var err error
feed:
	for _, cp := range st.Undeployed {
		select {
		case work <- cp:
		case err = <-errs:
			break feed
		}
	}
	close(work)
	wg.Wait()
	close(errs)
	if err == nil {
		err = <-errs // nil when the channel is empty
	}
	if err != nil {
		return err
	}
	st.Undeployed = nil
	return t.store.save(ctx, st)
}

// step is one commit, diffed and compiled, ready to publish.
type step struct {
	c     *object.Commit
	start time.Time
	kind  stepKind
	// base is the last good commit after this one: c itself unless it was
	// rejected (or passed over before the repo had a module).
	base string
	// errs are a rejected commit's errors.
	errs []compiler.Error
	// res and targets are a good commit's compile and the configs to
	// publish (tombstones for those not in res.Configs). noBase: the commit
	// compiled everything with nothing to diff against, so configs only the
	// stream knows get tombstones too (when the Publisher is a Lister).
	res     *compiler.Result
	targets []cuecast.ConfigPath
	noBase  bool
	// carries names, per config, the rejected commits between base and c
	// whose changes its version holds (cuecast.Version.Carries).
	carries map[cuecast.ConfigPath][]cuecast.CommitRef
	// bad are the namespaces a stepReject or stepPartial rejects; nil
	// when it rejects the whole commit for an error outside every config.
	bad []string
}

type stepKind int

const (
	stepPublish stepKind = iota
	stepReject
	// stepPartial publishes the namespaces whose configs compiled and
	// rejects the others': the commit is recorded as rejected for those
	// and base stays, so what it changed there is compiled again at the
	// next commit.
	stepPartial
	stepSkip // nothing to compile
)

// prepare diffs commit c against base (the last good commit; "" for none),
// compiles what the change affects from c's tree, and updates the dependency
// index. It runs in the compile stage and touches no NATS state.
func (t *Tailer) prepare(ctx context.Context, r *git.Repository, base string, c *object.Commit) (*step, error) {
	s := &step{c: c, start: time.Now(), base: c.Hash.String()}
	fsys, err := t.cache.FS(r.Storer, c.TreeHash, c.Committer.When)
	if err != nil {
		return s, err
	}
	full := base == ""
	var known []cuecast.ConfigPath
	if !full {
		idx, err := t.index(ctx, r, base)
		if err != nil {
			return s, err
		}
		changed, err := t.changedFiles(r, base, c)
		if err != nil {
			return s, err
		}
		if slices.ContainsFunc(changed, compiler.AffectsAll) {
			full, known = true, idx.Configs()
		} else {
			s.targets = idx.Affected(changed)
			if len(s.targets) == 0 {
				t.log.Debug("commit affects no config", "commit", s.base, "files", len(changed))
				s.kind = stepSkip
				t.idxCommit = s.base // the index is unchanged
				return s, nil
			}
		}
	}
	res, err := compiler.Compile(ctx, t.src.dir, compiler.Options{
		Configs: s.targets, FS: fsys, Workers: t.cfg.Workers, Timeout: t.cfg.Timeout, SharedTimeout: t.cfg.sharedTimeout, Runaways: t.runaways, Logger: t.cfg.Logger,
	})
	switch {
	case errors.Is(err, compiler.ErrNoModule) && base == "":
		// Nothing was ever published from this history (a repository's
		// first commits often hold only a README): not a config repo yet.
		t.log.Info("commit has no cue.mod/module.cue yet; nothing to compile", "commit", s.base)
		s.kind, s.base = stepSkip, ""
		return s, nil
	case errors.Is(err, compiler.ErrNoModule):
		// Publishing this would tombstone every config: refuse it.
		res = &compiler.Result{Errors: []compiler.Error{{File: "cue.mod/module.cue", Line: 1, Column: 1,
			ID: "manifest/no-module", Message: "the commit deletes cue.mod/module.cue; restore it"}}}
	case err != nil:
		return s, err
	}
	s.res = res
	idx := res.Index
	if !full {
		idx = t.idx.Merge(res.Index, res.Configs)
	} else {
		s.noBase = base == ""
		present := make(map[cuecast.ConfigPath]bool, len(res.Configs))
		for _, cp := range res.Configs {
			present[cp] = true
		}
		s.targets = slices.Clone(res.Configs)
		for _, cp := range known {
			if !present[cp] {
				s.targets = append(s.targets, cp) // deleted: tombstone
			}
		}
		slices.Sort(s.targets)
		s.targets = slices.Compact(s.targets)
	}
	if !res.OK() {
		s.kind, s.errs, s.base = stepReject, res.Errors, base
		if !s.noBase {
			s.bad = rejectedNamespaces(res.Errors)
		}
		s.targets = slices.DeleteFunc(s.targets, func(cp cuecast.ConfigPath) bool { return slices.Contains(s.bad, cp.Namespace()) })
		if s.bad == nil || len(s.targets) == 0 {
			s.res, s.targets = nil, nil
			return s, nil
		}
		// The index stays base's: the next commit is diffed against base.
		s.kind = stepPartial
		s.carries, err = t.carried(r, base, c, idx)
		return s, err
	}
	t.idx, t.idxCommit = idx, s.base
	if s.carries, err = t.carried(r, base, c, t.idx); err != nil {
		return s, err
	}
	return s, nil
}

// rejectedNamespaces are the namespaces of the configs errs belong to,
// sorted; nil when an error belongs to no config (the manifest, the
// module, a file of the repo's own): then the whole commit is rejected.
func rejectedNamespaces(errs []compiler.Error) []string {
	var out []string
	for _, e := range errs {
		if e.Config == "" {
			return nil
		}
		out = append(out, e.Config.Namespace())
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// apply publishes a prepared step's versions (or records its rejection) and
// moves the cursor. It runs in commit order.
func (t *Tailer) apply(ctx context.Context, st *State, s *step, sum *Summary) error {
	c := s.c
	sum.Commits++
	switch s.kind {
	case stepSkip:
		return t.advance(ctx, st, c, s.base != "")
	case stepReject:
		return t.reject(ctx, st, c, s.errs, s.bad, sum)
	}
	if mr, ok := t.dep.(ManifestRecorder); ok && s.res.Manifest != nil {
		mr.RecordManifest(c.Hash.String(), s.res.Manifest)
	}
	targets := s.targets
	var listed []cuecast.ConfigPath
	if s.noBase {
		var err error
		if listed, err = t.listed(ctx); err != nil {
			return err
		}
		for _, cp := range listed {
			if !slices.Contains(s.res.Configs, cp.Base()) {
				targets = append(targets, cp.Base()) // deleted: tombstone
			}
		}
		slices.Sort(targets)
		targets = slices.Compact(targets)
	}
	targets = withVariants(targets, s.res, st.HighWater, listed)
	meta := versionMeta(c)
	// A rejected commit whose other namespaces were published is carried
	// only into the configs of the namespaces it was rejected in.
	partly := make(map[string][]string)
	for _, rj := range st.Rejected {
		if len(rj.Namespaces) > 0 {
			partly[rj.Commit] = rj.Namespaces
		}
	}
	var published, tombstones int
	undeployed := make(map[cuecast.ConfigPath]bool)
	for _, cp := range st.Undeployed {
		undeployed[cp] = true
	}
	for _, cp := range targets {
		if err := ctx.Err(); err != nil {
			return err
		}
		meta := meta
		meta.Carries = slices.DeleteFunc(slices.Clone(s.carries[cp.Base()]), func(cc cuecast.CommitRef) bool {
			ns, ok := partly[cc.Commit]
			return ok && !slices.Contains(ns, cp.Namespace())
		})
		if len(meta.Carries) == 0 {
			meta.Carries = nil
		}
		var out *compiler.Output
		if o, ok := s.res.Outputs[cp]; ok {
			out = &o
		} else if !cp.IsVariant() && slices.Contains(s.res.Configs, cp) {
			t.log.Warn("config compiled to nothing; keeping its last version", "commit", c.Hash.String(), "config", cp)
			continue
		}
		v, fresh, err := t.publishConfig(ctx, st, meta, cp, out)
		if err != nil {
			return err
		}
		if v == nil {
			continue
		}
		if st.HighWater == nil {
			st.HighWater = make(map[cuecast.ConfigPath]uint64)
		}
		st.HighWater[cp] = max(st.HighWater[cp], v.Version)
		undeployed[cp] = true
		if fresh {
			published++
			if v.Deleted {
				tombstones++
			}
		}
	}
	st.Undeployed = slices.Sorted(maps.Keys(undeployed))
	sum.Versions += published
	sum.Tombstones += tombstones
	if s.kind == stepPartial {
		t.log.Info("commit published in part", "commit", c.Hash.String(), "configs", len(targets), "versions", published,
			"tombstones", tombstones, "rejected_namespaces", s.bad)
		return t.reject(ctx, st, c, s.errs, s.bad, sum)
	}
	// Logged once the cursor is stored: until then the commit is processed
	// again at the next poll (its versions found published), and a log
	// that said so before was read as progress while the store refused the
	// cursor.
	if err := t.advance(ctx, st, c, true); err != nil {
		return err
	}
	t.log.Info("commit processed", "commit", c.Hash.String(), "configs", len(targets), "versions", published,
		"tombstones", tombstones, "elapsed", time.Since(s.start))
	return nil
}

// withVariants expands targets, the configs a commit affects, into the
// paths to publish: each config's own path (its output, or its variant
// index when it has variants), the paths of its variants in res.Outputs,
// and the variants it had before, by the high-water marks and the stream's
// listing, that res no longer has: those get tombstones, as a deleted
// config does. Each variant is its own version stream (docs/VARIANTS.md).
func withVariants(targets []cuecast.ConfigPath, res *compiler.Result, highWater map[cuecast.ConfigPath]uint64, listed []cuecast.ConfigPath) []cuecast.ConfigPath {
	want := make(map[cuecast.ConfigPath]bool, len(targets))
	for _, cp := range targets {
		want[cp.Base()] = true
	}
	out := slices.Clone(targets)
	add := func(p cuecast.ConfigPath) {
		if p.IsVariant() && want[p.Base()] {
			out = append(out, p)
		}
	}
	for p := range res.Outputs {
		add(p)
	}
	for p := range highWater {
		add(p)
	}
	for _, p := range listed {
		add(p)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// advance moves the cursor to c (and the base too when c compiled).
func (t *Tailer) advance(ctx context.Context, st *State, c *object.Commit, good bool) error {
	st.Cursor, st.From = c.Hash.String(), ""
	if good {
		st.Base = c.Hash.String()
	}
	return t.store.save(ctx, st)
}

// reject records c as rejected in the namespaces bad (nil: as a whole) and
// moves the cursor past it, not the base.
func (t *Tailer) reject(ctx context.Context, st *State, c *object.Commit, errs []compiler.Error, bad []string, sum *Summary) error {
	sum.Rejected++
	rj := Rejected{Commit: c.Hash.String(), Author: author(c), Message: cuecast.CommitSubject(c.Message),
		At: time.Now().UTC(), Namespaces: bad, Errors: errs[:min(len(errs), maxRejectedErrors)], Total: len(errs)}
	st.Rejected = append(st.Rejected, rj)
	if n := len(st.Rejected); n > maxRejected {
		st.Rejected = slices.Clone(st.Rejected[n-maxRejected:])
	}
	first := errs[0]
	if len(bad) > 0 {
		t.log.Error("commit rejected in these namespaces: its changes there do not compile and were not published; its changes elsewhere were",
			"commit", c.Hash.String(), "author", rj.Author, "namespaces", bad, "errors", len(errs), "first", first.Error())
	} else {
		t.log.Error("commit rejected: it does not compile; nothing published from it",
			"commit", c.Hash.String(), "author", rj.Author, "errors", len(errs), "first", first.Error())
	}
	return t.advance(ctx, st, c, false)
}

// index returns the dependency index of commit base's tree, compiling that
// tree in full when the cached index is of another commit (after a restart).
func (t *Tailer) index(ctx context.Context, r *git.Repository, base string) (*compiler.Index, error) {
	if t.idx != nil && t.idxCommit == base {
		return t.idx, nil
	}
	c, err := r.CommitObject(plumbing.NewHash(base))
	if err != nil {
		return nil, fmt.Errorf("read base commit %s: %w", cuecast.ShortCommit(base), err)
	}
	fsys, err := t.cache.FS(r.Storer, c.TreeHash, c.Committer.When)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := compiler.Compile(ctx, t.src.dir, compiler.Options{FS: fsys, Workers: t.cfg.Workers,
		Timeout: t.cfg.Timeout, SharedTimeout: t.cfg.sharedTimeout, Runaways: t.runaways, Logger: t.cfg.Logger})
	if err != nil {
		return nil, fmt.Errorf("index base commit %s: %w", cuecast.ShortCommit(base), err)
	}
	t.idx, t.idxCommit = res.Index, base
	t.log.Info("dependency index built", "commit", base, "configs", len(res.Configs), "elapsed", time.Since(start))
	return t.idx, nil
}

func (t *Tailer) listed(ctx context.Context) ([]cuecast.ConfigPath, error) {
	l, ok := t.pub.(Lister)
	if !ok {
		return nil, nil
	}
	cps, err := l.Configs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list configs: %w", err)
	}
	return cps, nil
}

// publishConfig publishes the next version of cp from out (nil: cp was
// deleted) unless its latest version already says the same. It returns the
// version to deploy (nil: none) and whether this call published it. The
// version number comes from the stream, never from memory: a version that an
// earlier run published for this commit before it crashed is found by Latest
// and returned for deployment, not published again. Before it publishes, a
// number already taken (by the records in st and in the data directory) is
// refused with an *InconsistentError, and the new number is reserved.
func (t *Tailer) publishConfig(ctx context.Context, st *State, meta cuecast.Version, cp cuecast.ConfigPath, out *compiler.Output) (*cuecast.Version, bool, error) {
	for attempt := 1; ; attempt++ {
		latest, err := t.pub.Latest(ctx, cp)
		none := errors.Is(err, cuecast.ErrNotFound)
		if err != nil && !none {
			return nil, false, fmt.Errorf("read latest version of %s: %w", cp, err)
		}
		if !none && latest.Commit == meta.Commit {
			return &latest, false, nil
		}
		if i, ok := t.order[latest.Commit]; ok && i > t.order[meta.Commit] {
			t.log.Debug("the stream already holds a newer version", "config", cp, "version", latest.Version, "commit", latest.Commit)
			return nil, false, nil
		}
		v := meta
		v.Config, v.Version = cp, latest.Version+1
		var content []byte
		switch {
		case out == nil && (none || latest.Deleted):
			return nil, false, nil
		case out == nil:
			v.Deleted = true
			v.Checksum = cuecast.Checksum(nil)
		case !none && !latest.Deleted && latest.Checksum == out.Checksum:
			return nil, false, nil
		default:
			content = out.JSON
			v.Checksum, v.Size = out.Checksum, int64(len(out.JSON))
		}
		v.CompiledAt = time.Now().UTC()
		if err := t.checkNumber(st, v); err != nil {
			return nil, false, err
		}
		err = t.pub.Publish(ctx, v, content)
		if errors.Is(err, cuecast.ErrConflict) && attempt < 3 {
			t.log.Warn("publish lost a race; re-reading the latest version", "config", cp, "version", v.Version, "err", err)
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("publish %s version %d: %w", cp, v.Version, err)
		}
		// The one record of a version, also when a replay after a crash
		// publishes it again (the distributor logs what it stored at debug).
		t.log.Info("published version", "config", cp, "version", v.Version, "commit", v.Commit,
			"checksum", v.Checksum, "size", v.Size, "deleted", v.Deleted)
		if t.afterPublish != nil {
			t.afterPublish(v)
		}
		return &v, true, nil
	}
}

func (t *Tailer) deploy(ctx context.Context, v cuecast.Version) error {
	if t.dep == nil {
		return nil
	}
	if err := t.dep.Deploy(ctx, v); err != nil {
		return fmt.Errorf("deploy %s version %d: %w", v.Config, v.Version, err)
	}
	return nil
}

// versionMeta is the attribution every version from c carries.
func versionMeta(c *object.Commit) cuecast.Version {
	v := cuecast.Version{
		Commit:      c.Hash.String(),
		Author:      author(c),
		CommittedAt: c.Committer.When.UTC(),
		Message:     strings.TrimRight(c.Message, "\n"),
	}
	if len(c.ParentHashes) > 0 {
		v.Parent = c.ParentHashes[0].String()
	}
	return v
}

// maxCarries bounds the commits carried reads back from a good commit:
// while a namespace stays broken every commit's versions are attributed
// again, and an unbounded walk made that quadratic in the stretch.
const maxCarries = 50

// carried attributes the changes of the commits between base, the last good
// commit, and c, a good commit, to the configs they affect by idx, the
// index of c's compile. Those commits were rejected (anything else moves
// base), so c's versions hold their changes as well as c's own; without
// naming them a version credits only whoever fixed the build.
func (t *Tailer) carried(r *git.Repository, base string, c *object.Commit, idx *compiler.Index) (map[cuecast.ConfigPath][]cuecast.CommitRef, error) {
	if base == "" || len(c.ParentHashes) == 0 || c.ParentHashes[0].String() == base {
		return nil, nil
	}
	var between []*object.Commit
	for h := c.ParentHashes[0]; h.String() != base && len(between) < maxCarries; {
		rc, err := r.CommitObject(h)
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", cuecast.ShortCommit(h.String()), err)
		}
		if len(rc.ParentHashes) == 0 {
			// base is not a first-parent ancestor of c: the rejected
			// stretch cannot be told, so none is named.
			t.log.Warn("base commit is not an ancestor of the commit; versions name only the commit", "commit", c.Hash.String(), "base", base)
			return nil, nil
		}
		between = append(between, rc)
		h = rc.ParentHashes[0]
	}
	out := make(map[cuecast.ConfigPath][]cuecast.CommitRef)
	for _, rc := range slices.Backward(between) {
		pc, err := r.CommitObject(rc.ParentHashes[0])
		if err != nil {
			return nil, fmt.Errorf("read commit %s: %w", cuecast.ShortCommit(rc.ParentHashes[0].String()), err)
		}
		changed, err := gitfs.Diff(r.Storer, t.cache, pc.TreeHash, rc.TreeHash)
		if err != nil {
			return nil, fmt.Errorf("diff %s: %w", cuecast.ShortCommit(rc.Hash.String()), err)
		}
		ref := cuecast.CommitRef{Commit: rc.Hash.String(), Author: author(rc), Message: cuecast.CommitSubject(rc.Message)}
		for _, cp := range idx.Affected(changed) {
			out[cp] = append(out[cp], ref)
		}
	}
	return out, nil
}

func author(c *object.Commit) string { return fmt.Sprintf("%s <%s>", c.Author.Name, c.Author.Email) }

// changedFiles lists the paths that differ between the trees of commit base
// and c: modified, added and deleted files, both names of a rename.
func (t *Tailer) changedFiles(r *git.Repository, base string, c *object.Commit) ([]string, error) {
	bc, err := r.CommitObject(plumbing.NewHash(base))
	if err != nil {
		return nil, fmt.Errorf("read base commit %s: %w", cuecast.ShortCommit(base), err)
	}
	changed, err := gitfs.Diff(r.Storer, t.cache, bc.TreeHash, c.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", cuecast.ShortCommit(base), cuecast.ShortCommit(c.Hash.String()), err)
	}
	return changed, nil
}
