package compiler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/load"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/schemas"
)

// manifestFile is where the manifest lives. Every .cue file in the repo root
// belongs to the manifest package; configs live in namespace directories.
const manifestFile = "cuecast.cue"

// DefaultMaxSize caps a compiled config of a namespace that sets no
// max_size: 1 MiB.
const DefaultMaxSize = 1 << 20

// manifestJSON mirrors #Manifest in schemas/manifest.cue.
type manifestJSON struct {
	Namespaces map[string]struct {
		Name        string              `json:"name"`
		Owners      []string            `json:"owners"`
		Schema      string              `json:"schema"`
		Consistency cuecast.Consistency `json:"consistency"`
		MaxSize     int64               `json:"max_size"`
		Rollout     cuecast.Policy      `json:"rollout"`
		ImportFrom  []string            `json:"import_configs_from"`
		Dimensions  map[string][]string `json:"dimensions"`
		Combos      []map[string]string `json:"combinations"`
		Changes     ChangePolicy        `json:"changes"`
		Configs     map[string]struct {
			Consistency cuecast.Consistency `json:"consistency"`
			Rollout     cuecast.Policy      `json:"rollout"`
		} `json:"configs"`
	} `json:"namespaces"`
}

// loadManifest validates the root package against the shipped #Manifest. It
// returns nil when the manifest is missing or invalid (the errors say why),
// and the position of each namespace's schema field for later errors.
func (c *compilation) loadManifest(ctx context.Context) (*Manifest, map[string]Error) {
	files := c.tree.dirs["."]
	if len(files) == 0 {
		c.errs = append(c.errs, Error{File: manifestFile, Line: 1, Column: 1, ID: IDManifestMissing,
			Message: "the repo has no " + manifestFile + " manifest", Fix: fixFor(IDManifestMissing)})
		return nil, nil
	}
	if err := c.readDir("."); err != nil {
		// readDir only fails on I/O; the manifest is then unreadable too.
		c.errs = append(c.errs, Error{File: manifestFile, Line: 1, Column: 1, ID: IDCue, Message: err.Error()})
		return nil, nil
	}
	for _, f := range files {
		if c.tree.bad[f] {
			return nil, nil
		}
	}
	insts := load.Instances([]string{"."}, c.loadConfig())
	// The manifest is CUE too and can be made to evaluate forever; it gets
	// the same time limit as a config. evalManifest touches nothing of c
	// but read-only state, so an abandoned run cannot race with the rest.
	type result struct {
		man  *Manifest
		pos  map[string]Error
		errs []Error
	}
	r, err := bounded(ctx, c.opts.shared(), func() result {
		var r result
		r.man, r.pos, r.errs = c.evalManifest(insts[0], files)
		return r
	})
	switch {
	case errors.Is(err, errTimeout):
		c.errs = append(c.errs, Error{File: files[0], Line: 1, Column: 1, ID: IDConfigTimeout,
			Message: fmt.Sprintf("manifest evaluation did not finish within %s", c.opts.shared()), Fix: fixFor(IDConfigTimeout)})
		return nil, nil
	case err != nil && ctx.Err() != nil:
		return nil, nil // the caller reports the cancellation
	case err != nil:
		c.errs = append(c.errs, Error{File: files[0], Line: 1, Column: 1, ID: IDCue, Message: err.Error()})
		return nil, nil
	}
	c.errs = append(c.errs, r.errs...)
	return r.man, r.pos
}

