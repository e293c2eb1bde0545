package ci

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gitfs"
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
}

// ErrNotRepo is returned by Check when the directory is not a Git
// repository. It is cuecast.ErrNotRepo.
var ErrNotRepo = cuecast.ErrNotRepo

// RevisionError is returned by Check when Base or Head names no commit.
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
// the dependency index of both sides (compiler.Index.Affected); a change to
// the manifest or cue.mod/ affects every config. The base is first planned
// (read, linted and indexed, nothing evaluated: compiler.Options.PlanOnly);
// then both revisions compile only the affected configs, which is also what
// tells an error the change introduced from one the base already had.
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
	log := opts.Logger
	r, err := git.PlainOpen(repoDir)
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return nil, fmt.Errorf("open %s: %w", repoDir, ErrNotRepo)
		}
		return nil, fmt.Errorf("open %s: %w", repoDir, err)
	}
	baseC, err := resolve(r, "base", opts.Base)
	if err != nil {
		return nil, err
	}
	headC, err := resolve(r, "head", opts.Head)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Base: Revision{Rev: opts.Base, Commit: baseC.Hash.String()},
		Head: Revision{Rev: opts.Head, Commit: headC.Hash.String()},
	}
	if bases, err := baseC.MergeBase(headC); err != nil {
		return nil, fmt.Errorf("find merge base of %s and %s: %w", opts.Base, opts.Head, err)
	} else if len(bases) > 0 && bases[0].Hash != baseC.Hash {
		baseC = bases[0]
		rep.MergeBase = baseC.Hash.String()
	}
	// One object cache for the whole check: the two trees share almost
	// every object, and the base is read twice (planned, then compiled).
	cache := gitfs.NewCache(checkCacheObjects)
	changed, err := changedFiles(r, cache, baseC, headC)
	if err != nil {
		return nil, err
	}
	rep.ChangedFiles = changed

	start := time.Now()
	base, err := compileAt(ctx, r, cache, repoDir, baseC, nil, true, opts)
	if err != nil {
		return nil, err
	}
	log.Debug("base planned", "commit", baseC.Hash.String(), "configs", len(base.Configs), "elapsed", time.Since(start))

	var targets []cuecast.ConfigPath
	everything := touchesAll(changed) || base.Manifest == nil
	switch {
	case len(changed) == 0:
		// Nothing differs: nothing to compile at head.
	case everything:
		targets = nil // all of them
	default:
		targets = base.Index.Affected(changed)
	}
	var head *compiler.Result
	switch {
	case len(changed) == 0:
		head = &compiler.Result{Manifest: base.Manifest, Configs: base.Configs, Outputs: map[cuecast.ConfigPath]compiler.Output{}, Index: base.Index}
	case !everything && len(targets) == 0:
		// No config's output can change, but the change can still break
		// the repo where compile looks and no config does (a symlinked
		// directory, a file lint): plan the head, which reads and lints
		// every file the way compile does and evaluates nothing.
		head, err = compileAt(ctx, r, cache, repoDir, headC, nil, true, opts)
		if err != nil {
			return nil, err
		}
		if head.Manifest == nil {
			head.Manifest = base.Manifest
		}
	default:
		start = time.Now()
		head, err = compileAt(ctx, r, cache, repoDir, headC, targets, false, opts)
		if err != nil {
			return nil, err
		}
		if everything {
			targets = union(base.Configs, head.Configs)
		} else if head.Index != nil {
			// The head's side of the index: a change can reach a config
			// through a dependency only the head has.
			merged := base.Index.Merge(head.Index, head.Configs)
			if extra := without(merged.Affected(changed), targets); len(extra) > 0 {
				more, err := compileAt(ctx, r, cache, repoDir, headC, extra, false, opts)
				if err != nil {
					return nil, err
				}
				mergeResults(head, more)
				targets = union(targets, extra)
			}
		}
		log.Debug("head compiled", "commit", headC.Hash.String(), "configs", len(targets), "elapsed", time.Since(start))
	}
	if base.Manifest != nil && (everything || len(targets) > 0) {
		// Now the base's side of exactly those configs; its plan's index,
		// which covers every config, stays the base's index.
		start = time.Now()
		var only []cuecast.ConfigPath
		if !everything {
			only = targets
		}
		compiled, err := compileAt(ctx, r, cache, repoDir, baseC, only, false, opts)
		if err != nil {
			return nil, err
		}
		compiled.Index = base.Index
		base = compiled
		log.Debug("base compiled", "commit", baseC.Hash.String(), "configs", len(only), "elapsed", time.Since(start))
	}
	rep.Everything = everything && len(changed) > 0
	if err := rep.build(base, head, targets); err != nil {
		return nil, err
	}
	rep.libraries(base, head, changed, opts.FanOut)
	rep.Undeclared = undeclared(changed, base, head)
	return rep, nil
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
	r, err := git.PlainOpen(repoDir)
	if err != nil {
		if errors.Is(err, git.ErrRepositoryNotExists) {
			return "", fmt.Errorf("open %s: %w", repoDir, ErrNotRepo)
		}
		return "", fmt.Errorf("open %s: %w", repoDir, err)
	}
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
func compileAt(ctx context.Context, r *git.Repository, cache *gitfs.Cache, repoDir string, c *object.Commit, configs []cuecast.ConfigPath, planOnly bool, opts Options) (*compiler.Result, error) {
	fsys, err := cache.FS(r.Storer, c.TreeHash, c.Committer.When)
	if err != nil {
		return nil, fmt.Errorf("read tree of %s: %w", cuecast.ShortCommit(c.Hash.String()), err)
	}
	res, err := compiler.Compile(ctx, repoDir, compiler.Options{
		Configs: configs, FS: fsys, Workers: opts.Workers, Timeout: opts.Timeout, Logger: opts.Logger, PlanOnly: planOnly,
	})
	if errors.Is(err, compiler.ErrNoModule) {
		return &compiler.Result{
			Outputs: map[cuecast.ConfigPath]compiler.Output{},
			Errors: []compiler.Error{{File: "cue.mod/module.cue", Line: 1, Column: 1, ID: "manifest/no-module",
				Message: "the commit has no cue.mod/module.cue", Fix: "a config repo is a CUE module: add cue.mod/module.cue"}},
		}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("compile %s: %w", cuecast.ShortCommit(c.Hash.String()), err)
	}
	return res, nil
}

