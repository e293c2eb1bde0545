package ci

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/flags"
)

// FlagRollout is one rollout of a feature flag (docs/FLAGS.md) that the
// change alters: the fallthrough's or a rule's weights, salt or bucketing
// attribute. Changed is the share of users whose variant changes, computed
// over every bucket position (a user's position depends only on the salt
// and the attribute's value, so the share of positions is the share of
// users); Required is the least any change between these weights must move
// (the variants' shares that grow, summed). A rollout that moves more than
// that is Reshuffled: the weights were reordered or the salt or attribute
// changed, and users who kept their variant's share still lose it. The
// check fails for it unless the flag sets reshuffle: true.
type FlagRollout struct {
	Config cuecast.ConfigPath `json:"config"`
	Flag   string             `json:"flag"`
	// Where is "fallthrough" or the rule, rules[<id>] or rules[<index>].
	Where    string  `json:"where"`
	Changed  float64 `json:"changed"`
	Required float64 `json:"required"`
	// Resalted: the salt or the bucketing attribute changed, so every
	// user is bucketed anew; Changed is then the expected share.
	Resalted   bool `json:"resalted,omitempty"`
	Reshuffled bool `json:"reshuffled,omitempty"`
	// Intended: the flag says reshuffle: true, so a reshuffle does not
	// fail the check.
	Intended bool `json:"intended,omitempty"`
}

// Fails says the rollout fails the check: reshuffled, and not meant to be.
func (f FlagRollout) Fails() bool { return f.Reshuffled && !f.Intended }

// flagRollouts fills Risk.FlagRollouts and Risk.Reshuffles from the
// changed configs whose outputs are flag sets at both revisions.
func (r *Report) flagRollouts(base, head map[cuecast.ConfigPath][]byte) {
	for _, cc := range r.Configs {
		if cc.Status != StatusChanged {
			continue
		}
		old, ok1 := flagSet(base[cc.Config])
		cur, ok2 := flagSet(head[cc.Config])
		if !ok1 || !ok2 {
			continue
		}
		for _, key := range slices.Sorted(maps.Keys(cur.Flags)) {
			of, ok := old.Flags[key]
			if !ok {
				continue
			}
			nf := cur.Flags[key]
			for _, pair := range servedPairs(of, nf) {
				fr, changed := compareServe(key, of, nf, pair.old, pair.new)
				if !changed {
					continue
				}
				fr.Config, fr.Where, fr.Intended = cc.Config, pair.where, nf.Reshuffle
				r.Risk.FlagRollouts = append(r.Risk.FlagRollouts, fr)
				if fr.Fails() {
					r.Risk.Reshuffles++
				}
			}
		}
	}
}

func flagSet(b []byte) (*flags.Set, bool) {
	if len(b) == 0 {
		return nil, false
	}
	var s flags.Set
	if err := json.Unmarshal(b, &s); err != nil || s.Schema != flags.Schema {
		return nil, false
	}
	return &s, true
}

type servePair struct {
	where    string
	old, new *flags.Serve
}

// servedPairs pairs the old and new flag's rollouts: the fallthroughs, and
// rules by id (by index when a rule has none).
func servedPairs(of, nf flags.Flag) []servePair {
	out := []servePair{{"fallthrough", of.Fallthrough, nf.Fallthrough}}
	name := func(i int, r flags.Rule) string {
		if r.ID != "" {
			return fmt.Sprintf("rules[%s]", r.ID)
		}
		return fmt.Sprintf("rules[%d]", i)
	}
	for i, nr := range nf.Rules {
		for j, or := range of.Rules {
			if name(j, or) == name(i, nr) {
				out = append(out, servePair{name(i, nr), &or.Serve, &nr.Serve})
				break
			}
		}
	}
	return out
}

// shares is what s serves as weights over the whole: a rollout's, or all
// of it to one variant; nil when s is nil or serves nothing.
func shares(s *flags.Serve) []flags.Weight {
	switch {
	case s == nil:
		return nil
	case s.Rollout != nil:
		return s.Rollout.Weights
	case s.Variant != "":
		return []flags.Weight{{Variant: s.Variant, Weight: flags.Whole}}
	}
	return nil
}

func bucketBy(s *flags.Serve) string {
	if s != nil && s.Rollout != nil && s.Rollout.BucketBy != "" {
		return s.Rollout.BucketBy
	}
	return flags.DefaultBucketBy
}