// evalManifest evaluates the manifest package and decodes it.
func (c *compilation) evalManifest(inst *build.Instance, files []string) (*Manifest, map[string]Error, []Error) {
	var errs []Error
	ctx := cuecontext.New()
	v := ctx.BuildInstance(inst)
	if err := v.Err(); err != nil {
		errs = append(errs, c.cueErrors(err, "", []string{"."}, v)...)
		return nil, nil, errs
	}
	schema := ctx.CompileBytes(schemas.Files()["manifest.cue"], cue.Filename("cuecast:schemas/manifest.cue"))
	if err := schema.Err(); err != nil {
		// The shipped schema is compiled into the binary and tested.
		panic("compiler: shipped manifest schema does not compile: " + err.Error())
	}
	m := v.Unify(schema.LookupPath(cue.ParsePath("#Manifest")))
	if err := m.Validate(cue.Concrete(true)); err != nil {
		errs = append(errs, c.cueErrors(err, "", []string{"."}, m)...)
		return nil, nil, errs
	}
	b, err := encodeCanonical(m, nil, nil)
	if err != nil {
		errs = append(errs, c.cueErrors(err, "", []string{"."}, m)...)
		return nil, nil, errs
	}
	var mj manifestJSON
	if err := json.Unmarshal(b, &mj); err != nil {
		errs = append(errs, Error{File: files[0], Line: 1, Column: 1, ID: IDCue,
			Message: fmt.Sprintf("decode manifest: %v", err)})
		return nil, nil, errs
	}
	man := &Manifest{Namespaces: make(map[string]Namespace, len(mj.Namespaces)), metricPos: map[metricField]Error{}}
	schemaPos := make(map[string]Error, len(mj.Namespaces))
	for name, ns := range mj.Namespaces {
		// Defaults live here rather than in the CUE schema: a default there
		// is a disjunction, and a typo against a disjunction gives one
		// error per branch instead of one clear error.
		pol := ns.Rollout
		if len(pol.Stages) == 0 {
			pol = cuecast.DefaultPolicy()
		}
		cons := ns.Consistency
		if cons == "" {
			cons = cuecast.Relaxed
		}
		size := ns.MaxSize
		if size == 0 {
			size = DefaultMaxSize
		}
		man.Namespaces[name] = Namespace{
			Name: name, Owners: ns.Owners, Schema: ns.Schema, Consistency: cons,
			Policy: pol, MaxSize: size, ImportConfigsFrom: ns.ImportFrom,
			Dimensions: ns.Dimensions, Combinations: ns.Combos, Changes: ns.Changes,
		}
		errs = append(errs, checkDimensions(m, name, ns.Dimensions, ns.Combos, files[0])...)
		errs = append(errs, checkAnalysis(m, []cue.Selector{cue.Str("namespaces"), cue.Str(name), cue.Str("rollout")}, ns.Rollout, files[0],
			metricField{ns: name}, man.metricPos)...)
		for cfg, o := range ns.Configs {
			n := man.Namespaces[name]
			if n.Configs == nil {
				n.Configs = make(map[string]ConfigOverride, len(ns.Configs))
			}
			n.Configs[cfg] = ConfigOverride{Consistency: o.Consistency, Policy: o.Rollout}
			errs = append(errs, checkAnalysis(m, []cue.Selector{cue.Str("namespaces"), cue.Str(name), cue.Str("configs"), cue.Str(cfg), cue.Str("rollout")}, o.Rollout, files[0],
				metricField{ns: name, override: cfg}, man.metricPos)...)
			man.Namespaces[name] = n
		}
		at := m.LookupPath(cue.MakePath(cue.Str("namespaces"), cue.Str(name), cue.Str("schema")))
		if !at.Exists() {
			at = m.LookupPath(cue.MakePath(cue.Str("namespaces"), cue.Str(name)))
		}
		schemaPos[name] = positionError(at, files[0])
	}
	return man, schemaPos, errs
}

// Policy returns the rollout policy and consistency class of config cfg: its
// own override (configs: in its namespace's entry) where it sets one, else
// its namespace's; a config of an undeclared namespace gets
// cuecast.DefaultPolicy and relaxed.
//
// A variant path (payments/checkout/env=prod) is looked up by its Base().
func (m *Manifest) Policy(cfg cuecast.ConfigPath) (cuecast.Policy, cuecast.Consistency) {
	cfg = cfg.Base()
	ns, ok := m.Namespaces[cfg.Namespace()]
	if !ok {
		return cuecast.DefaultPolicy(), cuecast.Relaxed
	}
	pol, cons := ns.Policy, ns.Consistency
	if o, ok := ns.Configs[cfg.Name()]; ok {
		if len(o.Policy.Stages) > 0 {
			pol = o.Policy
		}
		if o.Consistency != "" {
			cons = o.Consistency
		}
	}
	return pol, cons
}

