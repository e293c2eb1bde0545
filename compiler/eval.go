package compiler

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	cueerrors "cuelang.org/go/cue/errors"
	"cuelang.org/go/cue/load"
	"cuelang.org/go/cue/token"

	"github.com/cuecast/cuecast"
)

// bounded runs f on its own goroutine and waits at most d for it, or until
// ctx is done. CUE cannot interrupt an evaluation, so on timeout f is left
// to finish in the background: f must only read state it shares. A panic
// in f is returned as an error.
func bounded[T any](ctx context.Context, d time.Duration, f func() T) (T, error) {
	return boundedWatch(ctx, d, f, nil)
}

// boundedWatch is bounded that, when it gives up on f while f still runs,
// calls abandon with the reason (errTimeout or ctx's error) and calls the
// function abandon returns once f ends, so that a Runaways can count f.
func boundedWatch[T any](ctx context.Context, d time.Duration, f func() T, abandon func(err error) (ended func())) (T, error) {
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1)
	// mu orders f's end against giving up on it: either f ended first and
	// is not counted, or ended is set before f's goroutine looks for it.
	var mu sync.Mutex
	var finished bool
	var ended func()
	go func() {
		var r result
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("internal evaluator error: %v", p)
			}
			done <- r
			mu.Lock()
			finished = true
			e := ended
			mu.Unlock()
			if e != nil {
				e()
			}
		}()
		r.v = f()
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	var zero T
	giveUp := func(err error) (T, error) {
		if abandon != nil {
			mu.Lock()
			if !finished {
				ended = abandon(err)
			}
			mu.Unlock()
		}
		return zero, err
	}
	select {
	case r := <-done:
		return r.v, r.err
	case <-t.C:
		return giveUp(errTimeout)
	case <-ctx.Done():
		return giveUp(ctx.Err())
	}
}

type job struct {
	// cfg is the config to load; out is the path its output is published
	// at, cfg or one of its variants, whose tags are set at load.
	cfg  cuecast.ConfigPath
	out  cuecast.ConfigPath
	tags []string
	// injects are the @tag fields of the config's own package that a
	// dimension of the variant is injected into (variantsOf).
	injects []tagAttr
	inst    *build.Instance
	schema  *nsSchema
	// wrap, when set, is the wrapper package unifying the config with its
	// namespace schema (see wrapConfig); it replaces inst for evaluation.
	wrap *build.Instance
	ns   Namespace
	// wrapDir is the directory of the config's wrapper package, "" when
	// there is none; deps are the directories its packages load from.
	wrapDir string
	deps    []string
}

type jobResult struct {
	cfg  cuecast.ConfigPath
	out  *Output
	errs []Error
}

// runJobs loads and evaluates jobs on a bounded pool. The jobs, sorted by
// config, are cut into batches of contextReuse neighbours; a worker loads a
// batch with one load.Instances call over only the files it needs (see
// loadConfigFor), evaluates its configs in one fresh CUE context and drops
// it. So loading runs in parallel too, and no more than a batch per worker
// of loaded packages and evaluated values is alive at a time. Results are
// kept by job and merged in job order, so the Result never depends on
// which worker finished first.
func (c *compilation) runJobs(ctx context.Context, jobs []job) error {
	if len(jobs) == 0 {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type batch struct {
		first int
		jobs  []job
	}
	// A batch is one load, with one set of tags (run sorts jobs by tags).
	var batches []batch
	for i := 0; i < len(jobs); {
		n := 1
		for n < contextReuse && i+n < len(jobs) && slices.Equal(jobs[i+n].tags, jobs[i].tags) {
			n++
		}
		batches = append(batches, batch{first: i, jobs: jobs[i : i+n]})
		i += n
	}
	type indexed struct {
		i     int
		r     jobResult
		fatal error
	}
	work := make(chan batch)
	results := make(chan indexed)
	var wg sync.WaitGroup
	workers := min(c.opts.Workers, len(batches))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := &worker{}
			for b := range work {
				insts, err := c.loadBatch(b.jobs)
				if err != nil {
					select {
					case results <- indexed{i: -1, fatal: err}:
					case <-ctx.Done():
					}
					return
				}
				w.discard()
				for k, j := range b.jobs {
					j.inst = insts[k]
					if wi := len(b.jobs) + k; j.wrapDir != "" && j.schema.inst != nil && insts[wi] != nil && insts[wi].Err == nil {
						j.wrap = insts[wi]
					}
					r := c.evalWithTimeout(ctx, w, j)
					select {
					case results <- indexed{i: b.first + k, r: r}:
					case <-ctx.Done():
						return
					}
				}
			}
		}()
	}
	go func() {
		defer close(work)
		for _, b := range batches {
			select {
			case work <- b:
			case <-ctx.Done():
				return
			}
		}
	}()
	go func() { wg.Wait(); close(results) }()

	done := 0
	got := make([]*jobResult, len(jobs))
	var fatal error
	for r := range results {
		if r.fatal != nil {
			if fatal == nil {
				fatal = r.fatal
			}
			cancel()
			continue
		}
		done++
		got[r.i] = &r.r
		if c.opts.Progress != nil {
			c.opts.Progress(done, len(jobs))
		}
	}
	if fatal != nil {
		return fmt.Errorf("compile configs: %w", fatal)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("compile configs: %w", err)
	}
	for _, r := range got {
		if r == nil {
			continue
		}
		if r.out != nil {
			c.res.Outputs[r.cfg] = *r.out
		}
		c.errs = append(c.errs, r.errs...)
	}
	return nil
}