// mergeResults adds more's outputs and errors to res; both are compiles of
// the same tree.
func mergeResults(res, more *compiler.Result) {
	for cp, o := range more.Outputs {
		res.Outputs[cp] = o
	}
	for _, e := range more.Errors {
		if !slices.Contains(res.Errors, e) {
			res.Errors = append(res.Errors, e)
		}
	}
	if res.Index != nil && more.Index != nil {
		res.Index = res.Index.Merge(more.Index, res.Configs)
	}
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

// touchesAll reports a change that can alter every config: the module or the
// manifest (any .cue file in the repo root).
func touchesAll(changed []string) bool {
	for _, f := range changed {
		if isGlobal(f) {
			return true
		}
	}
	return false
}

func isGlobal(f string) bool {
	return f == "cue.mod" || strings.HasPrefix(f, "cue.mod/") || (path.Dir(f) == "." && strings.HasSuffix(f, ".cue"))
}

func union(a, b []cuecast.ConfigPath) []cuecast.ConfigPath {
	out := slices.Concat(a, b)
	slices.Sort(out)
	return slices.Compact(out)
}

func without(a, b []cuecast.ConfigPath) []cuecast.ConfigPath {
	var out []cuecast.ConfigPath
	for _, x := range a {
		if !slices.Contains(b, x) {
			out = append(out, x)
		}
	}
	return out
}
