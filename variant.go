package cuecast

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// DimValue is one dimension of a variant and the value it has there:
// {Dim: "env", Value: "prod"} for the segment "env=prod".
type DimValue struct {
	Dim   string `json:"dim"`
	Value string `json:"value"`
}

func (d DimValue) String() string { return d.Dim + "=" + d.Value }

// variantSegment splits a path segment "<dim>=<value>"; ok is false for a
// plain segment or one whose halves are not valid segments.
func variantSegment(s string) (DimValue, bool) {
	dim, val, found := strings.Cut(s, "=")
	if !found || !ValidSegment(dim) || !ValidSegment(val) {
		return DimValue{}, false
	}
	return DimValue{Dim: dim, Value: val}, true
}

// splitVariant cuts p into its plain segments and its trailing variant
// segments. bad names the first segment that is neither, or a variant
// segment followed by a plain one.
func splitVariant(p ConfigPath) (plain []string, dims []DimValue, bad string) {
	segs := strings.Split(string(p), "/")
	for i, s := range segs {
		if dv, ok := variantSegment(s); ok {
			dims = append(dims, dv)
			continue
		}
		if len(dims) > 0 || !ValidSegment(s) {
			return nil, nil, segs[i]
		}
		plain = append(plain, s)
	}
	return plain, dims, ""
}

// Base is the config a variant path belongs to: p without its trailing
// "<dim>=<value>" segments ("payments/checkout" for
// "payments/checkout/env=prod/region=eu"); p itself for a plain config.
func (p ConfigPath) Base() ConfigPath {
	s := string(p)
	for {
		i := strings.LastIndexByte(s, '/')
		if i < 0 || !strings.Contains(s[i+1:], "=") {
			return ConfigPath(s)
		}
		s = s[:i]
	}
}

// Variant is the dimension values of a variant path, in path order (sorted
// by dimension); nil for a plain config.
func (p ConfigPath) Variant() []DimValue {
	var out []DimValue
	rest := string(p)
	for {
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			break
		}
		dv, ok := variantSegment(rest[i+1:])
		if !ok {
			break
		}
		out = append(out, dv)
		rest = rest[:i]
	}
	slices.Reverse(out)
	return out
}

// IsVariant reports whether p names a variant of a config rather than the
// config itself.
func (p ConfigPath) IsVariant() bool { return p.Base() != p }

// VariantLabel is the variant's dimension values in the CLI form
// "env=prod,region=eu"; "" for a plain config.
func (p ConfigPath) VariantLabel() string {
	vs := p.Variant()
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, ",")
}

// VariantPath is the path of base's variant for the dimension values dims:
// one "<dim>=<value>" segment per dimension, sorted by dimension name
// (docs/VARIANTS.md). With no dimensions it is base.
func VariantPath(base ConfigPath, dims map[string]string) ConfigPath {
	var b strings.Builder
	b.WriteString(string(base))
	for _, d := range slices.Sorted(maps.Keys(dims)) {
		b.WriteString("/" + d + "=" + dims[d])
	}
	return ConfigPath(b.String())
}

// ParseVariant reads the CLI form of dimension values, "env=prod,region=eu",
// each dimension once, names and values matching [a-z0-9][a-z0-9_-]*. An
// empty string is no dimensions.
func ParseVariant(s string) (map[string]string, error) {
	out := make(map[string]string)
	if strings.TrimSpace(s) == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		dv, ok := variantSegment(part)
		if !ok {
			return nil, fmt.Errorf("variant %q: %q is not <dimension>=<value>, each [a-z0-9][a-z0-9_-]*", s, part)
		}
		if _, dup := out[dv.Dim]; dup {
			return nil, fmt.Errorf("variant %q: dimension %s given twice", s, dv.Dim)
		}
		out[dv.Dim] = dv.Value
	}
	return out, nil
}

// VariantIndexSchema is the "schema" field of a variant index, the document
// published at the base path of a config that has variants.
const VariantIndexSchema = "cuecast.variants/v1"

// VariantIndex is the document published at a config's base path when the
// config has variants: the dimensions it uses and its variant paths,
// sorted (the compiler's canonical JSON, docs/PROTOCOL.md §10). A
// subscriber reads it to find its variant; an old client without
// dimensions gets a document it cannot mistake for its config.
type VariantIndex struct {
	Config     ConfigPath   `json:"config"`
	Dimensions []string     `json:"dimensions"`
	Schema     string       `json:"schema"`
	Variants   []ConfigPath `json:"variants"`
}

// indexPrefix is how every canonical variant index starts (keys sorted):
// a cheap test before decoding content as one.
var indexPrefix = []byte(`{"config":`)

// indexSchema is in every variant index, canonical or not: a config
// whose first key happens to be "config" is told apart without decoding.
var indexSchema = []byte(`"` + VariantIndexSchema + `"`)

// ParseVariantIndex decodes content as a variant index; ok is false when
// it is not one (a config's own content).
func ParseVariantIndex(content []byte) (VariantIndex, bool) {
	if !bytes.HasPrefix(bytes.TrimLeft(content, " \t\r\n"), indexPrefix) || !bytes.Contains(content, indexSchema) {
		return VariantIndex{}, false
	}
	return decodeVariantIndex(content)
}

// decodeVariantIndex is ParseVariantIndex's decoding, apart so that the
// index escapes to the heap only for content that may be one.
func decodeVariantIndex(content []byte) (ix VariantIndex, ok bool) {
	if err := json.Unmarshal(content, &ix); err != nil || ix.Schema != VariantIndexSchema {
		return VariantIndex{}, false
	}
	return ix, true
}
