package compiler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/cuecast/cuecast"
)

// encodeVariantIndex is the canonical JSON of a variant index: sorted keys
// (the field order above), no HTML escaping, no trailing newline.
func encodeVariantIndex(ix cuecast.VariantIndex) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(ix); err != nil {
		// Strings and slices of strings always encode.
		panic("compiler: encode variant index: " + err.Error())
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// variant is one combination of dimension values a config compiles for.
type variant struct {
	path cuecast.ConfigPath
	// tags are the build tags passed to the loader: the shorthand of each
	// value (docs/VARIANTS.md, "Injection"), only those some file of the
	// config reads, sorted.
	tags []string
}

// variantsOf returns the variants of config cp of namespace ns, whose
// packages load from deps: one per combination of the dimensions it uses,
// or nil when it uses none. A dimension is used by an @tag(<dim>) in the
// config's own package (its directory and ancestors: CUE honours @tag only
// there) or an @if naming one of its values in any file the config loads;
// any other @tag is no dimension and varies nothing. dimTags are the
// config's own @tag fields of a dimension: the value is injected there,
// so the config's package must be loaded as a top-level instance. Errors
// are the injection lint: an @tag of a dimension must list the
// dimension's values as shorthands.
func (c *compilation) variantsOf(cp cuecast.ConfigPath, deps []string, ns Namespace) (vs []variant, dimTags []tagAttr, errs []Error) {
	if len(ns.Dimensions) == 0 {
		return nil, nil, nil
	}
	used := make(map[string]bool)
	read := make(map[string]bool) // values some file names
	pkg := ""
	for _, f := range c.tree.dirs[string(cp)] {
		if h := c.headers[f]; h.pkg != "" && h.pkg != "_" {
			pkg = h.pkg
			break
		}
	}
	own := append(ancestors(string(cp)), string(cp))
	for _, d := range own {
		for _, f := range c.tree.dirs[d] {
			if d != string(cp) && c.headers[f].pkg != pkg {
				continue // an ancestor's file of another package is not the config's
			}
			for _, t := range c.tagsOf(f) {
				vals, isDim := ns.Dimensions[t.name]
				if !isDim {
					continue
				}
				used[t.name] = true
				dimTags = append(dimTags, t)
				for _, sh := range t.short {
					read[sh] = true
				}
				var missing []string
				for _, v := range vals {
					if !slices.Contains(t.short, v) {
						missing = append(missing, v)
					}
				}
				if len(missing) > 0 {
					errs = append(errs, Error{Config: cp, File: f, Line: t.line, Column: t.col, ID: IDVariantTag, Fix: fixFor(IDVariantTag),
						Message: fmt.Sprintf("@tag(%s) does not list %s as a shorthand, so that value would never reach it; write @tag(%s,short=%s)",
							t.name, strings.Join(missing, ", "), t.name, strings.Join(vals, "|"))})
				}
			}
		}
	}
	for _, d := range deps {
		for _, f := range c.tree.dirs[d] {
			for _, name := range c.headers[f].ifNames {
				if dim, ok := ns.DimensionOf(name); ok {
					used[dim], read[name] = true, true
				}
			}
		}
	}
	if len(used) == 0 || len(errs) > 0 {
		return nil, dimTags, errs
	}
	for _, combo := range combinations(ns, slices.Sorted(maps.Keys(used))) {
		v := variant{path: cuecast.VariantPath(cp, combo)}
		for _, val := range combo {
			if read[val] {
				v.tags = append(v.tags, val)
			}
		}
		slices.Sort(v.tags)
		vs = append(vs, v)
	}
	slices.SortFunc(vs, func(a, b variant) int { return strings.Compare(string(a.path), string(b.path)) })
	return vs, dimTags, nil
}

// combinations returns the combinations of the dimensions used: every
// combination of their values, or, when the namespace lists its valid
// combinations, those projected onto the dimensions used, deduplicated.
func combinations(ns Namespace, used []string) []map[string]string {
	var out []map[string]string
	if ns.Combinations != nil {
		seen := make(map[cuecast.ConfigPath]bool)
	combos:
		for _, full := range ns.Combinations {
			m := make(map[string]string, len(used))
			for _, d := range used {
				// A value no dimension declares (or none at all) is the
				// manifest's error at its line; compiled, it would only
				// add the errors of a variant that cannot exist.
				if !slices.Contains(ns.Dimensions[d], full[d]) {
					continue combos
				}
				m[d] = full[d]
			}
			if k := cuecast.VariantPath("", m); !seen[k] {
				seen[k] = true
				out = append(out, m)
			}
		}
		return out
	}
	out = []map[string]string{{}}
	for _, d := range used {
		var next []map[string]string
		for _, m := range out {
			for _, v := range ns.Dimensions[d] {
				n := maps.Clone(m)
				n[d] = v
				next = append(next, n)
			}
		}
		out = next
	}
	return out
}

// nameVariants words the errors of variant evaluations. An error every
// variant of a config has (a typo in a file they all read) is reported
// once, against the config; any other names its variant:
// "payments/checkout [env=prod,region=eu]: <message>".
func (c *compilation) nameVariants() {
	type key struct {
		base        cuecast.ConfigPath
		file        string
		line, col   int
		id, message string
	}
	keyOf := func(e Error) key { return key{e.Config.Base(), e.File, e.Line, e.Column, e.ID, e.Message} }
	count := make(map[key]int)
	for _, e := range c.errs {
		if e.Config.IsVariant() {
			count[keyOf(e)]++
		}
	}
	out := c.errs[:0]
	emitted := make(map[key]bool)
	for _, e := range c.errs {
		if !e.Config.IsVariant() {
			out = append(out, e)
			continue
		}
		k := keyOf(e)
		if n := len(c.variants[k.base]); n > 1 && count[k] == n {
			if !emitted[k] {
				emitted[k] = true
				e.Config = k.base
				out = append(out, e)
			}
			continue
		}
		e.Message = fmt.Sprintf("%s [%s]: %s", k.base, e.Config.VariantLabel(), e.Message)
		out = append(out, e)
	}
	c.errs = out
}

// indexVariants adds the variant index of each config with variants whose
// every variant compiled, at the config's own path.
func (c *compilation) indexVariants() {
	for _, cp := range slices.Sorted(maps.Keys(c.variants)) {
		vs := c.variants[cp]
		ix := cuecast.VariantIndex{Config: cp, Schema: cuecast.VariantIndexSchema}
		var files []string
		complete := true
		for _, v := range vs {
			o, ok := c.res.Outputs[v.path]
			if !ok {
				complete = false
				break
			}
			ix.Variants = append(ix.Variants, v.path)
			files = append(files, o.Files...)
		}
		if !complete {
			continue
		}
		for _, dv := range vs[0].path.Variant() {
			ix.Dimensions = append(ix.Dimensions, dv.Dim)
		}
		b := encodeVariantIndex(ix)
		slices.Sort(files)
		c.res.Outputs[cp] = Output{JSON: b, Checksum: cuecast.Checksum(b), Files: slices.Compact(files)}
	}
}

// readsDimension reports whether a file's @if names a value of one of the
// namespace's dimensions: the file is then in some variants, even though
// it is left out when no tag is set.
func readsDimension(h header, ns Namespace) bool {
	for _, name := range h.ifNames {
		if _, ok := ns.DimensionOf(name); ok {
			return true
		}
	}
	return false
}
