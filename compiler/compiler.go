package compiler

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"

	"github.com/cuecast/cuecast"
)

// DefaultTimeout bounds the evaluation of one config.
const DefaultTimeout = 30 * time.Second

// shared is the limit of the evaluations every config depends on: the
// module path, the manifest and the namespaces' schema packages.
func (o Options) shared() time.Duration {
	if o.SharedTimeout > 0 {
		return o.SharedTimeout
	}
	return o.Timeout
}

// withDefaults fills the zero fields that have a default.
func (o Options) withDefaults() Options {
	if o.Workers <= 0 {
		o.Workers = runtime.NumCPU()
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Runaways == nil {
		o.Runaways = NewRunaways(0)
	}
	return o
}

// Options tune a compile. The zero value compiles every config of the repo on
// disk with one worker per CPU.
type Options struct {
	// Configs restricts the compile to these configs; only they and the
	// packages they import are read and loaded. Empty means every config.
	// A config is compiled with all its variants; a variant path stands
	// for its config (its Base).
	// A named config that does not exist is absent from Result.Configs,
	// which is how a caller learns it was deleted.
	Configs []cuecast.ConfigPath
	// FS, when set, is the repo (rooted at the repo root) and the disk is
	// not read; repoDir then only labels log lines. The tailer and the PR
	// check pass a file system over a Git tree. It is read from up to
	// Workers goroutines at once, so it must be safe for concurrent use
	// (os.Root's, gitfs's and fstest.MapFS are).
	FS fs.FS
	// Workers is how many goroutines load and evaluate configs at once,
	// each a batch at a time with its own CUE context; default
	// runtime.NumCPU(). The Result does not depend on it.
	Workers int
	// Timeout bounds each config's evaluation; default DefaultTimeout.
	Timeout time.Duration
	// Runaways accounts for the evaluations abandoned at Timeout and
	// refuses evaluations that would let them pile up (see Runaways). A
	// caller that compiles again and again passes the same one each time;
	// nil gives each Compile its own.
	Runaways *Runaways
	// Logger receives debug and progress logs; default discards.
	Logger *slog.Logger
	// Progress, when set, is called from one goroutine as configs finish;
	// done and total count evaluations, so a config with variants counts
	// once per variant.
	Progress func(done, total int)
	// PlanOnly reads and lints the files, evaluates the manifest and builds
	// the dependency index, but evaluates no config: Outputs is empty and
	// Errors holds only what reading, the file lints and the manifest
	// found. It answers "which configs does this change touch?" for the cost
	// of parsing; the PR check plans the base revision this way and then
	// compiles only the affected configs there.
	PlanOnly bool
	// ManifestOnly reads, lints and evaluates the manifest (cuecast.cue)
	// and the module, and nothing else: Result.Manifest and the errors
	// found on the way; no config is discovered or read, so Configs and
	// Outputs are empty. serve resolves a version's rollout policy this
	// way from the manifest of the version's commit.
	ManifestOnly bool

	// SharedTimeout, when set, bounds what every config of the compile
	// needs (module path, manifest, schema packages) instead of Timeout:
	// a tight limit meant for the configs then cannot, on a loaded
	// machine, reject the whole commit at its manifest.
	SharedTimeout time.Duration
	// forceUnify turns off the wrapper packages (wrapConfig), so tests can
	// check that both ways of applying a namespace schema agree.
	forceUnify bool
	// onBatchLoad, when set, is told how many files the loader is offered
	// for each batch of configs, so a test can check that it does not
	// grow with the repo.
	onBatchLoad func(files int)
}

// Result is what a compile found. Invalid configs are reported in Errors and
// have no entry in Outputs.
type Result struct {
	Manifest *Manifest
	// Configs is every config found in the repo, sorted, whether or not it
	// was compiled.
	Configs []cuecast.ConfigPath
	// Outputs holds the compiled configs that are valid, keyed by the path
	// to publish each at: a config that uses no dimension at its own path;
	// a config that uses dimensions at one variant path per combination
	// (payments/checkout/env=prod), and at its own path its variant index
	// (VariantIndex), present only when every variant compiled.
	Outputs map[cuecast.ConfigPath]Output
	// Errors is sorted by file, line and column.
	Errors []Error
	// Index maps files to the configs they affect (base paths, never
	// variants: a change recompiles every variant of a config). After a compile limited
	// by Options.Configs it covers only those configs; see Index.Merge.
	Index *Index
	// Undeclared lists top-level directories that hold CUE packages but
	// are neither a namespace nor imported by any config: a namespace
	// someone forgot to declare looks like this, its configs never
	// compiled. Not an error, because an unused library looks the same.
	// Only a full compile (no Options.Configs) fills it.
	Undeclared []string
}

// OK reports whether the compile found no errors.
func (r *Result) OK() bool { return len(r.Errors) == 0 }

// Output is one compiled config.
type Output struct {
	// JSON is the canonical form: sorted keys, no HTML escaping, numbers
	// as CUE wrote them.
	JSON []byte
	// Checksum is cuecast.Checksum(JSON).
	Checksum string
	// Files are the repo-relative .cue files the output was built from,
	// sorted, including imported packages.
	Files []string
	// Tags are the build tags a variant was loaded with, sorted: the
	// values of its dimensions that some file of the config reads, in the
	// shorthand form (`cue export -t prod -t eu` reproduces the output);
	// nil for a config without variants and for a variant index.
	Tags []string
}

// Manifest is the repo's cuecast.cue after validation.
type Manifest struct {
	Namespaces map[string]Namespace
	// metricPos is where the manifest writes its analysis metrics'
	// fields (MetricPosition).
	metricPos map[metricField]Error
}

// Namespace is one team's directory of configs.
type Namespace struct {
	Name   string
	Owners []string
	// Schema is "<import path>#<Definition>"; empty when none is enforced.
	Schema string
	// Consistency is cuecast.Relaxed (the default) or cuecast.Strict.
	Consistency cuecast.Consistency
	Policy      cuecast.Policy
	// MaxSize caps one compiled config, in bytes.
	MaxSize int64
	// Configs overrides Policy or Consistency for single configs, keyed by
	// the path below the namespace ("checkout"); nil when none does.
	Configs map[string]ConfigOverride
	// ImportConfigsFrom are the other namespaces whose configs this
	// namespace's configs may import (import_configs_from); importing a
	// config of any other is config/cross-namespace-import.
	ImportConfigsFrom []string
	// Dimensions are the axes the namespace's configs may vary along and
	// their values (dimensions:), e.g. env: [staging, prod]; nil when none
	// (docs/VARIANTS.md). No value is in two dimensions.
	Dimensions map[string][]string
	// Combinations, when not nil, are the only valid combinations of
	// dimension values, each naming a value of every dimension
	// (combinations:); nil means every combination is valid.
	Combinations []map[string]string
	// Changes is what the mutator may change in the namespace's configs
	// (changes:); the zero value allows every path, landing as a commit.
	Changes ChangePolicy
}

// ChangePolicy is a namespace's changes: entry (docs/CHANGING.md): which
// paths `cuecast set` and the HTTP API may set, and whether a change may
// land as a commit or only as a pull request. The mutator enforces it.
type ChangePolicy struct {
	// Paths are patterns of CUE paths (* for one element, a final ... for
	// anything below); empty allows every path.
	Paths []string `json:"paths,omitempty"`
	// Land is "commit" (the default when empty) or "pr".
	Land string `json:"land,omitempty"`
}

// DimensionOf returns the dimension that lists value. It is the one place
// a value is looked up: @if(prod) names a value, not its dimension, so the
// manifest lets a value be in one dimension only (manifest/dimensions),
// and for a manifest that breaks that rule the first dimension by name
// owns it.
func (ns Namespace) DimensionOf(value string) (dim string, ok bool) {
	for d, vals := range ns.Dimensions {
		if (!ok || d < dim) && slices.Contains(vals, value) {
			dim, ok = d, true
		}
	}
	return dim, ok
}

// ConfigOverride is one config's own rollout policy or consistency class;
// a zero field keeps the namespace's.
type ConfigOverride struct {
	Consistency cuecast.Consistency
	Policy      cuecast.Policy
}

// Compile loads the CUE module at repoDir (or opts.FS), validates its
// manifest and compiles its configs to canonical JSON.
//
// The error is non-nil only when cuecast could not do its job: the repo
// cannot be read, it has no cue.mod/module.cue (ErrNoModule), ctx was
// cancelled (wrapping ctx.Err()), or the CUE loader panicked ("internal
// error"). Invalid CUE, manifests and lint findings are reported in
// Result.Errors.
//
// A config whose evaluation exceeds opts.Timeout is reported as an error
// with ID config/timeout. CUE cannot interrupt an evaluation, so the
// goroutine running it is abandoned and finishes in the background; the
// worker moves on, which keeps one runaway config from stalling the rest.
// opts.Runaways keeps those goroutines from piling up: a config is
// refused, also as config/timeout, while its own abandoned evaluation
// runs, while the limit of abandoned evaluations runs, or when nothing it
// reads changed since it timed out.
func Compile(ctx context.Context, repoDir string, opts Options) (res *Result, err error) {
	// A panic in the CUE loader or evaluator is a bug, but one bad commit
	// must not take down a long-running server: report it as a failure to
	// run. (Config evaluations recover on their own goroutines.)
	defer func() {
		if p := recover(); p != nil {
			res, err = nil, fmt.Errorf("compile %s: internal error: %v", repoDir, p)
		}
	}()
	opts = opts.withDefaults()
	start := time.Now()
	c, done, err := startCompilation(ctx, repoDir, "compile", opts, nil)
	if err != nil {
		return nil, err
	}
	defer done()
	if err := c.run(ctx); err != nil {
		return nil, err
	}
	// A file lint inside a config's directory belongs to that config.
	for i, e := range c.errs {
		if e.Config == "" && strings.HasPrefix(e.ID, "file/") {
			if _, found := slices.BinarySearch(c.res.Configs, cuecast.ConfigPath(path.Dir(e.File))); found {
				c.errs[i].Config = cuecast.ConfigPath(path.Dir(e.File))
			}
		}
	}
	c.res.Errors = sortErrors(c.errs)
	opts.Logger.Debug("compiled", "repo", repoDir, "configs", len(c.res.Outputs),
		"errors", len(c.res.Errors), "elapsed", time.Since(start))
	return c.res, nil
}

// startCompilation takes the steps Compile and Explain take before their
// plan: it opens the repo (opts.FS, or repoDir), checks that it is a CUE
// module (ErrNoModule, its message led by verb), lists it, through view
// when set (Explain's scope), and starts a compilation of it. done
// releases the repo and the loader's directory.
func startCompilation(ctx context.Context, repoDir, verb string, opts Options, view func(fs.FS) fs.FS) (c *compilation, done func(), err error) {
	fsys := opts.FS
	closeRoot := func() {}
	if fsys == nil {
		// os.Root, unlike os.DirFS, refuses a symlink that leaves the repo
		// at any hop, as gitfs does for a commit.
		r, err := os.OpenRoot(repoDir)
		if err != nil {
			return nil, nil, fmt.Errorf("open repo %s: %w", repoDir, err)
		}
		closeRoot = func() { r.Close() }
		fsys = r.FS()
	}
	defer func() {
		if err != nil {
			closeRoot()
		}
	}()
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	if _, err := fs.Stat(fsys, "cue.mod/module.cue"); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s %s: %w", verb, repoDir, ErrNoModule)
		}
		return nil, nil, fmt.Errorf("stat cue.mod/module.cue: %w", err)
	}
	root, cleanup, err := loaderRoot()
	if err != nil {
		return nil, nil, err
	}
	if view != nil {
		fsys = view(fsys)
	}
	tree, err := walkRepo(fsys)
	if err != nil {
		cleanup()
		return nil, nil, fmt.Errorf("list repo %s: %w", repoDir, err)
	}
	return newCompilation(opts, fsys, root, tree), func() { cleanup(); closeRoot() }, nil
}