// loadBatch loads the configs of jobs, then their wrapper packages: the
// result has 2*len(jobs) entries, nil for a config without a wrapper or
// whose wrapper did not load. A
// panic in the loader is a bug in CUE; it is returned as an error.
func (c *compilation) loadBatch(jobs []job) (insts []*build.Instance, err error) {
	defer func() {
		if p := recover(); p != nil {
			insts, err = nil, fmt.Errorf("internal error loading %s…: %v", jobs[0].cfg, p)
		}
	}()
	var dirs []string
	for _, j := range jobs {
		dirs = append(dirs, j.deps...)
		if j.wrapDir != "" {
			dirs = append(dirs, j.wrapDir)
		}
	}
	cfg := c.loadConfigFor(dirs)
	cfg.Tags = jobs[0].tags
	if c.opts.onBatchLoad != nil {
		c.opts.onBatchLoad(len(cfg.Overlay))
	}
	// A config with a wrapper is loaded only as the wrapper's import:
	// loaded as an argument as well, under its unqualified import path, it
	// would be built a second time.
	args := make([]string, len(jobs))
	for k, j := range jobs {
		args[k] = "./" + string(j.cfg)
		if j.wrapDir != "" && j.schema.inst != nil {
			args[k] = "./" + j.wrapDir
		}
	}
	loaded := load.Instances(args, cfg)
	insts = make([]*build.Instance, 2*len(jobs))
	var retry []int
	for k, j := range jobs {
		l := loaded[k]
		if args[k] == "./"+string(j.cfg) {
			insts[k] = l
			continue
		}
		if l.Err == nil {
			if ci := importOf(l, c.modPath+"/"+string(j.cfg)); ci != nil {
				insts[k], insts[len(jobs)+k] = ci, l
				continue
			}
		}
		retry = append(retry, k)
	}
	if len(retry) > 0 {
		// The wrapper did not load: load the config itself, whose errors
		// are the ones to report (eval then applies the schema with
		// Value.Unify, as for a config without a wrapper).
		args = args[:0]
		for _, k := range retry {
			args = append(args, "./"+string(jobs[k].cfg))
		}
		again := load.Instances(args, cfg)
		for n, k := range retry {
			insts[k] = again[n]
		}
	}
	return insts, nil
}

// importOf returns the instance inst imports under path, with or without a
// package qualifier, or nil.
func importOf(inst *build.Instance, path string) *build.Instance {
	for _, imp := range inst.Imports {
		if imp.ImportPath == path || strings.HasPrefix(imp.ImportPath, path+":") {
			return imp
		}
	}
	return nil
}

// evalWithTimeout runs one evaluation with the per-config time limit. CUE
// offers no way to interrupt an evaluation, so on timeout the evaluating
// goroutine is left to finish on its own and its result is dropped.
func (c *compilation) evalWithTimeout(ctx context.Context, w *worker, j job) jobResult {
	r := c.evalBounded(ctx, w, j)
	if j.out != j.cfg {
		// nameVariants words the errors once all variants are in.
		r.cfg = j.out
		for i := range r.errs {
			r.errs[i].Config = j.out
		}
	}
	return r
}

