package ci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage/filesystem"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/gitfs"
)

// DefaultFanOut is how many compiled outputs one library change must alter
// before the risk summary calls it wide.
const DefaultFanOut = 5

// Options tune a check. Base and Head are required.
type Options struct {
	// Base and Head are the revisions to compare: hashes, branches, tags or
	// anything go-git resolves ("main~1"). When Base is not an ancestor of
	// Head the check compares against their merge base, as `git diff
	// base...head` does, so a branch that is behind is not blamed for what
	// landed on Base since.
	Base, Head string
	// FanOut is the wide-library threshold; default DefaultFanOut.
	FanOut int
	// Workers and Timeout are passed to the compiler.
	Workers int
	Timeout time.Duration
	// Logger receives progress and debug logs; default discards.
	Logger *slog.Logger
	// Explain sets Report.Origins (see Origins) over the head tree the
	// check read. The report stands without them: a failure to explain
	// is logged as a warning, not returned.
	Explain bool
}

// ErrNotRepo is returned by Check when the directory is not a Git
// repository. It is cuecast.ErrNotRepo.
var ErrNotRepo = cuecast.ErrNotRepo

// ErrShallow is wrapped by the RevisionError Check returns when the
// repository holds Base and Head but not the history between them, so
// their merge base cannot be found: a shallow clone (actions/checkout's
// default fetch-depth: 1) or one fetched short of the merge base.
var ErrShallow = errors.New("the history between the revisions is not fetched (a shallow clone?)")

// RevisionError is returned by Check when Base or Head names no commit, or
// when the history between them is missing (it wraps ErrShallow then).
type RevisionError struct {
	Which string // "base" or "head"
	Rev   string
	Err   error
}

func (e *RevisionError) Error() string {
	return fmt.Sprintf("%s revision %q: %v", e.Which, e.Rev, e.Err)
}

func (e *RevisionError) Unwrap() error { return e.Err }

