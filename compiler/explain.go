package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/token"

	"github.com/cuecast/cuecast"
)

// Errors of Explain besides those of reading the repo. A caller maps each
// to its own exit code (cuecast explain: 2 for the first three, 3 for a
// *CompileError).
var (
	// ErrUnknownConfig: the repo has no config at the path asked for.
	ErrUnknownConfig = errors.New("no such config")
	// ErrUnknownPath: the compiled config has no field at ExplainOptions.Path.
	ErrUnknownPath = errors.New("no such path in the compiled config")
	// ErrUnknownVariant: ExplainOptions.Variant names no variant Compile
	// publishes for the config: the config has no variants, or it has
	// and the variant is none of them (or none was named).
	ErrUnknownVariant = errors.New("no such variant")
)

// CompileError is Explain's error for a config that does not compile: the
// errors Compile would report for it.
type CompileError struct {
	Config cuecast.ConfigPath
	Errors []Error
}

func (e *CompileError) Error() string {
	if len(e.Errors) == 0 {
		return fmt.Sprintf("config %s does not compile", e.Config)
	}
	return fmt.Sprintf("config %s does not compile: %s (and %d more)", e.Config, e.Errors[0], len(e.Errors)-1)
}

// ExplainOptions select what Explain explains.
type ExplainOptions struct {
	// Variant gives a value to each dimension the config uses
	// ({"env": "prod"}); empty for a config without variants.
	Variant map[string]string
	// Path limits the explanation to the subtree at this CUE path of the
	// compiled output ("server.port", `hosts[0]`, `labels."app.kubernetes.io/name"`);
	// empty means the whole output.
	Path string
	// FS, when set, is the repo (as Options.FS); otherwise repoDir is read.
	FS fs.FS
	// Timeout bounds the evaluation; default DefaultTimeout.
	Timeout time.Duration
	// Logger receives debug logs; default discards.
	Logger *slog.Logger
}

// Origin says where a value of the compiled output came from. The labels
// are stable: scripts read them from `cuecast explain --output json`.
type Origin string

const (
	// OriginLiteral: a concrete value written as such in a file
	// (port: 8080), possibly alongside constraints and an overridden
	// default elsewhere.
	OriginLiteral Origin = "literal"
	// OriginDefault: no file sets the value; it is the default (*value) of
	// a disjunction, such as a schema's replicas: *2 | int.
	OriginDefault Origin = "default"
	// OriginReference: the value is a reference to another field
	// (region: common.Region); Via names the fields followed and the
	// positions include where the value was finally set.
	OriginReference Origin = "reference"
	// OriginTag: the value was injected by a variant's dimension into a
	// field marked @tag(<dimension>); the positions are the @tag field's.
	OriginTag Origin = "tag"
	// OriginComputed: the value is the result of an expression
	// (arithmetic, interpolation, a builtin call, a comprehension); the
	// positions are the expression's and its operands'.
	OriginComputed Origin = "computed"
)

// Role says what a Position contributed to a value.
type Role string

const (
	// RoleValue: the position that decided the value (the literal, the
	// chosen default, the expression, the @tag field, the reference).
	RoleValue Role = "value"
	// RoleReference: a reference followed on the way to the position
	// that set the value, or through which an enclosing struct or list
	// was read (ledger: net.Internal.ledger).
	RoleReference Role = "reference"
	// RoleOperand: an operand of a computed value.
	RoleOperand Role = "operand"
	// RoleDefault: a default (*value) that the value overrode.
	RoleDefault Role = "default"
	// RoleConstraint: a conjunct that constrains the value without setting
	// it (a schema's int & >=1024, a disjunction of allowed values).
	RoleConstraint Role = "constraint"
)

// Position is one place a value came from; File is repo-relative.
type Position struct {
	File   string `json:"file"`
	Line   int    `json:"line"`
	Column int    `json:"column"`
	Role   Role   `json:"role"`
}

func (p Position) String() string { return fmt.Sprintf("%s:%d:%d", p.File, p.Line, p.Column) }