func (c *compilation) evalBounded(ctx context.Context, w *worker, j job) jobResult {
	rw := c.opts.Runaways
	if why := rw.admit(j.out, func() string { return c.inputsDigest(j) }); why != "" {
		c.opts.Logger.Warn("config evaluation refused", "config", j.out, "reason", why)
		return jobResult{cfg: j.cfg, errs: []Error{c.refusal(j, why)}}
	}
	cctx := w.context()
	r, err := boundedWatch(ctx, c.opts.Timeout, func() jobResult { return c.eval(cctx, j) },
		func(err error) func() {
			digest := ""
			if errors.Is(err, errTimeout) {
				// A cancelled compile says nothing about the config, so
				// only a timeout keeps its inputs to refuse them again.
				digest = c.inputsDigest(j)
			}
			return rw.abandon(j.out, digest)
		})
	switch {
	case errors.Is(err, errTimeout):
		// The abandoned evaluation still holds the context; the next
		// config gets a fresh one.
		w.discard()
		c.opts.Logger.Warn("config evaluation timed out", "config", j.cfg, "timeout", c.opts.Timeout,
			"abandoned_running", rw.Running())
		return jobResult{cfg: j.cfg, errs: []Error{c.timeoutError(j)}}
	case err != nil:
		// Cancelled: runJobs reports ctx.Err().
		w.discard()
		return jobResult{cfg: j.cfg}
	}
	rw.finished(j.out)
	return r
}

// timeoutError reports a config whose evaluation ran out of time at the
// construct most likely to blame (findHotSpot), saying that it is a guess,
// or at the config's first file when its files hold nothing known to be
// slow.
func (c *compilation) timeoutError(j job) Error {
	e := Error{Config: j.cfg, File: firstOr(c.tree.dirs[string(j.cfg)], string(j.cfg)), Line: 1, Column: 1,
		ID: IDConfigTimeout, Fix: fixFor(IDConfigTimeout),
		Message: fmt.Sprintf("evaluation did not finish within %s", c.opts.Timeout)}
	var own []string
	for _, d := range append(ancestors(string(j.cfg)), string(j.cfg)) {
		for _, f := range c.tree.dirs[d] {
			if !c.headers[f].excluded {
				own = append(own, f)
			}
		}
	}
	if h, ok := findHotSpot(c.mem.snapshot(own), own); ok {
		e.File, e.Line, e.Column = h.file, h.line, h.col
		in := ""
		if h.field != "" {
			in = " in field " + h.field
		}
		e.Message += fmt.Sprintf("; CUE cannot say where the time went, but the costliest construct in the config's files is %s%s, here", h.what, in)
	}
	return e
}

// contextReuse is how many configs one CUE context evaluates before it is
// replaced, and how many configs a worker loads at once (runJobs). Reusing
// a context lets configs share the compiled form of the packages they
// import (the cue CLI gets its speed the same way); replacing it bounds
// memory, because a CUE context only grows.
const contextReuse = 50

// worker owns the CUE context of one pool goroutine. A context is never
// used by two evaluations at once.
type worker struct {
	ctx  *workerContext
	uses int
}

// workerContext is a CUE context and the namespace schema definitions
// built in it.
type workerContext struct {
	cue     *cue.Context
	schemas map[*nsSchema]cue.Value
}

func (w *worker) context() *workerContext {
	if w.ctx == nil || w.uses >= contextReuse {
		w.ctx = &workerContext{cue: cuecontext.New(), schemas: make(map[*nsSchema]cue.Value)}
		w.uses = 0
	}
	w.uses++
	return w.ctx
}

func (w *worker) discard() { w.ctx = nil }