// compilation is the state of one Compile call.
type compilation struct {
	opts Options
	fsys fs.FS
	// root is the loader's directory for the repo (see loadConfig).
	root string
	tree *repoTree
	// mem is the file system the CUE loader sees: only files that passed
	// the file lints, from the directories this compile needs.
	mem     *memFS
	headers map[string]header
	read    map[string]bool // directories already read into mem
	closure map[string][]string
	// embedDirs are the directories whose packages embed files: readData
	// copied the files below them into mem.
	embedDirs map[string]bool
	modPath   string
	secrets   []secretPattern
	// tags holds the @tag attributes of the files read so far by tagsOf,
	// which reads them only where variants are planned: a plan never does.
	tags  map[string][]tagAttr
	attrs attrParser
	// variants are the variants of each config compiled that has any.
	variants map[cuecast.ConfigPath][]variant
	errs     []Error
	res      *Result
}

// newCompilation starts the state of one compile of the repo listed in
// tree, with the loader rooted at root (loaderRoot). Explain starts its
// compilation here too, so it loads a config as Compile does.
func newCompilation(opts Options, fsys fs.FS, root string, tree *repoTree) *compilation {
	c := &compilation{
		opts:      opts,
		fsys:      fsys,
		root:      filepath.ToSlash(root),
		tree:      tree,
		mem:       newMemFS(),
		headers:   make(map[string]header, tree.cueFiles),
		read:      make(map[string]bool, len(tree.dirs)),
		closure:   make(map[string][]string, len(tree.dirs)),
		embedDirs: make(map[string]bool),
		secrets:   secretPatterns(),
		tags:      make(map[string][]tagAttr),
		variants:  make(map[cuecast.ConfigPath][]variant),
		res:       &Result{Outputs: make(map[cuecast.ConfigPath]Output)},
	}
	c.errs = append(c.errs, tree.errs...)
	return c
}