// String is the value on one line, as cuecast explain prints it:
// "path = value  origin[ via a, b (target)][ dim=value]  file:line:col, file:line:col (role), …";
// the role is named for every position but the deciding ones.
func (ev ExplainedValue) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s = %s  %s", ev.Path, string(ev.JSON), ev.Origin)
	if len(ev.Via) > 0 {
		fmt.Fprintf(&b, " via %s (%s)", strings.Join(ev.Via, ", "), ev.Target)
	}
	if ev.Tag != "" {
		fmt.Fprintf(&b, " %s", ev.Tag)
	}
	b.WriteString(" ")
	for i, p := range ev.Positions {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(" " + p.String())
		if p.Role != RoleValue {
			fmt.Fprintf(&b, " (%s)", p.Role)
		}
	}
	return b.String()
}

// ExplainedValue is one leaf of the compiled output: a scalar, or an empty
// struct or list.
type ExplainedValue struct {
	// Path is the CUE path of the leaf in the output (extra.region, hosts[0]).
	Path string `json:"path"`
	// JSON is the leaf's canonical JSON, as it appears in the output.
	JSON   json.RawMessage `json:"value"`
	Origin Origin          `json:"origin"`
	// Target is, for OriginReference, the origin of the value where the
	// chain of references ends (literal, default, tag or computed).
	Target Origin `json:"target,omitempty"`
	// Tag is "<dimension>=<value>" for a value injected by a variant,
	// whether directly (OriginTag) or at the end of a reference.
	Tag string `json:"tag,omitempty"`
	// Via lists the paths of the fields a reference was followed through,
	// nearest first, for OriginReference; fields of an imported package
	// are prefixed with its import path.
	Via []string `json:"via,omitempty"`
	// Positions are every position CUE gives for the value, the deciding
	// ones (RoleValue) first, each once.
	Positions []Position `json:"positions"`
}

// Explanation is the origin of every value of one compiled config.
type Explanation struct {
	Config  cuecast.ConfigPath `json:"config"`
	Variant map[string]string  `json:"variant,omitempty"`
	Path    string             `json:"path,omitempty"`
	// JSON is the compiled output (canonical), as Compile gives it.
	JSON   json.RawMessage  `json:"output"`
	Values []ExplainedValue `json:"values"`
}

// Explain compiles one config, with the variant's dimension values injected,
// exactly as Compile does (same module, files, namespace schema and lints),
// and explains each leaf of its output (or of the subtree at opts.Path).
// cfg may be a variant path (payments/checkout/env=prod), which names the
// variant as opts.Variant does. Explain plans the config with Compile's own
// plan step and evaluates the very job Compile publishes at the variant's
// path: every variant Compile publishes is explained and no other, and only
// the @tag fields of the namespace's dimensions in the config's own package
// are tags (cue injects into no other).
//
// Errors: ErrNoModule, ErrUnknownConfig, ErrUnknownVariant, ErrUnknownPath
// (wrapped), *CompileError when the config does not compile, ctx.Err() when
// cancelled, and I/O errors reading the repo.
func Explain(ctx context.Context, repoDir string, cfg cuecast.ConfigPath, opts ExplainOptions) (*Explanation, error) {
	var ex *Explanation
	err := ExplainEach(ctx, repoDir, []cuecast.ConfigPath{cfg}, opts, func(_ cuecast.ConfigPath, e *Explanation, err error) error {
		ex = e
		return err
	})
	if err != nil {
		return nil, err
	}
	return ex, nil
}