// eval compiles one config in the worker's CUE context.
func (c *compilation) eval(wc *workerContext, j job) (r jobResult) {
	r.cfg = j.cfg
	own := append(ancestors(string(j.cfg)), string(j.cfg))
	defer func() {
		// A panic inside the evaluator is a bug in CUE or in us; report it
		// against the config instead of taking the whole process down.
		if p := recover(); p != nil {
			r.out = nil
			r.errs = append(r.errs, Error{Config: j.cfg, File: firstOr(c.tree.dirs[string(j.cfg)], string(j.cfg)), Line: 1, Column: 1,
				ID: IDCue, Message: fmt.Sprintf("internal evaluator error: %v", p)})
		}
	}()
	if j.inst.Err != nil {
		r.errs = c.cueErrors(j.inst.Err, j.cfg, own, cue.Value{})
		return r
	}
	var v cue.Value
	if j.wrap != nil {
		v = wc.cue.BuildInstance(j.wrap) // config & schema, one evaluation
	} else {
		v = wc.cue.BuildInstance(j.inst)
	}
	if j.schema.inst != nil && j.wrap == nil {
		// No wrapper could be made (see wrapConfig): unify the evaluated
		// config with the definition, which evaluates it a second time.
		s, ok := wc.schemas[j.schema]
		if !ok {
			s = wc.cue.BuildInstance(j.schema.inst)
			if err := s.Err(); err == nil {
				s = s.LookupPath(j.schema.def)
			}
			wc.schemas[j.schema] = s
		}
		if err := s.Err(); err != nil {
			r.errs = c.cueErrors(err, j.cfg, own, s)
			return r
		}
		v = v.Unify(s)
	}
	if err := v.Err(); err != nil {
		// Err reports the first error; Validate walks the value and
		// reports every one, so an author fixes them in one round.
		if all := v.Validate(cue.Concrete(true)); all != nil {
			err = all
		}
		r.errs = c.cueErrors(err, j.cfg, own, v)
		return r
	}
	if err := v.Validate(cue.Concrete(true)); err != nil {
		r.errs = c.cueErrors(err, j.cfg, own, v)
		return r
	}
	var lints []Error
	b, err := encodeCanonical(v, c.secrets, func(e Error) {
		e.Config = j.cfg
		lints = append(lints, e)
	})
	if err != nil {
		r.errs = c.cueErrors(err, j.cfg, own, v)
		return r
	}
	lints = append(lints, c.lintFlagSet(j.cfg, v, b)...)
	if int64(len(b)) > j.ns.MaxSize {
		lints = append(lints, Error{Config: j.cfg, File: firstOr(c.tree.dirs[string(j.cfg)], string(j.cfg)), Line: 1, Column: 1,
			ID: IDSizeConfig, Fix: fixFor(IDSizeConfig),
			Message: fmt.Sprintf("compiled config is %d bytes, over the %d-byte limit of namespace %s", len(b), j.ns.MaxSize, j.ns.Name)})
	}
	if len(lints) > 0 {
		r.errs = lints
		return r
	}
	r.out = &Output{JSON: b, Checksum: cuecast.Checksum(b), Files: instanceFiles(j.inst, j.schema.inst), Tags: j.tags}
	return r
}

func firstOr(s []string, def string) string {
	if len(s) > 0 {
		return s[0]
	}
	return def
}

// instanceFiles lists the files of insts and of everything they import.
func instanceFiles(insts ...*build.Instance) []string {
	seen := make(map[*build.Instance]bool)
	var files []string
	var visit func(*build.Instance)
	visit = func(i *build.Instance) {
		if i == nil || seen[i] {
			return
		}
		seen[i] = true
		for _, f := range i.BuildFiles {
			if !synthetic(f.Filename) {
				files = append(files, relFile(f.Filename))
			}
		}
		for _, imp := range i.Imports {
			visit(imp)
		}
	}
	for _, inst := range insts {
		visit(inst)
	}
	slices.Sort(files)
	return slices.Compact(files)
}

// relFile turns a loader file name (see loadConfig) into a repo-relative
// one.
func relFile(name string) string {
	if i := strings.Index(name, "/"+loadRootPrefix); i >= 0 {
		if j := strings.IndexByte(name[i+1:], '/'); j >= 0 {
			name = name[i+1+j+1:]
		} else {
			name = "."
		}
	}
	return strings.TrimPrefix(path.Clean(strings.TrimPrefix(name, "/")), "./")
}