// run compiles in named phases: the plan (plan), then the configs'
// evaluation.
func (c *compilation) run(ctx context.Context) error {
	p, err := c.plan(ctx)
	if err != nil {
		return err
	}
	switch {
	case p.man == nil || c.opts.ManifestOnly:
		c.res.Index = newIndex(nil, nil, nil)
		return nil
	case c.opts.PlanOnly:
		c.res.Index = newIndex(p.deps, p.man.Namespaces, c.embedDirs)
		return nil
	}
	// One load takes one set of tags: jobs with the same tags are
	// neighbours, so they share batches (runJobs).
	jobs := slices.Clone(p.jobs)
	slices.SortStableFunc(jobs, func(a, b job) int {
		return cmp.Or(slices.Compare(a.tags, b.tags), strings.Compare(string(a.cfg), string(b.cfg)))
	})
	if err := c.runJobs(ctx, jobs); err != nil {
		return err
	}
	c.indexVariants()
	c.nameVariants()
	if len(c.opts.Configs) == 0 {
		c.warnUnused(p.man, p.deps)
	}
	c.res.Index = newIndex(p.deps, p.man.Namespaces, c.embedDirs)
	return nil
}

// plan is what a compile decides before it evaluates anything.
type plan struct {
	// man is the manifest, nil when it is invalid (the errors say why).
	man *Manifest
	// deps are each target's dependency directories (readDeps).
	deps map[cuecast.ConfigPath][]string
	// jobs are the evaluations, sorted by config: one per config without
	// variants, one per variant (with its tags and the @tag fields it
	// injects into) of a config with variants; nil for ManifestOnly and
	// PlanOnly.
	jobs []job
}