// positionError is an Error located at v's source position, or at fallback
// line 1 when v has none.
func positionError(v cue.Value, fallback string) Error {
	p := v.Pos()
	if !p.IsValid() || p.Filename() == "" {
		return Error{File: fallback, Line: 1, Column: 1}
	}
	return Error{File: relFile(p.Filename()), Line: p.Line(), Column: p.Column()}
}

// splitSchema splits "<import path>#<Definition>".
func splitSchema(s string) (imp, def string, ok bool) {
	i := strings.LastIndexByte(s, '#')
	if i <= 0 || i == len(s)-1 {
		return "", "", false
	}
	return s[:i], s[i:], true
}

// nsSchema is a namespace's schema: the package that defines it and the
// definition's path inside it.
type nsSchema struct {
	inst *build.Instance // nil when the namespace enforces no schema
	def  cue.Path
}

// checkSchema loads a namespace's schema definition. A schema field that
// names nothing usable is a manifest error, at the field; a schema package
// that does not load or evaluate is returned as pkgErr, the CUE error, for
// the caller to report at its own positions.
func (c *compilation) checkSchema(ctx context.Context, ns Namespace, at Error, insts []*build.Instance, args map[string]int) (s *nsSchema, e *Error, pkgErr error) {
	if ns.Schema == "" {
		return &nsSchema{}, nil, nil
	}
	fail := func(format string, a ...any) (*nsSchema, *Error, error) {
		e := at
		e.ID = IDManifestSchema
		e.Message = fmt.Sprintf("namespace %s: ", ns.Name) + fmt.Sprintf(format, a...)
		e.Fix = fixFor(IDManifestSchema)
		return nil, &e, nil
	}
	imp, def, ok := splitSchema(ns.Schema)
	if !ok {
		return fail("schema %q is not <import path>#<Definition>", ns.Schema)
	}
	i, ok := args[imp]
	if !ok || i >= len(insts) {
		return fail("schema package %q cannot be loaded", imp)
	}
	inst := insts[i]
	if inst.Err != nil {
		if missingPackage(inst.Err) {
			msg, _, _ := strings.Cut(relMessage(inst.Err.Error()), "\n")
			return fail("schema package %q: %v", imp, msg)
		}
		return nil, nil, inst.Err
	}
	p := cue.ParsePath(def)
	if p.Err() != nil {
		return fail("schema definition %q: %v", def, p.Err())
	}
	// The schema package is evaluated under the per-config limit, like
	// everything else written in CUE.
	type look struct {
		err    error
		exists bool
		defs   []string
	}
	l, err := bounded(ctx, c.opts.shared(), func() look {
		v := cuecontext.New().BuildInstance(inst)
		if err := v.Err(); err != nil {
			return look{err: err}
		}
		if v.LookupPath(p).Exists() {
			return look{exists: true}
		}
		var defs []string
		if it, err := v.Fields(cue.Definitions(true)); err == nil {
			for it.Next() {
				if it.Selector().IsDefinition() {
					defs = append(defs, it.Selector().String())
				}
			}
		}
		slices.Sort(defs)
		return look{defs: defs}
	})
	switch {
	case errors.Is(err, errTimeout):
		return nil, &Error{File: at.File, Line: at.Line, Column: at.Column, ID: IDConfigTimeout, Fix: fixFor(IDConfigTimeout),
			Message: fmt.Sprintf("namespace %s: schema package %q did not evaluate within %s", ns.Name, imp, c.opts.shared())}, nil
	case err != nil:
		return fail("schema package %q: %v", imp, err)
	case l.err != nil:
		return nil, nil, l.err
	case !l.exists:
		return fail("package %q has no definition %s (it has %s)", imp, def, strings.Join(l.defs, ", "))
	}
	return &nsSchema{inst: inst, def: p}, nil, nil
}