// relMessage strips the loader's directory from the names in a message.
func relMessage(msg string) string {
	for {
		i := strings.Index(msg, "/"+loadRootPrefix)
		if i < 0 {
			return msg
		}
		start := strings.LastIndexAny(msg[:i], " \t\"'(") + 1
		end := i + 1 + len(loadRootPrefix)
		for end < len(msg) && msg[end] >= '0' && msg[end] <= '9' {
			end++
		}
		if end < len(msg) && msg[end] == '/' {
			end++
		}
		msg = msg[:start] + msg[end:]
	}
}

// cueErrors converts CUE errors. The primary position is the first one in
// the config's own files (its directory and ancestors), because that is the
// line its author can change; the others, such as the schema line a value
// violates, are named in the message. When CUE gives no position in the
// config's files (an incomplete value often has none), the error's path is
// looked up in root, the evaluated value, to find the field's line.
func (c *compilation) cueErrors(err error, cfg cuecast.ConfigPath, ownDirs []string, root cue.Value) []Error {
	list := cueerrors.Errors(err)
	var out []Error
	var conflicts []conflict
	for _, e := range list {
		var poss []token.Pos
		// The wrapper file is nobody's to edit; its positions would only
		// send readers looking for a file that does not exist.
		if p := e.Position(); p.IsValid() && !synthetic(p.Filename()) {
			poss = append(poss, p)
		}
		for _, p := range e.InputPositions() {
			if p.IsValid() && !synthetic(p.Filename()) {
				poss = append(poss, p)
			}
		}
		poss = dedupePos(poss)
		msg := relMessage(oneLine(e.Error()))
		// "N errors in empty disjunction:" only announces the errors that
		// follow it; on its own line it has no position and says nothing.
		if len(poss) == 0 && len(list) > 1 && strings.HasSuffix(msg, "errors in empty disjunction:") {
			continue
		}
		isOwn := func(p token.Pos) bool {
			return p.Filename() != "" && slices.Contains(ownDirs, path.Dir(relFile(p.Filename())))
		}
		primary := slices.IndexFunc(poss, isOwn)
		if primary < 0 && root.Exists() && len(e.Path()) > 0 {
			if p := root.LookupPath(cue.MakePath(selectors(e.Path())...)).Pos(); p.IsValid() && (isOwn(p) || len(poss) == 0) {
				poss = append([]token.Pos{p}, poss...)
				poss = dedupePos(poss)
				primary = 0
			}
		}
		if primary < 0 && len(poss) > 0 {
			primary = 0
		}
		if strings.Contains(msg, "incomplete value") && root.Exists() && len(e.Path()) > 0 {
			if d, ok := twoDefaults(root.LookupPath(cue.MakePath(selectors(e.Path())...)), isOwn); ok {
				d.Config = cfg
				d.Message = strings.Join(e.Path(), ".") + ": " + d.Message
				out = append(out, d)
				conflicts = append(conflicts, conflict{idx: len(out) - 1})
				continue
			}
		}
		out1 := Error{Config: cfg, ID: IDCue}
		if primary >= 0 {
			p := poss[primary]
			out1.File, out1.Line, out1.Column = relFile(p.Filename()), p.Line(), p.Column()
			// The loader sometimes repeats the position inside the text.
			msg = strings.ReplaceAll(msg, fmt.Sprintf("%s:%d:%d: ", out1.File, out1.Line, out1.Column), "")
			var others []string
			for i, q := range poss {
				if i != primary {
					others = append(others, fmt.Sprintf("%s:%d:%d", relFile(q.Filename()), q.Line(), q.Column()))
				}
			}
			if len(others) > 0 {
				msg += " (see " + strings.Join(others, ", ") + ")"
			}
			// A required field the config never sets has only the schema's
			// line; say where the fix goes.
			if cfg != "" && !isOwn(p) && strings.Contains(msg, "incomplete value") {
				msg += fmt.Sprintf("; %s must set it", cfg)
			}
		} else {
			out1.File = firstOr(c.tree.dirs[string(cfg)], manifestFile)
			out1.Line, out1.Column = 1, 1
		}
		for strings.Contains(msg, "import failed: import failed: ") {
			msg = strings.ReplaceAll(msg, "import failed: import failed: ", "import failed: ")
		}
		out1.Message = msg
		out = append(out, out1)
		cf := conflictOf(e, len(out)-1)
		if !cf.ok && !strings.Contains(msg, "errors in empty disjunction") {
			// Not a conflict: remembered by path for dropDisjunctFallout.
			cf.path = strings.Join(e.Path(), ".")
		}
		cf.own = len(poss) > 0 && !slices.ContainsFunc(poss, func(p token.Pos) bool { return !isOwn(p) })
		conflicts = append(conflicts, cf)
	}
	out, conflicts = dropDisjunctFallout(out, conflicts)
	return mergeDisjunctionErrors(out, conflicts)
}