// compareServe compares what a rule or the fallthrough of flag key serves
// before and after; changed is false when nothing of it differs.
func compareServe(key string, of, nf flags.Flag, os, ns *flags.Serve) (fr FlagRollout, changed bool) {
	ow, nw := shares(os), shares(ns)
	if ow == nil || nw == nil {
		return fr, false
	}
	salt := func(f flags.Flag) string {
		if f.Salt == "" {
			return key
		}
		return f.Salt
	}
	resalted := (salt(of) != salt(nf) || bucketBy(os) != bucketBy(ns)) && len(ow) > 1 && len(nw) > 1
	if !resalted && slices.Equal(ow, nw) {
		return fr, false
	}
	fr.Flag = key
	total := func(w []flags.Weight) map[string]int {
		m := map[string]int{}
		for _, x := range w {
			m[x.Variant] += x.Weight
		}
		return m
	}
	ot, nt := total(ow), total(nw)
	grow := 0
	for v, n := range nt {
		grow += max(0, n-ot[v])
	}
	fr.Required = float64(grow) / flags.Whole
	if resalted {
		// Positions are drawn anew: a user keeps a variant by chance.
		keep := 0.0
		for v, n := range nt {
			keep += float64(n) / flags.Whole * float64(ot[v]) / flags.Whole
		}
		fr.Resalted, fr.Changed = true, 1-keep
	} else {
		moved := 0
		for p := range flags.Whole {
			if flags.VariantAt(ow, p) != flags.VariantAt(nw, p) {
				moved++
			}
		}
		fr.Changed = float64(moved) / flags.Whole
	}
	fr.Reshuffled = fr.Changed > fr.Required+0.5/flags.Whole
	return fr, true
}

// evaluatorKnows clears NewField on the differences of a flag set that
// name a field of the flag schema: a service reads a flag set through the
// flags evaluator, which knows every one of them (reshuffle and bucketBy
// included), so none is new to it. A field inside a variant's value (an
// object flag's) stays new: the service decodes that value itself.
func evaluatorKnows(diff []Difference) {
	for i := range diff {
		if diff[i].NewField && flagSchemaField(diff[i].Path) {
			diff[i].NewField = false
		}
	}
}

// flagSchemaField reports whether path, as Diff writes it, names a field
// that flags.Set defines (a map key of it counts: a new flag, variant or
// rule), following the JSON names of its fields.
func flagSchemaField(path string) bool {
	segs, ok := pathSegments(path)
	if !ok {
		return false
	}
	raw := reflect.TypeFor[flags.RawVariant]()
	t := reflect.TypeFor[flags.Set]()
	for _, s := range segs {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t == raw {
			return false // inside a value the flag serves or compares
		}
		switch t.Kind() {
		case reflect.Struct:
			f, ok := jsonField(t, s.key)
			if s.elem || !ok {
				return false
			}
			t = f.Type
		case reflect.Map:
			if s.elem {
				return false
			}
			t = t.Elem()
		case reflect.Slice:
			if !s.elem {
				return false
			}
			t = t.Elem()
		default:
			return false
		}
	}
	return true
}

// jsonField finds the field of struct t that encoding/json names name,
// looking into embedded structs (a Rule's Serve).
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct {
			if sf, ok := jsonField(f.Type, name); ok {
				return sf, true
			}
			continue
		}
		if tag == name || tag == "" && f.Name == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

// pathSeg is one step of a Diff path: an object key, or a list element.
type pathSeg struct {
	key  string
	elem bool
}

// pathSegments splits a Diff path (a.b, a["x.y"], a[3], a[id="x"]) into
// its steps; ok is false for a path Diff does not write.
func pathSegments(p string) (segs []pathSeg, ok bool) {
	for p != "" {
		switch p[0] {
		case '.':
			p = p[1:]
		case '[':
			rest := p[1:]
			if strings.HasPrefix(rest, `"`) {
				q, err := strconv.QuotedPrefix(rest)
				if err != nil || !strings.HasPrefix(rest[len(q):], "]") {
					return nil, false
				}
				k, _ := strconv.Unquote(q)
				segs = append(segs, pathSeg{key: k})
				p = rest[len(q)+1:]
				continue
			}
			// An element by index, or by key: [id="x"] or [id=3].
			i := strings.IndexAny(rest, "=]")
			if i < 0 {
				return nil, false
			}
			if rest[i] == '=' {
				rest = rest[i+1:]
				if strings.HasPrefix(rest, `"`) {
					q, err := strconv.QuotedPrefix(rest)
					if err != nil {
						return nil, false
					}
					rest = rest[len(q):]
				}
				i = strings.IndexByte(rest, ']')
				if i < 0 {
					return nil, false
				}
			}
			segs = append(segs, pathSeg{elem: true})
			p = rest[i+1:]
		default:
			i := strings.IndexAny(p, ".[")
			if i < 0 {
				i = len(p)
			}
			segs = append(segs, pathSeg{key: p[:i]})
			p = p[i:]
		}
	}
	return segs, true
}