// ExplainEach explains each of cfgs as Explain does, with opts (its
// Variant and Path apply to every config), and calls f, in the order of
// cfgs, with the config and its explanation or its error (one of those
// Explain returns for that config alone). It plans all of them at once,
// as one Compile of them does: the module, the manifest and the namespace
// schemas are read and loaded once for every config, which is what a
// caller explaining several configs of one revision (the PR check) wants.
//
// The error is f's, which stops ExplainEach, or one that keeps every
// config from being explained: ErrNoModule, ctx.Err() when cancelled, or
// an I/O error reading the repo.
func ExplainEach(ctx context.Context, repoDir string, cfgs []cuecast.ConfigPath, opts ExplainOptions, f func(cuecast.ConfigPath, *Explanation, error) error) (err error) {
	var cur cuecast.ConfigPath
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("explain %s: internal error: %v", cur, p)
		}
	}()
	opts = opts.withDefaults()
	var path cue.Path
	var pathErr error
	if opts.Path != "" {
		path = cue.ParsePath(opts.Path)
		pathErr = path.Err()
	}
	type target struct {
		cfg     cuecast.ConfigPath
		variant map[string]string
		err     error
	}
	targets := make([]target, len(cfgs))
	var bases []cuecast.ConfigPath
	for i, cfg := range cfgs {
		t := target{cfg: cfg, variant: opts.Variant}
		switch {
		case pathErr != nil:
			t.err = fmt.Errorf("explain %s: path %q: %w: %v", cfg, opts.Path, ErrUnknownPath, pathErr)
		default:
			if t.cfg, t.variant, t.err = variantOf(cfg, opts.Variant); t.err == nil {
				bases = append(bases, t.cfg)
			}
		}
		targets[i] = t
	}
	// The plans are made when first needed: the scoped one (see scopeFor)
	// for every config, the whole repo's for a config that fails in the
	// scoped one.
	var scoped, whole *explainPlan
	defer func() {
		for _, x := range []*explainPlan{scoped, whole} {
			if x != nil {
				x.cleanup()
			}
		}
	}()
	for i, t := range targets {
		cur = cfgs[i]
		if t.err != nil {
			if err := f(cfgs[i], nil, t.err); err != nil {
				return err
			}
			continue
		}
		cur = t.cfg
		vopts := opts
		vopts.Variant = t.variant
		if scoped == nil {
			if scoped, err = newExplainPlan(ctx, repoDir, bases, opts, true); err != nil {
				return err
			}
		}
		ex, eerr := scoped.explain(ctx, t.cfg, path, vopts)
		var ce *CompileError
		if errors.As(eerr, &ce) || errors.Is(eerr, ErrUnknownConfig) {
			// The scoped walk (scopeFor) should never change the answer;
			// a config that fails there is explained over the whole repo, so
			// that a mistake in the scope costs time, not correctness.
			if whole == nil {
				if whole, err = newExplainPlan(ctx, repoDir, bases, opts, false); err != nil {
					return err
				}
			}
			ex, eerr = whole.explain(ctx, t.cfg, path, vopts)
		}
		if err := f(cfgs[i], ex, eerr); err != nil {
			return err
		}
	}
	return nil
}

func (o ExplainOptions) withDefaults() ExplainOptions {
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o
}

// variantOf splits a variant path (a check's changed row, `explain
// x/y/env=prod`), which names the config and its variant at once, into
// the config and the variant, merged with variant; any other cfg is
// returned with variant as it is.
func variantOf(cfg cuecast.ConfigPath, variant map[string]string) (cuecast.ConfigPath, map[string]string, error) {
	if !cfg.IsVariant() {
		return cfg, variant, nil
	}
	vals := make(map[string]string, len(variant))
	for k, v := range variant {
		vals[k] = v
	}
	for _, dv := range cfg.Variant() {
		if v, ok := vals[dv.Dim]; ok && v != dv.Value {
			return cfg, nil, fmt.Errorf("explain %s: %w: the path says %s=%s, the options %s=%s", cfg, ErrUnknownVariant, dv.Dim, dv.Value, dv.Dim, v)
		}
		vals[dv.Dim] = dv.Value
	}
	return cfg.Base(), vals, nil
}

// explainPlan is a compilation of the configs to explain, planned
// (compilation.plan) once for all of them.
type explainPlan struct {
	c       *compilation
	p       *plan
	cleanup func()
}

// newExplainPlan prepares and plans a compilation as Compile does, limited
// to cfgs, over the union of their scopes when scoped.
func newExplainPlan(ctx context.Context, repoDir string, cfgs []cuecast.ConfigPath, opts ExplainOptions, scoped bool) (*explainPlan, error) {
	c, cleanup, err := newExplainCompilation(ctx, repoDir, cfgs, opts, scoped)
	if err != nil {
		return nil, err
	}
	p, err := c.plan(ctx)
	if err != nil {
		cleanup()
		return nil, err
	}
	return &explainPlan{c: c, p: p, cleanup: cleanup}, nil
}