// dropDisjunctFallout keeps the most specific of the conflicts CUE reports
// for one field. A field the config sets twice, where the schema allows
// several values, fails once per alternative of the schema's disjunction
// ("staging" and "prod", from the schema's side) as well as where the config
// contradicts itself ("dev" and "prod", both in the config's files): when a
// field has a conflict lying wholly in the config's own files, its other
// conflicts are only fallout and are left out.
//
// The same holds when the field has an error that is no conflict at all:
// a config narrowing a field (currency: =~"^[A-Z]{2}$") and setting a value
// the narrowing refuses ("EUR") gets "invalid value" for it, and the
// schema's enum, each alternative now eliminated, would add a misleading
// `"EUR" is none of "GBP", "USD"`.
func dropDisjunctFallout(out []Error, cs []conflict) ([]Error, []conflict) {
	ownPaths := make(map[string]bool)
	for _, c := range cs {
		if c.path != "" && (c.own || !c.ok) {
			ownPaths[c.path] = true
		}
	}
	if len(ownPaths) == 0 {
		return out, cs
	}
	var keptOut []Error
	var keptCs []conflict
	for i, e := range out {
		c := cs[i]
		if c.ok && !c.own && ownPaths[c.path] {
			continue
		}
		c.idx = len(keptOut)
		keptOut = append(keptOut, e)
		keptCs = append(keptCs, c)
	}
	return keptOut, keptCs
}

// conflict remembers the parts of a "conflicting values A and B" error, so
// that the one-error-per-alternative output CUE gives for a value outside an
// enum can be folded into one error.
type conflict struct {
	ok bool
	// own is set when every position of the error is in the config's own
	// files.
	own  bool
	path string
	a, b string
	idx  int
}

func conflictOf(e cueerrors.Error, idx int) conflict {
	format, args := e.Msg()
	if format != "conflicting values %s and %s" || len(args) != 2 {
		return conflict{}
	}
	return conflict{ok: true, path: strings.Join(e.Path(), "."), a: fmt.Sprint(args[0]), b: fmt.Sprint(args[1]), idx: idx}
}

// mergeDisjunctionErrors folds errors at the same position and path that
// all say "conflicting values X and V" for a common V into one:
// `level: "verbose" is none of "debug", "error", "info", "warn"`, naming
// every schema line the alternatives come from.
func mergeDisjunctionErrors(out []Error, cs []conflict) []Error {
	type key struct {
		file      string
		line, col int
		path      string
	}
	groups := make(map[key][]conflict)
	for _, c := range cs {
		if c.ok {
			e := out[c.idx]
			k := key{e.File, e.Line, e.Column, c.path}
			groups[k] = append(groups[k], c)
		}
	}
	drop := make(map[int]bool)
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		var common string
		for _, cand := range []string{g[0].a, g[0].b} {
			all := true
			for _, c := range g[1:] {
				all = all && (c.a == cand || c.b == cand)
			}
			if all {
				common = cand
				break
			}
		}
		if common == "" {
			continue
		}
		var others, see []string
		for _, c := range g {
			other := c.a
			if other == common {
				other = c.b
			}
			others = append(others, other)
			if _, after, ok := strings.Cut(out[c.idx].Message, " (see "); ok {
				see = append(see, strings.Split(strings.TrimSuffix(after, ")"), ", ")...)
			}
			drop[c.idx] = true
		}
		slices.Sort(others)
		slices.SortFunc(see, comparePos)
		msg := fmt.Sprintf("%s: %s is none of %s", g[0].path, common, strings.Join(slices.Compact(others), ", "))
		if len(see) > 0 {
			msg += " (see " + strings.Join(slices.Compact(see), ", ") + ")"
		}
		first := out[g[0].idx]
		first.Message = msg
		out[g[0].idx] = first
		delete(drop, g[0].idx)
	}
	if len(drop) == 0 {
		return out
	}
	kept := out[:0]
	for i, e := range out {
		if !drop[i] {
			kept = append(kept, e)
		}
	}
	return kept
}