// Check compiles the configs that the change from opts.Base to opts.Head
// affects, at both revisions, straight from the Git objects of the repository
// at repoDir (its work tree is neither read nor touched), and reports what the
// change does to each config's compiled output.
//
// Which configs: the files that differ between the two trees, mapped through
// the base's dependency index (compiler.Index.Affected), which finds every
// config the head's would too; a change to the manifest or cue.mod/ affects
// every config (compiler.AffectsAll). The base is first planned (read,
// linted and indexed, nothing evaluated: compiler.Options.PlanOnly), its
// objects read on every core meanwhile (gitfs.Objects, Cache.Prefetch);
// then both revisions compile only the affected configs, at once, which is
// also what tells an error the change introduced from one the base already
// had. The configs holding the changed .cue files are compiled at both
// revisions while the plan runs, and those compiles are used when the plan
// names exactly them (guessTargets).
//
// The error is non-nil only when the check could not run: ErrNotRepo, a
// *RevisionError, an unreadable object store, or ctx's error. Invalid configs
// are reported in the Report (see Report.Failed).
func Check(ctx context.Context, repoDir string, opts Options) (*Report, error) {
	if opts.FanOut <= 0 {
		opts.FanOut = DefaultFanOut
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r, objs, closeRepo, err := openRepo(repoDir)
	if err != nil {
		return nil, err
	}
	defer closeRepo()
	baseC, headC, rep, err := revisions(r, opts)
	if err != nil {
		return nil, err
	}
	// One object cache for the whole check, and one file system per
	// commit (commitTrees): the two trees share almost every object, and
	// the base is read twice (planned, then compiled).
	cache := gitfs.NewCache(checkCacheObjects)
	k := &checkRun{trees: &commitTrees{s: r.Storer, cache: cache, byRev: make(map[plumbing.Hash]*gitfs.FS)}, repoDir: repoDir, opts: opts}
	changed, err := changedFiles(r, cache, baseC, headC)
	if err != nil {
		return nil, err
	}
	rep.ChangedFiles = changed

	start := time.Now()
	if objs != nil && objs.Packs() > 0 {
		// Guess the targets from the changed files alone and compile
		// them at both revisions while the plan runs, on the core the
		// plan's serial part leaves idle; a wrong guess is dropped.
		// (Not over loose objects: read one at a time through go-git,
		// the trees both walk at once would be read twice.)
		stopGuesses := k.guess(ctx, guessTargets(changed), baseC, headC)
		defer stopGuesses()
	}
	stopPrefetch := k.prefetch(ctx, objs, baseC)
	base, err := k.compile(ctx, baseC, nil, true)
	stopPrefetch()
	if err != nil {
		return nil, err
	}
	opts.Logger.Debug("base planned", "commit", baseC.Hash.String(), "configs", len(base.Configs), "elapsed", time.Since(start))
	everything := slices.ContainsFunc(changed, compiler.AffectsAll) || base.Manifest == nil
	var targets []cuecast.ConfigPath // nil: all of them
	if len(changed) > 0 && !everything {
		targets = base.Index.Affected(changed)
	}
	// The two sides need nothing from each other: compile them at once
	// (on two cores) when the object store can be read concurrently,
	// unless each is a whole compile, which uses every core already.
	var head, compiled *compiler.Result
	var headErr, baseErr error
	compileBase := base.Manifest != nil && len(changed) > 0 && (everything || len(targets) > 0)
	both := func(headSide, baseSide func()) {
		if !compileBase {
			headSide()
			return
		}
		if objs == nil || everything {
			headSide()
			baseSide()
			return
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			baseSide()
		}()
		headSide()
		<-done
	}
	both(func() { head, headErr = k.headSide(ctx, headC, base, changed, targets, everything) },
		func() { compiled, baseErr = k.baseSide(ctx, baseC, base, targets, everything) })
	if err := errors.Join(headErr, baseErr); err != nil {
		return nil, err
	}
	if compileBase {
		base = compiled
	}
	if everything && len(changed) > 0 {
		targets = union(base.Configs, head.Configs)
	}
	rep.Everything = everything && len(changed) > 0
	if err := rep.build(base, head, targets); err != nil {
		return nil, err
	}
	rep.libraries(base, head, changed, opts.FanOut)
	rep.Undeclared = undeclared(changed, base, head)
	if mayChangeBindings(changed, rep.Everything, base.Manifest, head.Manifest) {
		if err := k.bindings(ctx, baseC, headC, rep); err != nil {
			return nil, err
		}
	}
	if opts.Explain {
		if err := k.explain(ctx, headC, rep); err != nil {
			opts.Logger.Warn("could not explain the changed values", "err", err)
		}
	}
	return rep, nil
}

// explain sets rep.Origins over head's tree, the one the check compiled.
func (k *checkRun) explain(ctx context.Context, head *object.Commit, rep *Report) error {
	fsys, err := k.trees.fs(head)
	if err != nil {
		return fmt.Errorf("explain changes: %w", err)
	}
	o, err := origins(ctx, k.repoDir, fsys, rep)
	if err != nil {
		return err
	}
	rep.Origins = o
	return nil
}

// openRepo opens the repository at repoDir (ErrNotRepo when there is
// none) for one check: its packfiles stay open until close (go-git
// otherwise opens the pack again for every object it reads), and objects
// over compiler.MaxFileSize are not read into memory when looked up, so the
// compiler can refuse them unread.
func openRepo(repoDir string) (*git.Repository, *gitfs.Objects, func(), error) {
	r, err := gitfs.Open(repoDir)
	if err != nil {
		return nil, nil, nil, err
	}
	st, ok := r.Storer.(*filesystem.Storage)
	if !ok {
		return r, nil, func() {}, nil
	}
	kept := filesystem.NewStorageWithOptions(st.Filesystem(), cache.NewObjectLRUDefault(), filesystem.Options{
		KeepDescriptors: true, LargeObjectThreshold: compiler.MaxFileSize,
	})
	objs, err := gitfs.OpenObjects(st.Filesystem(), kept, compiler.MaxFileSize)
	if err != nil {
		_ = kept.Close()
		return nil, nil, nil, fmt.Errorf("open %s: %w", repoDir, err)
	}
	r, err = git.Open(&readStorage{Storage: kept, objs: objs}, nil)
	if err != nil {
		_ = objs.Close()
		_ = kept.Close()
		return nil, nil, nil, fmt.Errorf("open %s: %w", repoDir, err)
	}
	return r, objs, func() { _ = objs.Close(); _ = kept.Close() }, nil
}

// prefetched is what the check reads of the base's tree before planning
// it: the directories the compiler walks (not those CUE ignores) and the
// files it reads (.cue files CUE does not ignore, and cue.mod/).
func prefetched(p string, dir bool) bool {
	name := path.Base(p)
	if dir {
		return !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_")
	}
	return strings.HasPrefix(p, "cue.mod/") ||
		strings.HasSuffix(name, ".cue") && !strings.HasPrefix(name, ".") && !strings.HasPrefix(name, "_")
}

// readStorage is a repository's storage whose object reads go through
// gitfs.Objects, which reads packfiles without a lock, so the check's
// reads can run on several goroutines.
type readStorage struct {
	*filesystem.Storage
	objs *gitfs.Objects
}

func (s *readStorage) EncodedObject(t plumbing.ObjectType, h plumbing.Hash) (plumbing.EncodedObject, error) {
	return s.objs.EncodedObject(t, h)
}

func (s *readStorage) EncodedObjectSize(h plumbing.Hash) (int64, error) {
	return s.objs.EncodedObjectSize(h)
}

func (s *readStorage) HasEncodedObject(h plumbing.Hash) error { return s.objs.HasEncodedObject(h) }

// revisions resolves opts.Base and opts.Head and starts the report. The
// base returned is their merge base when Base is not an ancestor of Head
// (Report.MergeBase says so).
func revisions(r *git.Repository, opts Options) (base, head *object.Commit, rep *Report, err error) {
	if base, err = resolve(r, "base", opts.Base); err != nil {
		return nil, nil, nil, err
	}
	if head, err = resolve(r, "head", opts.Head); err != nil {
		return nil, nil, nil, err
	}
	rep = &Report{
		Base: Revision{Rev: opts.Base, Commit: base.Hash.String()},
		Head: Revision{Rev: opts.Head, Commit: head.Hash.String()},
	}
	bases, err := base.MergeBase(head)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		// Both tips resolved, so a commit below them is missing: the
		// clone stops short of their merge base.
		return nil, nil, nil, &RevisionError{Which: "base", Rev: opts.Base,
			Err: fmt.Errorf("find merge base with %s: %w: %w", opts.Head, ErrShallow, err)}
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("find merge base of %s and %s: %w", opts.Base, opts.Head, err)
	}
	if len(bases) > 0 && bases[0].Hash != base.Hash {
		base = bases[0]
		rep.MergeBase = base.Hash.String()
	}
	return base, head, rep, nil
}