// explain explains cfg (a config, not a variant path) with the variant
// opts.Variant, at path (parsed from opts.Path).
func (xp *explainPlan) explain(ctx context.Context, cfg cuecast.ConfigPath, path cue.Path, opts ExplainOptions) (*Explanation, error) {
	c := xp.c
	j, err := c.explainJob(cfg, xp.p, opts.Variant)
	if err != nil {
		return nil, err
	}
	type evaluated struct {
		r jobResult
		v cue.Value
	}
	e, err := bounded(ctx, opts.Timeout, func() evaluated {
		wc := &workerContext{cue: cuecontext.New(), schemas: make(map[*nsSchema]cue.Value)}
		r := c.eval(wc, j)
		if r.out == nil {
			return evaluated{r: r}
		}
		// eval built the instance; BuildInstance returns it from the
		// context's cache.
		var v cue.Value
		if j.wrap != nil {
			v = wc.cue.BuildInstance(j.wrap)
		} else {
			v = wc.cue.BuildInstance(j.inst)
			if j.schema.inst != nil {
				v = v.Unify(wc.schemas[j.schema])
			}
		}
		return evaluated{r: r, v: v}
	})
	switch {
	case errors.Is(err, errTimeout):
		return nil, &CompileError{Config: cfg, Errors: []Error{c.timeoutError(j)}}
	case err != nil:
		return nil, fmt.Errorf("explain %s: %w", cfg, err)
	}
	if e.r.out == nil {
		// The plan serves other configs too: its errors are copied, not
		// appended to.
		return nil, &CompileError{Config: cfg, Errors: sortErrors(slices.Concat(c.errs, e.r.errs))}
	}
	ex := &Explanation{Config: cfg, Variant: opts.Variant, Path: opts.Path, JSON: e.r.out.JSON}
	root := e.v
	var prefix []cue.Selector
	if opts.Path != "" {
		prefix = path.Selectors()
		for _, s := range prefix {
			if s.Type() != cue.StringLabel && s.Type() != cue.IndexLabel {
				return nil, fmt.Errorf("explain %s: %q: %w (%s is not a regular field)", cfg, opts.Path, ErrUnknownPath, s)
			}
		}
		root = root.LookupPath(path)
		if !root.Exists() {
			return nil, fmt.Errorf("explain %s: %q: %w", cfg, opts.Path, ErrUnknownPath)
		}
	}
	x := &explainer{variant: opts.Variant, pkg: c.modPath + "/" + string(cfg), tagAt: make(map[string]string)}
	for _, t := range j.injects {
		if p, ok := position(t.value, RoleValue); ok {
			x.tagAt[p.String()] = t.name
		}
	}
	// A value below PATH was read through the references of the structs
	// and lists enclosing PATH, as it is when the walk starts at the top.
	var through []Position
	for i := 1; i < len(prefix); i++ {
		through = readThrough(e.v.LookupPath(cue.MakePath(prefix[:i]...)), through)
	}
	if err := x.walk(root, prefix, through, func(ev ExplainedValue) { ex.Values = append(ex.Values, ev) }); err != nil {
		return nil, fmt.Errorf("explain %s: %w", cfg, err)
	}
	return ex, nil
}

// newExplainCompilation prepares a compilation as Compile does, limited to
// cfgs, and when scoped to what they can read (scopeForAll).
func newExplainCompilation(ctx context.Context, repoDir string, cfgs []cuecast.ConfigPath, opts ExplainOptions, scoped bool) (*compilation, func(), error) {
	copts := Options{Configs: cfgs, FS: opts.FS, Workers: 1, Timeout: opts.Timeout, Logger: opts.Logger}
	var view func(fs.FS) fs.FS
	if scoped {
		view = func(fsys fs.FS) fs.FS {
			if sfs, ok := scopeForAll(fsys, cfgs); ok {
				return sfs
			}
			return fsys
		}
	}
	return startCompilation(ctx, repoDir, "explain", copts, view)
}