// missingPackage reports whether a load error says the package is not
// there at all, which is the manifest's schema field to fix; any other load
// error is in the package's own files.
func missingPackage(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "cannot find package") || strings.Contains(msg, "no dependency found") ||
		strings.Contains(msg, "no CUE files") || strings.Contains(msg, "cannot find module")
}

// schemaPackageErrors reports a schema package that does not load or
// evaluate at the lines CUE names, once, saying which namespaces go
// uncompiled because of it.
func (c *compilation) schemaPackageErrors(imp string, namespaces []string, err error) []Error {
	dir, _ := c.importDir(imp)
	errs := c.cueErrors(err, "", []string{dir}, cue.Value{})
	which := "namespace " + namespaces[0] + "; its"
	if len(namespaces) > 1 {
		which = "namespaces " + strings.Join(namespaces, ", ") + "; their"
	}
	for i := range errs {
		errs[i].Message += fmt.Sprintf(" (in schema package %s of %s configs are not compiled until it is fixed)", imp, which)
	}
	return errs
}

// checkDimensions reports what the schema cannot say about a namespace's
// dimensions and combinations: a value in two dimensions (@if(prod) must
// name one dimension), and a combination that names an undeclared
// dimension or value, leaves a dimension out, or repeats another.
func checkDimensions(m cue.Value, ns string, dims map[string][]string, combos []map[string]string, fallback string) []Error {
	var errs []Error
	at := func(msg string, sels ...cue.Selector) {
		p := append([]cue.Selector{cue.Str("namespaces"), cue.Str(ns)}, sels...)
		v := m.LookupPath(cue.MakePath(p...))
		// A struct unified with the schema may carry the schema's
		// position; its first field is where the author wrote it.
		if pos := v.Pos(); !pos.IsValid() || strings.HasPrefix(pos.Filename(), "cuecast:") {
			if it, err := v.Fields(); err == nil && it.Next() {
				v = it.Value()
			}
		}
		e := positionError(v, fallback)
		e.ID, e.Fix = IDManifestDimensions, fixFor(IDManifestDimensions)
		e.Message = fmt.Sprintf("namespace %s: %s", ns, msg)
		errs = append(errs, e)
	}
	n := Namespace{Dimensions: dims}
	for _, d := range slices.Sorted(maps.Keys(dims)) {
		for i, v := range dims[d] {
			if o, _ := n.DimensionOf(v); o != d {
				at(fmt.Sprintf("value %q is in dimensions %s and %s; @if(%s) could not say which, so a value may be in one dimension only", v, o, d, v),
					cue.Str("dimensions"), cue.Str(d), cue.Index(i))
			}
		}
	}
	if len(combos) > 0 && len(dims) == 0 {
		at("combinations are listed but no dimensions are declared", cue.Str("combinations"))
		return errs
	}
	seen := make(map[string]int)
	for i, c := range combos {
		ok := true
		for _, d := range slices.Sorted(maps.Keys(c)) {
			vals, declared := dims[d]
			switch {
			case !declared:
				at(fmt.Sprintf("combination %d names dimension %q, which dimensions does not declare", i+1, d), cue.Str("combinations"), cue.Index(i), cue.Str(d))
				ok = false
			case !slices.Contains(vals, c[d]):
				at(fmt.Sprintf("combination %d: %q is not a value of dimension %s (%s)", i+1, c[d], d, strings.Join(vals, ", ")), cue.Str("combinations"), cue.Index(i), cue.Str(d))
				ok = false
			}
		}
		for _, d := range slices.Sorted(maps.Keys(dims)) {
			if _, set := c[d]; !set {
				at(fmt.Sprintf("combination %d gives no value for dimension %s; each combination names a value of every dimension", i+1, d), cue.Str("combinations"), cue.Index(i))
				ok = false
			}
		}
		if !ok {
			continue
		}
		key := cuecast.VariantPath("", c).String()
		if j, dup := seen[key]; dup {
			at(fmt.Sprintf("combination %d repeats combination %d", i+1, j+1), cue.Str("combinations"), cue.Index(i))
			continue
		}
		seen[key] = i
	}
	return errs
}
