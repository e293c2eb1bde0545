package compiler

import (
	"context"
	"fmt"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/build"
	"cuelang.org/go/cue/cuecontext"
)

// Schema is a namespace's schema definition, evaluated: what every config of
// the namespace is unified with.
type Schema struct {
	// Ref is the manifest's "<import path>#<Definition>".
	Ref string
	// Value is the definition, looked up in its evaluated package so that
	// its references to other definitions keep their names.
	Value cue.Value
}

// Schemas evaluates the manifest and the schema definition of each
// namespace that names one, and no config: what a binding generator
// (package bindings) needs. Every namespace of the manifest is in the map,
// one that names no schema with a zero Schema, except a namespace whose
// schema is broken: the returned errors say why. All values share one CUE
// context.
//
// The error is non-nil only when the repo cannot be read, has no module
// (ErrNoModule), or ctx was cancelled; a broken manifest or schema is in
// the returned errors, and its namespaces are absent.
func Schemas(ctx context.Context, repoDir string, opts Options) (map[string]Schema, []Error, error) {
	opts = opts.withDefaults()
	c, done, err := startCompilation(ctx, repoDir, "load schemas", opts, nil)
	if err != nil {
		return nil, nil, err
	}
	defer done()
	if err := c.readModule(ctx); err != nil {
		return nil, nil, err
	}
	man, pos := c.loadManifest(ctx)
	if err := ctx.Err(); err != nil {
		return nil, nil, fmt.Errorf("load manifest: %w", err)
	}
	if man == nil {
		return nil, sortErrors(c.errs), nil
	}
	loaded, err := c.loadSchemas(ctx, man, pos)
	if err != nil {
		return nil, nil, err
	}
	cc := cuecontext.New()
	pkgs := make(map[*build.Instance]cue.Value)
	out := make(map[string]Schema, len(loaded))
	for ns, s := range loaded {
		if s.inst == nil {
			out[ns] = Schema{}
			continue
		}
		// checkSchema evaluated the package under the time limit already.
		pkg, ok := pkgs[s.inst]
		if !ok {
			pkg = cc.BuildInstance(s.inst)
			pkgs[s.inst] = pkg
		}
		out[ns] = Schema{Ref: man.Namespaces[ns].Schema, Value: pkg.LookupPath(s.def)}
	}
	return out, sortErrors(c.errs), nil
}