// explainJob returns, loaded, the job of plan p (Compile's plan of cfg)
// that Compile evaluates for the variant: the one published at
// cuecast.VariantPath(cfg, variant), with its tags, wrapper and schema.
func (c *compilation) explainJob(cfg cuecast.ConfigPath, p *plan, variant map[string]string) (job, error) {
	fail := func() (job, error) {
		return job{}, &CompileError{Config: cfg, Errors: sortErrors(slices.Clone(c.errs))}
	}
	if p.man == nil {
		return fail()
	}
	if _, ok := p.man.Namespaces[cfg.Namespace()]; !ok {
		return job{}, fmt.Errorf("explain %s: %w (namespace %q is not declared in cuecast.cue)", cfg, ErrUnknownConfig, cfg.Namespace())
	}
	if _, found := slices.BinarySearch(c.res.Configs, cfg); !found {
		return job{}, fmt.Errorf("explain %s: %w", cfg, ErrUnknownConfig)
	}
	for _, dim := range slices.Sorted(maps.Keys(variant)) {
		if !cuecast.ValidSegment(dim) || !cuecast.ValidSegment(variant[dim]) {
			return job{}, fmt.Errorf("explain %s: %w: %s=%s (names and values match [a-z0-9][a-z0-9_-]*)", cfg, ErrUnknownVariant, dim, variant[dim])
		}
	}
	want := cuecast.VariantPath(cfg, variant)
	var labels []string
	for _, j := range p.jobs {
		if j.cfg != cfg {
			continue
		}
		if j.out == want {
			return j, c.loadExplainJob(&j)
		}
		if j.out != cfg {
			labels = append(labels, j.out.VariantLabel())
		}
	}
	switch {
	case len(labels) > 0 && len(variant) == 0:
		return job{}, fmt.Errorf("explain %s: %w: the config has variants; name one with --variant: %s",
			cfg, ErrUnknownVariant, strings.Join(labels, "; "))
	case len(labels) > 0:
		return job{}, fmt.Errorf("explain %s: %w: %s is not one of its variants (%s)", cfg, ErrUnknownVariant, want.VariantLabel(), strings.Join(labels, "; "))
	case c.variants[cfg] == nil && slices.ContainsFunc(p.jobs, func(j job) bool { return j.cfg == cfg }):
		return job{}, fmt.Errorf("explain %s: %w: the config has no variants (it reads no value of a dimension of namespace %s)", cfg, ErrUnknownVariant, cfg.Namespace())
	}
	return fail()
}

// loadExplainJob loads j's packages as runJobs does, in a batch of one.
func (c *compilation) loadExplainJob(j *job) error {
	insts, err := c.loadBatch([]job{*j})
	if err != nil {
		return err
	}
	j.inst, j.wrap = insts[0], insts[1]
	return nil
}

// explainer finds the origin of values.
type explainer struct {
	variant map[string]string
	// pkg is the import path of the config's package; references into
	// it are named by their path alone.
	pkg string
	// tagAt maps the positions ("file:line:col") of the values of the
	// @tag fields the variant injects into (job.injects) to their
	// dimension. Only these are tags: cue injects into nothing else, not
	// an @tag that is no dimension, nor one in an imported package.
	tagAt map[string]string
}

// walk calls f for each leaf below v in the order of the canonical output
// (sorted keys), as encodeCanonical visits them; through are the
// references to enclosing structs and lists on the way.
func (x *explainer) walk(v cue.Value, at []cue.Selector, through []Position, f func(ExplainedValue)) error {
	d := v
	if dv, ok := v.Default(); ok {
		d = dv
	}
	if k := d.Kind(); len(at) > 0 && (k == cue.StructKind || k == cue.ListKind) {
		through = readThrough(v, through)
	}
	switch d.Kind() {
	case cue.StructKind:
		it, err := d.Fields()
		if err != nil {
			return err
		}
		type field struct {
			sel cue.Selector
			v   cue.Value
		}
		var fs []field
		for it.Next() {
			fs = append(fs, field{it.Selector(), it.Value()})
		}
		if len(fs) > 0 {
			slices.SortFunc(fs, func(a, b field) int { return strings.Compare(a.sel.Unquoted(), b.sel.Unquoted()) })
			for _, fl := range fs {
				if err := x.walk(fl.v, append(slices.Clip(at), fl.sel), through, f); err != nil {
					return err
				}
			}
			return nil
		}
	case cue.ListKind:
		it, err := d.List()
		if err != nil {
			return err
		}
		n := 0
		for ; it.Next(); n++ {
			if err := x.walk(it.Value(), append(slices.Clip(at), cue.Index(n)), through, f); err != nil {
				return err
			}
		}
		if n > 0 {
			return nil
		}
	}
	b, err := encodeCanonical(d, nil, nil)
	if err != nil {
		return err
	}
	ev := x.explain(v, through)
	ev.Path = cue.MakePath(at...).String()
	ev.JSON = b
	f(ev)
	return nil
}