// checkRun is what one Check's compiles share: a file system per commit
// over one object cache, and the options.
type checkRun struct {
	trees   *commitTrees
	repoDir string
	opts    Options
	// guesses are the compiles started before the plan, by commit.
	guesses map[plumbing.Hash]*guessed
}

// prefetch starts reading the base's tree into the cache on every core,
// while the plan, which reads it one object at a time, starts from the
// other end (Cache.Prefetch reads the last entries of a directory first,
// the walk the first), and returns the function that stops it once the
// plan is done. An error is only logged: the plan reads what it needs
// and reports what it cannot.
func (k *checkRun) prefetch(ctx context.Context, objs *gitfs.Objects, c *object.Commit) (stop func()) {
	if objs == nil || objs.Packs() == 0 {
		// Loose objects are read through go-git one at a time: a
		// prefetch would only read some of them twice.
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	start := time.Now()
	// One core is the plan's.
	go func() { done <- k.trees.cache.Prefetch(ctx, objs, c.TreeHash, max(k.workers()-1, 1), prefetched) }()
	return func() {
		cancel()
		err := <-done
		if err != nil && !errors.Is(err, context.Canceled) {
			k.opts.Logger.Debug("prefetch failed", "commit", c.Hash.String(), "err", err)
		}
		k.opts.Logger.Debug("prefetch stopped", "commit", c.Hash.String(), "elapsed", time.Since(start))
	}
}

// workers is how many goroutines read or compile at once.
func (k *checkRun) workers() int {
	if k.opts.Workers > 0 {
		return k.opts.Workers
	}
	return runtime.NumCPU()
}

func (k *checkRun) compile(ctx context.Context, c *object.Commit, configs []cuecast.ConfigPath, planOnly bool) (*compiler.Result, error) {
	if g := k.guesses[c.Hash]; g != nil && !planOnly && len(configs) > 0 && slices.Equal(g.configs, configs) {
		if g.wait(); g.err == nil {
			return g.res, nil
		}
	}
	return compileAt(ctx, k.trees, k.repoDir, c, configs, planOnly, k.opts)
}

// guessed is a compile started before the plan said which configs to
// compile: it is used only when the plan names exactly its configs.
type guessed struct {
	configs []cuecast.ConfigPath
	done    chan struct{}
	res     *compiler.Result
	err     error
}

func (g *guessed) wait() { <-g.done }

// guess starts compiling configs at each commit, and returns the function
// that stops and waits for what is still running. Nothing is guessed when
// configs is empty.
func (k *checkRun) guess(ctx context.Context, configs []cuecast.ConfigPath, commits ...*object.Commit) (stop func()) {
	if len(configs) == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	k.guesses = make(map[plumbing.Hash]*guessed)
	for _, c := range commits {
		g := &guessed{configs: configs, done: make(chan struct{})}
		k.guesses[c.Hash] = g
		go func() {
			defer close(g.done)
			g.res, g.err = compileAt(ctx, k.trees, k.repoDir, c, configs, false, k.opts)
		}()
	}
	return func() {
		cancel()
		for _, g := range k.guesses {
			g.wait()
		}
	}
}

// guessTargets is what Index.Affected most often answers for a change,
// known without the plan: the directories of the changed .cue files, as
// configs. It is right when each is a config that no other config
// imports or lies below, as for most edits of a config; otherwise the
// plan's targets differ and the guess is not used. Nothing is guessed for
// a change that may affect every config, or for more than a few configs.
func guessTargets(changed []string) []cuecast.ConfigPath {
	var out []cuecast.ConfigPath
	for _, f := range changed {
		if compiler.AffectsAll(f) || !strings.HasSuffix(f, ".cue") {
			return nil
		}
		cp := cuecast.ConfigPath(path.Dir(f))
		if cp.Validate() != nil || strings.HasPrefix(path.Base(f), "_") || strings.HasPrefix(path.Base(f), ".") {
			return nil
		}
		out = append(out, cp)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) > maxGuessed {
		return nil
	}
	return out
}

// maxGuessed bounds the configs compiled on a guess.
const maxGuessed = 4

// headSide compiles the head's side of the change: the targets, the
// configs the change affects (every one when everything). Nothing
// differs: nothing to compile. No config's output can change: the head is
// only planned, because the change can still break the repo where compile
// looks and no config does (a symlinked directory, a file lint); planning
// reads and lints every file the way compile does and evaluates nothing.
// The base's index alone finds every affected config: a config that
// reaches a changed file only through the head's imports reaches it along
// a path whose first changed file is itself changed and reached the same
// way at the base (TestCheckPlansWhatFullPlansDo holds this to full plans
// of both).
func (k *checkRun) headSide(ctx context.Context, headC *object.Commit, base *compiler.Result, changed []string, targets []cuecast.ConfigPath, everything bool) (*compiler.Result, error) {
	if len(changed) == 0 {
		return &compiler.Result{Manifest: base.Manifest, Configs: base.Configs, Outputs: map[cuecast.ConfigPath]compiler.Output{}, Index: base.Index}, nil
	}
	if !everything && len(targets) == 0 {
		head, err := k.compile(ctx, headC, nil, true)
		if err != nil {
			return nil, err
		}
		if head.Manifest == nil {
			head.Manifest = base.Manifest
		}
		return head, nil
	}
	start := time.Now()
	var only []cuecast.ConfigPath
	if !everything {
		only = targets
	}
	head, err := k.compile(ctx, headC, only, false)
	if err != nil {
		return nil, err
	}
	k.opts.Logger.Debug("head compiled", "commit", headC.Hash.String(), "configs", len(only), "elapsed", time.Since(start))
	return head, nil
}

// baseSide compiles the base's side of exactly the targets (every config
// when everything); plan's index, which covers every config, stays the
// base's index.
func (k *checkRun) baseSide(ctx context.Context, baseC *object.Commit, plan *compiler.Result, targets []cuecast.ConfigPath, everything bool) (*compiler.Result, error) {
	start := time.Now()
	var only []cuecast.ConfigPath
	if !everything {
		only = targets
	}
	compiled, err := k.compile(ctx, baseC, only, false)
	if err != nil {
		return nil, err
	}
	compiled.Index = plan.Index
	k.opts.Logger.Debug("base compiled", "commit", baseC.Hash.String(), "configs", len(only), "elapsed", time.Since(start))
	return compiled, nil
}

// undeclared lists the top-level directories of changed .cue files that are
// no namespace at either revision and that no config depends on at either
// (the same test as compiler.Result.Undeclared): the compiler treats them
// as libraries nobody imports, so nothing there is compiled.
func undeclared(changed []string, base, head *compiler.Result) []string {
	var out []string
	for _, f := range changed {
		top, _, nested := strings.Cut(f, "/")
		if !nested || top == "cue.mod" || !strings.HasSuffix(f, ".cue") || strings.HasPrefix(path.Base(f), "_") ||
			strings.HasPrefix(top, "_") || strings.HasPrefix(top, ".") {
			continue
		}
		declared, used := false, false
		for _, res := range []*compiler.Result{base, head} {
			if res.Manifest != nil {
				_, ok := res.Manifest.Namespaces[top]
				declared = declared || ok
			}
			if res.Index != nil {
				used = used || res.Index.Uses(top)
			}
		}
		if !declared && !used {
			out = append(out, top)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ResolveCommit returns the full hash of the commit rev names in the
// repository at repoDir, for attaching a check run to it before the check
// has run. It returns ErrNotRepo or a *RevisionError (Which "head").
func ResolveCommit(repoDir, rev string) (string, error) {
	r, _, closeRepo, err := openRepo(repoDir)
	if err != nil {
		return "", err
	}
	defer closeRepo()
	c, err := resolve(r, "head", rev)
	if err != nil {
		return "", err
	}
	return c.Hash.String(), nil
}

func resolve(r *git.Repository, which, rev string) (*object.Commit, error) {
	if rev == "" {
		return nil, &RevisionError{Which: which, Rev: rev, Err: errors.New("empty")}
	}
	h, err := r.ResolveRevision(plumbing.Revision(rev))
	if err != nil {
		return nil, &RevisionError{Which: which, Rev: rev, Err: err}
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return nil, &RevisionError{Which: which, Rev: rev, Err: err}
	}
	return c, nil
}

// compileAt compiles commit c's tree from the object store. A tree without
// cue.mod/module.cue compiles to an empty result at the base and to an error
// at the head (the caller decides by looking at Manifest).
func compileAt(ctx context.Context, trees *commitTrees, repoDir string, c *object.Commit, configs []cuecast.ConfigPath, planOnly bool, opts Options) (*compiler.Result, error) {
	fsys, err := trees.fs(c)
	if err != nil {
		return nil, err
	}
	res, err := compiler.Compile(ctx, repoDir, compiler.Options{
		Configs: configs, FS: fsys, Workers: opts.Workers, Timeout: opts.Timeout, Logger: opts.Logger, PlanOnly: planOnly,
	})
	if errors.Is(err, compiler.ErrNoModule) {
		return &compiler.Result{
			Outputs: map[cuecast.ConfigPath]compiler.Output{},
			Errors:  []compiler.Error{compiler.NoModuleError()},
		}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", cuecast.ShortCommit(c.Hash.String()), err)
	}
	return res, nil
}

// commitTrees hands out one file system per commit, so the compiles of a
// commit in one check share its decoded trees and directory listings, and
// one object cache across commits, which share most objects. It is safe
// for concurrent use.
type commitTrees struct {
	s     storer.EncodedObjectStorer
	cache *gitfs.Cache
	mu    sync.Mutex
	byRev map[plumbing.Hash]*gitfs.FS
}

func (t *commitTrees) fs(c *object.Commit) (*gitfs.FS, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if fsys, ok := t.byRev[c.Hash]; ok {
		return fsys, nil
	}
	fsys, err := t.cache.FS(t.s, c.TreeHash, c.Committer.When)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", cuecast.ShortCommit(c.Hash.String()), err)
	}
	t.byRev[c.Hash] = fsys
	return fsys, nil
}

// checkCacheObjects bounds the objects (trees, and blobs up to 64 KiB) a
// check keeps decoded: enough for both revisions of a repo of ~5,000
// configs; a bigger repo only reads some objects twice.
const checkCacheObjects = 16384

// changedFiles lists the paths that differ between the trees of base and
// head: modified, added and deleted files, both names of a rename. Subtrees
// with equal hashes are not read.
func changedFiles(r *git.Repository, cache *gitfs.Cache, base, head *object.Commit) ([]string, error) {
	out, err := gitfs.Diff(r.Storer, cache, base.TreeHash, head.TreeHash)
	if err != nil {
		return nil, fmt.Errorf("diff %s..%s: %w", cuecast.ShortCommit(base.Hash.String()), cuecast.ShortCommit(head.Hash.String()), err)
	}
	return out, nil
}

func union(a, b []cuecast.ConfigPath) []cuecast.ConfigPath {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}
