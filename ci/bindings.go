package ci

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"

	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/cuecast/cuecast/bindings"
	"github.com/cuecast/cuecast/compiler"
)

// BindingsChange is a namespace whose typed bindings (`cuecast gen`) the
// change alters: services built with the base's bindings should
// regenerate them. A warning; the check does not fail for it.
type BindingsChange struct {
	Namespace string `json:"namespace"`
	// Schema is the head's schema definition; empty when the change
	// removes the namespace or its schema.
	Schema string `json:"schema,omitempty"`
	// Languages are the bindings that differ: go, ts, jsonschema.
	Languages []string `json:"languages"`
}

// bindingLanguages are what `cuecast gen` writes, in its order.
var bindingLanguages = []string{"go", "ts", "jsonschema"}

// generate writes every language's bindings of one namespace.
func generate(ns string, s compiler.Schema) (map[string][]byte, error) {
	g, err := bindings.Go(ns, s.Ref, s.Value, bindings.GoOptions{})
	if err != nil {
		return nil, err
	}
	ts, err := bindings.TypeScript(ns, s.Ref, s.Value)
	if err != nil {
		return nil, err
	}
	js, err := bindings.JSONSchema(s.Value)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{"go": g, "ts": ts, "jsonschema": js}, nil
}

// mayChangeBindings reports whether a changed file can reach a namespace
// schema: the manifest or cue.mod/ (everything), a file outside every
// namespace's directory (a schema package, or a library one imports), or
// one in a directory a schema's import path ends with.
func mayChangeBindings(changed []string, everything bool, ms ...*compiler.Manifest) bool {
	if everything {
		return true
	}
	for _, f := range changed {
		top, _, _ := strings.Cut(f, "/")
		inNamespace := false
		for _, m := range ms {
			if m == nil {
				continue
			}
			if _, ok := m.Namespaces[top]; ok {
				inNamespace = true
			}
			for _, ns := range m.Namespaces {
				imp, _, _ := strings.Cut(ns.Schema, "#")
				if imp != "" && strings.HasSuffix(imp, "/"+path.Dir(f)) {
					return true
				}
			}
		}
		if !inNamespace {
			return true
		}
	}
	return false
}

// bindings sets rep.Bindings: the namespaces whose generated bindings
// differ between base and head. A namespace whose schema is broken on
// either side is left out (its errors are in the report already).
func (k *checkRun) bindings(ctx context.Context, baseC, headC *object.Commit, rep *Report) error {
	// at loads a side's schemas; broken says whether some namespace may
	// be missing because its schema (or the manifest) is broken.
	at := func(c *object.Commit) (s map[string]compiler.Schema, broken bool, err error) {
		fsys, err := k.trees.fs(c)
		if err != nil {
			return nil, false, err
		}
		s, errs, err := compiler.Schemas(ctx, k.repoDir, compiler.Options{FS: fsys, Workers: k.opts.Workers, Timeout: k.opts.Timeout, Logger: k.opts.Logger})
		if errors.Is(err, compiler.ErrNoModule) {
			return map[string]compiler.Schema{}, false, nil
		}
		return s, len(errs) > 0, err
	}
	base, baseBroken, err := at(baseC)
	if err != nil {
		return fmt.Errorf("bindings at base: %w", err)
	}
	head, headBroken, err := at(headC)
	if err != nil {
		return fmt.Errorf("bindings at head: %w", err)
	}
	for _, ns := range slices.Sorted(maps.Keys(union2(base, head))) {
		b, inBase := base[ns]
		h, inHead := head[ns]
		if b.Ref == "" && h.Ref == "" || !inBase && baseBroken || !inHead && headBroken {
			continue
		}
		var bb, hb map[string][]byte
		if b.Ref != "" {
			if bb, err = generate(ns, b); err != nil {
				k.opts.Logger.Debug("no bindings at base", "namespace", ns, "err", err)
				continue
			}
		}
		if h.Ref != "" {
			if hb, err = generate(ns, h); err != nil {
				k.opts.Logger.Debug("no bindings at head", "namespace", ns, "err", err)
				continue
			}
		}
		var langs []string
		for _, l := range bindingLanguages {
			if !bytes.Equal(bb[l], hb[l]) {
				langs = append(langs, l)
			}
		}
		if len(langs) > 0 {
			rep.Bindings = append(rep.Bindings, BindingsChange{Namespace: ns, Schema: h.Ref, Languages: langs})
		}
	}
	return nil
}

func union2[V any](a, b map[string]V) map[string]bool {
	out := make(map[string]bool, len(a)+len(b))
	for k := range a {
		out[k] = true
	}
	for k := range b {
		out[k] = true
	}
	return out
}

// summary says what changes and what to do, the same in text and
// Markdown.
func (c BindingsChange) summary() string {
	if c.Schema == "" {
		return fmt.Sprintf("the change removes its schema, and with it its %s bindings", strings.Join(c.Languages, ", "))
	}
	return fmt.Sprintf("its %s bindings of %s change; regenerate them (cuecast gen %s %s) where services use them",
		strings.Join(c.Languages, ", "), c.Schema, c.Languages[0], c.Namespace)
}