// readThrough adds to through the references v, a struct or list, is
// read through (ledger: net.Internal.ledger, service: svc.#Defaults &
// {...}): its values keep the positions where they are written, and the
// reference is how they got here.
func readThrough(v cue.Value, through []Position) []Position {
	for _, c := range valueConjuncts(v) {
		if isReference(c) {
			if p, ok := position(valuePos(c), RoleReference); ok {
				through = append(slices.Clip(through), p)
			}
		}
	}
	return through
}

// explain labels one value and collects its positions.
func (x *explainer) explain(v cue.Value, through []Position) ExplainedValue {
	a := x.analyze(v, 0)
	ev := ExplainedValue{Origin: a.origin, Target: a.target, Tag: a.tag, Via: a.via}
	seen := make(map[string]bool)
	add := func(ps []Position) {
		for _, p := range ps {
			k := p.String()
			if seen[k] {
				continue
			}
			seen[k] = true
			ev.Positions = append(ev.Positions, p)
		}
	}
	add(a.value)
	add(a.rest)
	add(through)
	if ev.Positions == nil {
		ev.Positions = []Position{}
	}
	return ev
}

// analysis is the origin of a value: value holds the deciding positions,
// rest the others.
type analysis struct {
	origin Origin
	target Origin
	tag    string
	via    []string
	value  []Position
	rest   []Position
}

// maxRefDepth bounds how many references and nested expressions explain
// follows.
const maxRefDepth = 16

// analyze splits v into its conjuncts and decides which one set it: a tag
// injection, else a literal, else a reference, else an expression, else a
// default.
func (x *explainer) analyze(v cue.Value, depth int) analysis {
	var (
		tagField, literal, computed []Position
		operands, defaults          []Position
		overridden, constraints     []Position
		refs, typeRefs              []cue.Value
	)
	tag := ""
	for _, c := range valueConjuncts(v) {
		if p, ok := position(valuePos(c), RoleValue); ok {
			if dim, ok := x.tagAt[p.String()]; ok {
				tag = dim + "=" + x.variant[dim]
			}
		}
	}
	for _, c := range valueConjuncts(v) {
		pos, ok := position(valuePos(c), RoleValue)
		op, args := c.Expr()
		_, isDefault := c.Default()
		switch {
		case !ok && c.IsConcrete() && op == cue.NoOp && !isDefault:
			// An injected tag value has no position; nor has anything
			// else worth naming.
		case tag != "" && ok && x.tagAt[pos.String()] != "":
			tagField = append(tagField, pos)
			if d, isDef := c.Default(); isDef && d.IsConcrete() {
				// The @tag field's own default (*"staging" | "prod"),
				// which the injected value replaced.
				overridden = append(overridden, withRole(defaultPositions(c), RoleDefault)...)
			}
		case isReference(c):
			if x.decides(c) {
				refs = append(refs, c)
			} else {
				typeRefs = append(typeRefs, c)
			}
		case isDefault || op == cue.OrOp:
			if d, isDef := c.Default(); isDef && d.IsConcrete() {
				ps := defaultPositions(c)
				defaults = append(defaults, ps...)
				overridden = append(overridden, withRole(ps, RoleDefault)...)
				if depth < maxRefDepth {
					// A default that is itself an expression or a
					// reference (*table[env] | int): where its inputs
					// were set.
					if da := x.analyze(d, depth+1); da.origin == OriginComputed || da.origin == OriginReference {
						operands = append(operands, withRole(da.value, RoleOperand)...)
						for _, p := range da.rest {
							if p.Role == RoleOperand || p.Role == RoleReference {
								operands = append(operands, p)
							}
						}
					}
				}
			}
			if ok {
				constraints = append(constraints, withRole([]Position{pos}, RoleConstraint)...)
			}
		case c.IsConcrete() && op == cue.NoOp:
			literal = append(literal, pos)
		case c.IsConcrete() || isComputed(op):
			if ok {
				computed = append(computed, pos)
			}
			operands = append(operands, x.operandPositions(args, depth)...)
		default:
			if ok {
				constraints = append(constraints, withRole([]Position{pos}, RoleConstraint)...)
			}
		}
	}
	rest := func(more ...[]Position) []Position {
		var out []Position
		for _, m := range more {
			out = append(out, m...)
		}
		return append(append(append(out, overridden...), constraints...), x.otherRefs(typeRefs, depth)...)
	}
	switch {
	case tag != "":
		return analysis{origin: OriginTag, tag: tag, value: tagField,
			rest: rest(literal, withRole(computed, RoleConstraint), operands, x.otherRefs(refs, depth))}
	case len(literal) > 0:
		return analysis{origin: OriginLiteral, value: literal,
			rest: rest(withRole(computed, RoleConstraint), operands, x.otherRefs(refs, depth))}
	case len(refs) > 0 && depth < maxRefDepth:
		if a, ok := x.reference(refs, depth); ok {
			a.rest = append(a.rest, rest(computed, operands)...)
			return a
		}
	}
	switch {
	case len(computed) > 0 || len(refs) > 0:
		// A reference CUE cannot resolve to a field (a comprehension's
		// variable, a let) is part of the expression that holds it.
		for _, r := range refs {
			if p, ok := position(valuePos(r), RoleValue); ok {
				computed = append(computed, p)
			}
		}
		return analysis{origin: OriginComputed, value: computed, rest: rest(operands)}
	case len(defaults) > 0:
		return analysis{origin: OriginDefault, value: defaults, rest: append(append(operands, constraints...), x.otherRefs(typeRefs, depth)...)}
	}
	return analysis{origin: OriginComputed, rest: rest()}
}