// plan runs the phases before the evaluation: the module and the
// manifest, discovery of the configs, the targets and what they depend
// on, then (unless only planning) the namespace schemas and the variants
// of each config. It fills Result.Manifest and Result.Configs. Explain
// plans with it too, so it evaluates exactly a job Compile evaluates:
// the same variants, tags, wrapper and schema.
func (c *compilation) plan(ctx context.Context) (*plan, error) {
	p := &plan{}
	if err := c.readModule(ctx); err != nil {
		return nil, err
	}
	man, schemaPos := c.loadManifest(ctx)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("load manifest: %w", err)
	}
	c.res.Manifest, p.man = man, man
	if man == nil || c.opts.ManifestOnly {
		return p, nil
	}
	c.errs = append(c.errs, c.tree.symlinkDirErrors(man.Namespaces)...)
	c.res.Configs = c.discover(man)
	targets := c.selectTargets(man, c.res.Configs)
	deps, err := c.readDeps(man, targets)
	if err != nil {
		return nil, err
	}
	p.deps = deps
	crossing := c.crossNamespaceImports(man, targets, deps)
	if c.opts.PlanOnly {
		return p, nil
	}
	compile := c.compilable(targets, deps, crossing)
	// Each config gets a wrapper package that unifies it with its
	// namespace schema (see wrapConfig).
	wrapped := make(map[cuecast.ConfigPath]string)
	if !c.opts.forceUnify {
		for _, cp := range compile {
			if dir, ok := c.wrapConfig(cp, man.Namespaces[cp.Namespace()].Schema); ok {
				wrapped[cp] = dir
			}
		}
	}
	schemas, err := c.loadSchemas(ctx, man, schemaPos)
	if err != nil {
		return nil, err
	}
	for _, cp := range compile {
		s, ok := schemas[cp.Namespace()]
		if !ok {
			continue
		}
		ns := man.Namespaces[cp.Namespace()]
		j := job{cfg: cp, out: cp, schema: s, ns: ns, wrapDir: wrapped[cp], deps: deps[cp]}
		vs, dimTags, verrs := c.variantsOf(cp, deps[cp], ns)
		if len(verrs) > 0 {
			c.errs = append(c.errs, verrs...)
			continue
		}
		if len(dimTags) > 0 {
			// CUE injects @tag values only into the packages loaded as
			// arguments, never into an import such as the wrapper's.
			j.wrapDir = ""
		}
		if len(vs) == 0 {
			p.jobs = append(p.jobs, j)
			continue
		}
		c.variants[cp] = vs
		for _, v := range vs {
			vj := j
			vj.out, vj.tags, vj.injects = v.path, v.tags, dimTags
			p.jobs = append(p.jobs, vj)
		}
	}
	return p, nil
}

// readModule reads cue.mod/ into the loader's file system and the module
// path from module.cue. Without a module path imports of the module cannot
// be followed; the loader then reports them with positions, so only a
// cancelled ctx is an error.
func (c *compilation) readModule(ctx context.Context) error {
	for _, p := range c.tree.modFiles {
		if err := c.readInto(p); err != nil {
			return err
		}
	}
	// bounded may abandon f on timeout while later steps add files to
	// c.mem, so f gets the bytes rather than the map.
	modSrc := c.mem.files["cue.mod/module.cue"]
	modPath, err := bounded(ctx, c.opts.shared(), func() string { return modulePath(modSrc) })
	if err != nil && ctx.Err() != nil {
		return fmt.Errorf("read module path: %w", err)
	}
	c.modPath = modPath
	return nil
}

// discover returns every config, sorted: each directory with .cue files
// below a namespace. A directory whose name is no valid config path is
// reported instead.
func (c *compilation) discover(man *Manifest) []cuecast.ConfigPath {
	var all []cuecast.ConfigPath
	for dir, files := range c.tree.dirs {
		cp, ok := configPathOf(dir, man.Namespaces)
		if !ok {
			continue
		}
		if cp.Validate() != nil {
			c.errs = append(c.errs, Error{File: files[0], Line: 1, Column: 1, ID: IDConfigName,
				Message: fmt.Sprintf("config directory %s: %s", dir, segmentProblem(dir)),
				Fix:     fixFor(IDConfigName)})
			continue
		}
		all = append(all, cp)
	}
	slices.Sort(all)
	return all
}

// selectTargets returns the configs to compile, sorted: all of them, or
// those of Options.Configs that exist. A named config of an undeclared
// namespace is reported.
func (c *compilation) selectTargets(man *Manifest, all []cuecast.ConfigPath) []cuecast.ConfigPath {
	if len(c.opts.Configs) == 0 {
		return all
	}
	var targets []cuecast.ConfigPath
	for _, cp := range c.opts.Configs {
		cp = cp.Base() // a variant is compiled with its config's other variants
		if _, ok := man.Namespaces[cp.Namespace()]; !ok {
			c.errs = append(c.errs, Error{Config: cp, File: "cuecast.cue", Line: 1, Column: 1, ID: IDUnknownNamespace,
				Message: fmt.Sprintf("config %s is in namespace %q, which cuecast.cue does not declare", cp, cp.Namespace()),
				Fix:     fixFor(IDUnknownNamespace)})
			continue
		}
		if _, found := slices.BinarySearch(all, cp); found {
			targets = append(targets, cp)
		}
	}
	slices.Sort(targets)
	return slices.Compact(targets)
}