// selectors turns an error path back into a cue.Path.
func selectors(p []string) []cue.Selector {
	sels := make([]cue.Selector, 0, len(p))
	for _, s := range p {
		if n, err := strconv.Atoi(s); err == nil {
			sels = append(sels, cue.Index(n))
			continue
		}
		if sp := cue.ParsePath(s); sp.Err() == nil && len(sp.Selectors()) == 1 {
			sels = append(sels, sp.Selectors()[0])
			continue
		}
		sels = append(sels, cue.Str(s))
	}
	return sels
}

func dedupePos(ps []token.Pos) []token.Pos {
	var out []token.Pos
	seen := make(map[string]bool)
	for _, p := range ps {
		k := fmt.Sprintf("%s:%d:%d", p.Filename(), p.Line(), p.Column())
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, p)
	}
	return out
}

// oneLine folds a multi-line CUE message ("...\n\tprevious declaration at
// ...") onto one line, the way compiler output is read and grepped.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// comparePos orders "file:line:col" strings by file, then numerically by
// line and column, so schemas/a.cue:7:9 comes before schemas/a.cue:19:9.
func comparePos(a, b string) int {
	split := func(s string) (string, int, int) {
		rest, c, _ := cutLast(s)
		file, l, _ := cutLast(rest)
		line, _ := strconv.Atoi(l)
		col, _ := strconv.Atoi(c)
		return file, line, col
	}
	fa, la, ca := split(a)
	fb, lb, cb := split(b)
	if c := strings.Compare(fa, fb); c != 0 {
		return c
	}
	if la != lb {
		return la - lb
	}
	return ca - cb
}

func cutLast(s string) (before, after string, found bool) {
	i := strings.LastIndexByte(s, ':')
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+1:], true
}

// twoDefaults explains a field left incomplete because two of its
// conjuncts each give it a different default (`*1 | int` & `*2 | int`):
// CUE unifies the defaults, they conflict, and the field has none; its own
// message ("incomplete value 1 | 2 | int") names neither place. The error
// is at the first place in the config's own files (isOwn) and names the
// others.
func twoDefaults(v cue.Value, isOwn func(token.Pos) bool) (Error, bool) {
	if !v.Exists() {
		return Error{}, false
	}
	if _, ok := v.Default(); ok {
		return Error{}, false
	}
	type def struct {
		val string
		pos token.Pos
	}
	var defs []def
	var walk func(cue.Value, int)
	walk = func(x cue.Value, depth int) {
		op, args := x.Expr()
		if op == cue.AndOp && depth < 8 {
			for _, a := range args {
				walk(a, depth+1)
			}
			return
		}
		if d, ok := x.Default(); ok && d.IsConcrete() {
			defs = append(defs, def{val: fmt.Sprint(d), pos: x.Pos()})
		}
	}
	walk(v, 0)
	distinct := make(map[string]bool)
	for _, d := range defs {
		distinct[d.val] = true
	}
	if len(distinct) < 2 {
		return Error{}, false
	}
	slices.SortStableFunc(defs, func(a, b def) int {
		switch {
		case isOwn(a.pos) && !isOwn(b.pos):
			return -1
		case isOwn(b.pos) && !isOwn(a.pos):
			return 1
		}
		return 0
	})
	var places []string
	for _, d := range defs {
		where := "an unknown place"
		if d.pos.IsValid() && !synthetic(d.pos.Filename()) {
			where = fmt.Sprintf("%s:%d:%d", relFile(d.pos.Filename()), d.pos.Line(), d.pos.Column())
		}
		places = append(places, fmt.Sprintf("*%s at %s", d.val, where))
	}
	e := Error{ID: IDDoubleDefault, Fix: fixFor(IDDoubleDefault), File: "", Line: 1, Column: 1,
		Message: fmt.Sprintf("two defaults meet (%s); CUE unifies defaults, they conflict, and the field is left with no value: only one layer may give a default", strings.Join(places, ", "))}
	if p := defs[0].pos; p.IsValid() && !synthetic(p.Filename()) {
		e.File, e.Line, e.Column = relFile(p.Filename()), p.Line(), p.Column()
	}
	return e, true
}