// target resolves a reference to the field it names, with the name to show
// for it: its path, prefixed by its package's import path when that is not
// the package of the value explained.
func (x *explainer) target(r cue.Value) (cue.Value, string, bool) {
	root, p := r.ReferencePath()
	if len(p.Selectors()) == 0 || p.Err() != nil {
		return cue.Value{}, "", false
	}
	t := root.LookupPath(p)
	if !t.Exists() {
		return cue.Value{}, "", false
	}
	name := p.String()
	if inst := root.BuildInstance(); inst != nil && inst.ImportPath != "" {
		imp := inst.ImportPath
		if i := strings.LastIndexByte(imp, '@'); i >= 0 {
			imp = imp[:i]
		}
		imp, _, _ = strings.Cut(imp, ":")
		if imp != x.pkg {
			name = imp + "." + name
		}
	}
	return t, name, true
}

// decides reports whether a reference can have set a value: it names a
// concrete value (after defaults), or CUE cannot resolve it to a field (a
// comprehension's variable). A reference to a type (port: #Port) only
// constrains.
func (x *explainer) decides(r cue.Value) bool {
	t, _, ok := x.target(r)
	if !ok {
		return true
	}
	if d, ok := t.Default(); ok {
		t = d
	}
	return t.IsConcrete()
}

// reference follows the first of refs that resolves and reports the
// origin of the value found there, with the other references' positions.
func (x *explainer) reference(refs []cue.Value, depth int) (analysis, bool) {
	for i, r := range refs {
		t, name, ok := x.target(r)
		if !ok {
			continue
		}
		an := x.analyze(t, depth+1)
		out := analysis{origin: OriginReference, target: an.origin, tag: an.tag,
			via: append([]string{name}, an.via...), value: an.value}
		if an.origin == OriginReference {
			out.target = an.target
		}
		if p, ok := position(valuePos(r), RoleReference); ok {
			out.rest = append(out.rest, p)
		}
		out.rest = append(out.rest, an.rest...)
		out.rest = append(out.rest, x.otherRefs(slices.Delete(slices.Clone(refs), i, i+1), depth)...)
		return out, true
	}
	return analysis{}, false
}