// readDeps reads what the targets need, following imports, and returns each
// target's dependency directories (dirClosure). A namespace's schema
// package is a dependency of each of its configs even though they need not
// import it.
func (c *compilation) readDeps(man *Manifest, targets []cuecast.ConfigPath) (map[cuecast.ConfigPath][]string, error) {
	if err := c.readAhead(targets); err != nil {
		return nil, err
	}
	deps := make(map[cuecast.ConfigPath][]string, len(targets))
	for _, cp := range targets {
		d, err := c.dirClosure(string(cp))
		if err != nil {
			return nil, err
		}
		if imp, _, ok := splitSchema(man.Namespaces[cp.Namespace()].Schema); ok {
			if sdir, ok := c.importDir(imp); ok {
				sd, err := c.dirClosure(sdir)
				if err != nil {
					return nil, err
				}
				d = append(append(append([]string(nil), d...), sdir), sd...)
				slices.Sort(d)
				d = slices.Compact(d)
			}
		}
		deps[cp] = d
	}
	return deps, nil
}

// compilable returns the targets that can be compiled: not a config with
// several packages in its directory (reported here: the loader would
// refuse it with a less helpful message), nor one that loads a file a lint
// rejected or an import import_configs_from forbids (reported already).
func (c *compilation) compilable(targets []cuecast.ConfigPath, deps map[cuecast.ConfigPath][]string, crossing map[cuecast.ConfigPath]bool) []cuecast.ConfigPath {
	var compile []cuecast.ConfigPath
	for _, cp := range targets {
		if e, bad := c.multiplePackages(cp); bad {
			c.errs = append(c.errs, e)
			continue
		}
		if c.touchesBadFile(deps[cp]) || crossing[cp] {
			continue
		}
		compile = append(compile, cp)
	}
	return compile
}