// otherRefs returns the positions of references that did not decide a
// value: each reference, as a constraint, and where the field it names
// was set (a default it offered is one the value overrode).
func (x *explainer) otherRefs(refs []cue.Value, depth int) []Position {
	var out []Position
	for _, r := range refs {
		if p, ok := position(valuePos(r), RoleConstraint); ok {
			out = append(out, p)
		}
		if depth >= maxRefDepth {
			continue
		}
		if t, _, ok := x.target(r); ok {
			an := x.analyze(t, depth+1)
			role := RoleConstraint
			if an.origin == OriginDefault || an.target == OriginDefault {
				role = RoleDefault
			}
			out = append(out, withRole(an.value, role)...)
			for _, p := range an.rest {
				if p.Role == RoleValue || p.Role == RoleOperand {
					p.Role = RoleConstraint
				}
				out = append(out, p)
			}
		}
	}
	return out
}

// operandPositions returns the positions of an expression's references,
// of the values they name, and of its nested expressions, recursively;
// literal operands are part of the expression and not listed.
func (x *explainer) operandPositions(args []cue.Value, depth int) []Position {
	if depth >= maxRefDepth {
		return nil
	}
	var out []Position
	for _, a := range args {
		if isReference(a) {
			if p, ok := position(valuePos(a), RoleOperand); ok {
				out = append(out, p)
			}
			if t, _, ok := x.target(a); ok {
				out = append(out, withRole(x.analyze(t, depth+1).value, RoleOperand)...)
			}
			continue
		}
		if op, sub := a.Expr(); op != cue.NoOp && len(sub) > 0 {
			out = append(out, x.operandPositions(sub, depth+1)...)
		}
	}
	return out
}

// valueConjuncts returns the conjuncts of v, with any unification (a & b)
// split into its parts.
func valueConjuncts(v cue.Value) []cue.Value {
	op, args := v.Expr()
	if op != cue.AndOp {
		return []cue.Value{v}
	}
	var out []cue.Value
	for _, a := range args {
		out = append(out, valueConjuncts(a)...)
	}
	return out
}

func isReference(v cue.Value) bool {
	_, p := v.ReferencePath()
	if len(p.Selectors()) > 0 {
		return true
	}
	op, _ := v.Expr()
	return op == cue.SelectorOp
}

func isComputed(op cue.Op) bool {
	switch op {
	case cue.AddOp, cue.SubtractOp, cue.MultiplyOp, cue.FloatQuotientOp,
		cue.InterpolationOp, cue.CallOp, cue.IndexOp, cue.SliceOp,
		cue.BooleanAndOp, cue.BooleanOrOp, cue.NotOp:
		return true
	}
	return false
}

// defaultPositions returns the positions of the marked defaults
// (*value) of a disjunction, or the disjunction's own when its source is
// not at hand.
func defaultPositions(v cue.Value) []Position {
	var out []Position
	if src := v.Source(); src != nil {
		ast.Walk(src, func(n ast.Node) bool {
			if u, ok := n.(*ast.UnaryExpr); ok && u.Op == token.MUL {
				if p, ok := position(u.X.Pos(), RoleValue); ok {
					out = append(out, p)
				}
				return false
			}
			return true
		}, nil)
	}
	if len(out) == 0 {
		if p, ok := position(v.Pos(), RoleValue); ok {
			out = append(out, p)
		}
	}
	return out
}

// valuePos is where a conjunct's value starts: for a field, its value
// rather than its label.
func valuePos(v cue.Value) token.Pos {
	if f, ok := v.Source().(*ast.Field); ok && f.Value != nil {
		return f.Value.Pos()
	}
	return v.Pos()
}

func withRole(ps []Position, r Role) []Position {
	out := make([]Position, len(ps))
	for i, p := range ps {
		p.Role = r
		out[i] = p
	}
	return out
}

// position converts a CUE position, dropping those of the wrapper package
// (nobody's file) and those without a file.
func position(p token.Pos, r Role) (Position, bool) {
	if !p.IsValid() || p.Filename() == "" || synthetic(p.Filename()) {
		return Position{}, false
	}
	return Position{File: relFile(p.Filename()), Line: p.Line(), Column: p.Column(), Role: r}, true
}