// loadSchemas loads the namespace schema packages once, on their own (the
// configs are loaded in batches by the workers, see runJobs), and checks
// each namespace's schema once. It returns the usable schema of each
// namespace; configs of a namespace whose schema is broken are not
// compiled (the errors say why). A schema package that does not load or
// evaluate is reported once, at its own lines, whichever namespaces use it.
func (c *compilation) loadSchemas(ctx context.Context, man *Manifest, schemaPos map[string]Error) (map[string]*nsSchema, error) {
	schemaArgs := make(map[string]int) // import path -> index in args
	var args, schemaDirs []string
	for _, ns := range slices.Sorted(maps.Keys(man.Namespaces)) {
		imp, _, ok := splitSchema(man.Namespaces[ns].Schema)
		if !ok {
			continue
		}
		if _, seen := schemaArgs[imp]; seen {
			continue
		}
		if err := c.readImport(imp); err != nil {
			return nil, err
		}
		if dir, ok := c.importDir(imp); ok {
			schemaDirs = append(append(schemaDirs, dir), c.closure[dir]...)
		}
		schemaArgs[imp] = len(args)
		args = append(args, imp)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var insts []*build.Instance
	if len(args) > 0 {
		insts = load.Instances(args, c.loadConfigFor(schemaDirs))
	}
	schemas := make(map[string]*nsSchema)
	users := make(map[string][]string) // schema import path -> namespaces
	for _, ns := range slices.Sorted(maps.Keys(man.Namespaces)) {
		if imp, _, ok := splitSchema(man.Namespaces[ns].Schema); ok {
			users[imp] = append(users[imp], ns)
		}
	}
	brokenPkgs := make(map[string]bool)
	for _, ns := range slices.Sorted(maps.Keys(man.Namespaces)) {
		s, e, pkgErr := c.checkSchema(ctx, man.Namespaces[ns], schemaPos[ns], insts, schemaArgs)
		switch {
		case pkgErr != nil:
			imp, _, _ := splitSchema(man.Namespaces[ns].Schema)
			if !brokenPkgs[imp] {
				brokenPkgs[imp] = true
				c.errs = append(c.errs, c.schemaPackageErrors(imp, users[imp], pkgErr)...)
			}
			continue
		case e != nil:
			c.errs = append(c.errs, *e)
			continue
		}
		schemas[ns] = s
	}
	return schemas, nil
}

// crossNamespaceImports enforces import_configs_from: it reports every
// import, in the packages the targets load, of a config in a namespace the
// importing config's namespace does not name, and returns the configs that
// load such an import. Each offending import is reported once, against the
// config whose directory holds it (or no config, in a library).
func (c *compilation) crossNamespaceImports(man *Manifest, targets []cuecast.ConfigPath, deps map[cuecast.ConfigPath][]string) map[cuecast.ConfigPath]bool {
	bad := make(map[cuecast.ConfigPath]bool)
	reported := make(map[string]bool)
	byDir := make(map[string][]nsImport)
	for _, cp := range targets {
		ns := man.Namespaces[cp.Namespace()]
		dirs := append(append(ancestors(string(cp)), string(cp)), deps[cp]...)
		for _, d := range dirs {
			imps, ok := byDir[d+"\x00"+ns.Name]
			if !ok {
				imps = c.namespaceImports(man, ns, d)
				byDir[d+"\x00"+ns.Name] = imps
			}
			for _, ni := range imps {
				if ni.other == ns.Name || slices.Contains(ns.ImportConfigsFrom, ni.other) {
					continue
				}
				bad[cp] = true
				var owner cuecast.ConfigPath
				if cfg, ok := configPathOf(d, man.Namespaces); ok {
					owner = cfg
				}
				key := fmt.Sprintf("%s:%d:%s", ni.file, ni.i, ns.Name)
				if reported[key] {
					continue
				}
				reported[key] = true
				h := c.headers[ni.file]
				c.errs = append(c.errs, Error{Config: owner, File: ni.file, Line: h.importAt[ni.i][0], Column: h.importAt[ni.i][1],
					ID: IDCrossNamespaceImport, Fix: fixFor(IDCrossNamespaceImport),
					Message: fmt.Sprintf("%s imports %s, a config of namespace %s, but cuecast.cue does not let namespace %s import configs from %s",
						d, ni.idir, ni.other, ns.Name, ni.other)})
			}
		}
	}
	return bad
}

// nsImport is the i-th import of file, of directory idir below namespace
// other.
type nsImport struct {
	file, idir, other string
	i                 int
}

// namespaceImports lists the imports, in the .cue files of dir that a
// config of namespace ns loads (not excluded, or excluded by an @if that
// names one of ns's dimension values), of a directory below a declared
// namespace: the imports import_configs_from may forbid. Most directories have none, so
// crossNamespaceImports looks each directory up once per namespace, not once per config.
func (c *compilation) namespaceImports(man *Manifest, ns Namespace, dir string) []nsImport {
	var out []nsImport
	for _, f := range c.tree.dirs[dir] {
		h := c.headers[f]
		if h.excluded && !readsDimension(h, ns) {
			continue // left out of every variant
		}
		for i, imp := range h.imports {
			idir, ok := c.importDir(imp)
			if !ok {
				continue
			}
			other, _, _ := strings.Cut(idir, "/")
			if _, isNS := man.Namespaces[other]; isNS {
				out = append(out, nsImport{file: f, idir: idir, other: other, i: i})
			}
		}
	}
	return out
}

// warnUnused logs top-level directories that hold CUE packages but are
// neither a declared namespace nor imported by any config. That is what a
// namespace someone forgot to declare looks like: its configs are treated
// as a library and never published. It is a warning, not an error, because
// an unused library looks the same. Only a full compile knows every
// config's imports, so only a full compile checks.
func (c *compilation) warnUnused(man *Manifest, deps map[cuecast.ConfigPath][]string) {
	used := make(map[string]bool)
	for _, dirs := range deps {
		for _, d := range dirs {
			top, _, _ := strings.Cut(d, "/")
			used[top] = true
		}
	}
	unused := make(map[string]bool)
	for dir := range c.tree.dirs {
		top, _, _ := strings.Cut(dir, "/")
		if _, ns := man.Namespaces[top]; dir != "." && !used[top] && !ns {
			unused[top] = true
		}
	}
	c.res.Undeclared = slices.Sorted(maps.Keys(unused))
	for _, top := range c.res.Undeclared {
		c.opts.Logger.Warn("directory holds CUE packages but is not a namespace and no config imports it; if it holds configs, declare it in cuecast.cue",
			"dir", top)
	}
}

// wrapDir holds the wrapper packages wrapConfig writes into the loader's
// file system. CUE ignores directories starting with '_', so nothing in a
// repo can be imported from there, and the walk never reads one.
const wrapDir = "_cuecast"

// wrapConfig adds a package that imports the config and its namespace
// schema and unifies them: "schema.#Def & config". Evaluating it gives the
// same value as unifying the evaluated config with the definition, but in one
// evaluation instead of two, because BuildInstance finalises a package and
// Value.Unify then evaluates it again. It returns the wrapper's directory,
// or false (leaving the job to Value.Unify) when the module path or the
// config's package name is unknown.
func (c *compilation) wrapConfig(cp cuecast.ConfigPath, schema string) (string, bool) {
	imp, def, ok := splitSchema(schema)
	if !ok || c.modPath == "" {
		return "", false
	}
	pkg := ""
	for _, f := range c.tree.dirs[string(cp)] {
		if h := c.headers[f]; h.pkg != "" && h.pkg != "_" && !h.excluded {
			pkg = h.pkg
			break
		}
	}
	if pkg == "" {
		return "", false
	}
	dir := wrapDir + "/" + string(cp)
	c.mem.add(dir+"/wrap.cue", []byte(fmt.Sprintf(
		"package cuecastwrap\n\nimport (\n\tcuecastConfig %q\n\tcuecastSchema %q\n)\n\ncuecastSchema.%s & cuecastConfig\n",
		c.modPath+"/"+string(cp)+":"+pkg, imp, def)))
	return dir, true
}

// synthetic reports whether a loader file name is one of the wrapper files.
func synthetic(name string) bool {
	name = relFile(name)
	return name == wrapDir || strings.HasPrefix(name, wrapDir+"/")
}

func segmentProblem(dir string) string {
	for _, s := range strings.Split(dir, "/") {
		if !cuecast.ValidSegment(s) {
			return fmt.Sprintf("segment %q must match [a-z0-9][a-z0-9_-]*", s)
		}
	}
	return "invalid path"
}

// loaderRoot makes the empty private directory loadConfig roots the
// overlay at. Where no temporary directory can be made (a read-only file
// system), a directory at the file system root that does not exist serves:
// only the superuser could create it there.
func loaderRoot() (root string, cleanup func(), err error) {
	root, err = os.MkdirTemp("", loadRootPrefix+"*")
	if err == nil {
		return root, func() { os.RemoveAll(root) }, nil
	}
	fallback := string(filepath.Separator) + loadRootPrefix + "0"
	if _, lerr := os.Lstat(fallback); errors.Is(lerr, fs.ErrNotExist) {
		return fallback, func() {}, nil
	}
	return "", nil, fmt.Errorf("create loader root: %w", err)
}

// loadRootPrefix starts the name of the directory the CUE loader believes
// the repo is in; relFile recognises loader file names by it.
const loadRootPrefix = "cuecast-load-"

// loadConfig points the CUE loader at the in-memory copy of the repo, given
// as an overlay rooted at c.root: an empty directory this compile created,
// so nothing the overlay lacks can be found on disk instead. (The loader's
// fs.FS mode would need no directory, but cue/load v0.17 cannot resolve
// packages vendored under cue.mod/pkg in that mode, nor give @embed a
// module root.) relFile turns the absolute names back into repo-relative
// ones, so every position is reported as the author sees it.
func (c *compilation) loadConfig() *load.Config {
	ov := make(map[string]load.Source, len(c.mem.files))
	for name, b := range c.mem.files {
		ov[c.root+"/"+name] = load.FromBytes(b)
	}
	return c.loaderConfig(ov)
}

// loadConfigFor is loadConfig limited to the files packages in dirs can
// read: the files directly in each of dirs (which must include the
// ancestors of every package to load, as Compile's dependency lists do),
// those below a directory whose package embeds files, the root's and
// cue.mod's. The loader lists every ancestor directory of every package it
// loads, and a listing holds the subdirectories too, so with the whole repo
// in the overlay loading n configs of one namespace took time in n²: each
// config listed (and the loader sorted) its namespace directory of n
// entries.
func (c *compilation) loadConfigFor(dirs []string) *load.Config {
	ov := make(map[string]load.Source)
	add := func(name string) { ov[c.root+"/"+name] = load.FromBytes(c.mem.files[name]) }
	for _, name := range c.mem.filesIn(".") {
		add(name)
	}
	for _, name := range c.mem.filesUnder("cue.mod") {
		add(name)
	}
	seen := make(map[string]bool, len(dirs))
	for _, d := range dirs {
		if seen[d] {
			continue
		}
		seen[d] = true
		for _, name := range c.mem.filesIn(d) {
			add(name)
		}
		if c.embedDirs[d] && d != "." {
			for _, name := range c.mem.filesUnder(d) {
				add(name)
			}
		}
	}
	return c.loaderConfig(ov)
}

func (c *compilation) loaderConfig(ov map[string]load.Source) *load.Config {
	return &load.Config{
		Overlay:    ov,
		Dir:        c.root,
		ModuleRoot: c.root,
		// No registry lookups: the repo must be self-contained, and a
		// compile must never reach the network.
		Env: []string{"CUE_REGISTRY=none"},
	}
}

// readInto copies one file into the loader's file system, applying the file
// lints. A rejected file is recorded and left out.
func (c *compilation) readInto(p string) error {
	if c.tree.bad[p] {
		return nil
	}
	return c.keep(readSource(c.fsys, p))
}

// source is one file as read: its content and header, or the lint that
// rejected it, or the error reading it.
type source struct {
	p    string
	b    []byte
	h    header
	lint *Error
	err  error
}

// readSource reads p and, for a .cue file, its header. It touches nothing
// but fsys, so files can be read on several goroutines (readAhead).
func readSource(fsys fs.FS, p string) source {
	b, lint, err := readFile(fsys, p)
	s := source{p: p, b: b, lint: lint, err: err}
	if err == nil && lint == nil && strings.HasSuffix(p, ".cue") {
		s.h = parseHeader(p, b)
	}
	return s
}

// keep records a file read by readSource, as readInto does.
func (c *compilation) keep(s source) error {
	if s.err != nil {
		return s.err
	}
	if s.lint != nil {
		c.tree.reject(*s.lint)
		c.errs = append(c.errs, c.tree.errs[len(c.tree.errs)-1])
		return nil
	}
	c.mem.add(s.p, s.b)
	if strings.HasSuffix(s.p, ".cue") {
		c.headers[s.p] = s.h
	}
	return nil
}

// readAheadMin is the fewest targets for which readAhead reads on several
// goroutines: below it, starting them costs more than it saves.
const readAheadMin = 64

// readAhead reads the directories of the targets and their ancestors
// (what readDir would read first for each) on Options.Workers goroutines:
// reading and scanning every file is most of a plan's work, and the rest
// of it is serial. Files are kept in the order readDir would keep them,
// so errors and lint findings do not depend on the workers.
func (c *compilation) readAhead(targets []cuecast.ConfigPath) error {
	workers := min(c.opts.Workers, len(targets)/readAheadMin)
	if workers < 2 {
		return nil
	}
	var dirs []string
	seen := make(map[string]bool)
	for _, cp := range targets {
		for _, d := range append(ancestors(string(cp)), string(cp)) {
			if !seen[d] && !c.read[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	var files []string
	for _, d := range dirs {
		for _, p := range c.tree.dirs[d] {
			if !c.tree.bad[p] {
				files = append(files, p)
			}
		}
	}
	srcs := make([]source, len(files))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < len(files); i = int(next.Add(1) - 1) {
				srcs[i] = readSource(c.fsys, files[i])
			}
		}()
	}
	wg.Wait()
	for _, s := range srcs {
		if err := c.keep(s); err != nil {
			return err
		}
	}
	for _, d := range dirs {
		if err := c.readDir(d); err != nil {
			return err
		}
	}
	return nil
}

func (c *compilation) readDir(dir string) error {
	if c.read[dir] {
		return nil
	}
	c.read[dir] = true
	embeds := false
	for _, p := range c.tree.dirs[dir] {
		if _, done := c.headers[p]; !done {
			if err := c.readInto(p); err != nil {
				return err
			}
		}
		embeds = embeds || c.headers[p].embeds
	}
	if embeds {
		c.embedDirs[dir] = true
		return c.readData(dir)
	}
	return nil
}

// readData copies the non-CUE files of dir and the directories below it
// into the loader's file system, for a package there that embeds files
// (@embed paths are relative to the package and cannot leave it).
func (c *compilation) readData(dir string) error {
	for d, files := range c.tree.data {
		if !under(d, dir) || (dir == "." && d != ".") {
			continue
		}
		for _, p := range files {
			if _, ok := c.mem.files[p]; ok || c.tree.bad[p] {
				continue
			}
			b, lint, err := readData(c.fsys, p)
			if err != nil {
				return err
			}
			if lint != nil {
				// Not every file next to the package is embedded, so an
				// oversized one is no error here; an @embed naming it
				// fails to find it, at the attribute.
				c.opts.Logger.Debug("not offered for embedding", "file", p, "reason", lint.Message)
				continue
			}
			c.mem.add(p, b)
		}
	}
	return nil
}

// dirClosure returns every directory whose .cue files can change the package
// at dir: dir itself, its ancestors (files there join the package when they
// share its name), and the same for each import, transitively. It reads those
// directories into the loader's file system on the way.
func (c *compilation) dirClosure(dir string) ([]string, error) {
	if d, ok := c.closure[dir]; ok {
		return d, nil
	}
	c.closure[dir] = nil // breaks import cycles; CUE reports the cycle itself
	own := append(ancestors(dir), dir)
	for _, d := range own {
		if err := c.readDir(d); err != nil {
			return nil, err
		}
	}
	// A slice sorted and compacted at the end: a closure is a handful of
	// directories, and a plan makes one per config.
	out := slices.Clone(own)
	for _, d := range own {
		for _, f := range c.tree.dirs[d] {
			// A symlinked file is read like its target: the target's
			// directory is a dependency too.
			if target, ok := c.tree.links[f]; ok {
				out = append(out, path.Dir(target))
			}
			for _, imp := range c.headers[f].imports {
				idir, ok := c.importDir(imp)
				if !ok {
					continue
				}
				sub, err := c.dirClosure(idir)
				if err != nil {
					return nil, err
				}
				out = append(append(out, idir), sub...)
			}
		}
	}
	slices.Sort(out)
	out = slices.Clip(slices.Compact(out))
	c.closure[dir] = out
	return out, nil
}

// importDir maps an import path of this module to its directory. Standard
// library and external imports have none.
func (c *compilation) importDir(imp string) (string, bool) {
	if c.modPath == "" {
		return "", false
	}
	if imp == c.modPath {
		return ".", false // the root holds the manifest, not a library
	}
	rest, ok := strings.CutPrefix(imp, c.modPath+"/")
	if !ok || rest == "" {
		return "", false
	}
	return path.Clean(rest), true
}

func (c *compilation) readImport(imp string) error {
	dir, ok := c.importDir(imp)
	if !ok {
		return nil
	}
	_, err := c.dirClosure(dir)
	return err
}

func (c *compilation) multiplePackages(cp cuecast.ConfigPath) (Error, bool) {
	var first string
	var firstFile string
	for _, f := range c.tree.dirs[string(cp)] {
		h, ok := c.headers[f]
		if !ok || h.pkg == "" || h.pkg == "_" || h.excluded {
			continue
		}
		if first == "" {
			first, firstFile = h.pkg, f
			continue
		}
		if h.pkg != first {
			return Error{Config: cp, File: f, Line: 1, Column: 1, ID: IDConfigPackages,
				Message: fmt.Sprintf("package %s here, but %s is package %s; a config directory holds one package", h.pkg, firstFile, first),
				Fix:     fixFor(IDConfigPackages)}, true
		}
	}
	return Error{}, false
}

// touchesBadFile reports whether a .cue file rejected by a file lint sits in
// one of dirs: the package it belongs to would load without it and compile
// to something its author did not write.
func (c *compilation) touchesBadFile(dirs []string) bool {
	for f := range c.tree.bad {
		if strings.HasSuffix(f, ".cue") {
			if _, found := slices.BinarySearch(dirs, path.Dir(f)); found {
				return true
			}
		}
	}
	return false
}

// modulePath reads the module path from cue.mod/module.cue, without the
// major version suffix ("example.com/configs@v0" imports as
// "example.com/configs/...").
func modulePath(src []byte) string {
	if src == nil {
		return ""
	}
	v := cuecontext.New().CompileBytes(src, cue.Filename("cue.mod/module.cue"))
	s, err := v.LookupPath(cue.ParsePath("module")).String()
	if err != nil {
		return ""
	}
	s, _, _ = strings.Cut(s, "@")
	return s
}
