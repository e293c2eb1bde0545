package ci

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Op says what happened to one path of a compiled document.
type Op string

// The kinds of difference Diff reports.
const (
	OpAdded   Op = "added"   // the path exists only at head
	OpRemoved Op = "removed" // the path exists only at base
	OpChanged Op = "changed" // same JSON type, another value
	OpType    Op = "type"    // the JSON type changed
)

// Difference is one path whose value differs between two compiled documents.
// Old and New are compact JSON; Old is empty for OpAdded, New for OpRemoved.
// Breaking is set when a service reading the old document may not survive
// the difference: an object field it read is gone, or a value changed its
// JSON type. A list growing shorter is not breaking: readers iterate lists.
type Difference struct {
	Path     string          `json:"path"`
	Op       Op              `json:"op"`
	Old      json.RawMessage `json:"old,omitempty"`
	New      json.RawMessage `json:"new,omitempty"`
	Breaking bool            `json:"breaking,omitempty"`
	// NewField is set for an object field that exists only at head: a
	// service decoding the config strictly (unknown fields rejected) fails
	// on it until it knows the field.
	NewField bool `json:"new_field,omitempty"`
}

// Diff compares two JSON documents and returns their differences in
// document order. Objects are compared key by key. Lists are compared as
// lists: elements inserted or removed are reported as such (a region
// prepended is one addition, not every index shifting), and a list of
// objects that all carry a unique "name", "id" or "key" is matched by it
// (path list[name="x"]). Comparison goes down to the first level where the
// values differ; an added or removed subtree is one
// difference holding the whole subtree. Numbers compare as written, which is
// what canonical JSON makes meaningful. It returns an error when either
// document is not JSON.
func Diff(old, new []byte) ([]Difference, error) {
	ov, err := decode(old)
	if err != nil {
		return nil, fmt.Errorf("decode old document: %w", err)
	}
	nv, err := decode(new)
	if err != nil {
		return nil, fmt.Errorf("decode new document: %w", err)
	}
	var out []Difference
	diffValue(&out, "", ov, nv)
	return out, nil
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

func diffValue(out *[]Difference, path string, a, b any) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		for _, k := range keys {
			p := joinKey(path, k)
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inB:
				*out = append(*out, Difference{Path: p, Op: OpRemoved, Old: compact(x), Breaking: true})
			case !inA:
				*out = append(*out, Difference{Path: p, Op: OpAdded, New: compact(y), NewField: true})
			default:
				diffValue(out, p, x, y)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		if key := listKey(av, bv); key != "" {
			diffKeyed(out, path, key, av, bv)
		} else {
			diffList(out, path, av, bv)
		}
		return
	}
	if jsonType(a) != jsonType(b) {
		*out = append(*out, Difference{Path: rootName(path), Op: OpType, Old: compact(a), New: compact(b), Breaking: true})
		return
	}
	ca, cb := compact(a), compact(b)
	if !bytes.Equal(ca, cb) {
		*out = append(*out, Difference{Path: rootName(path), Op: OpChanged, Old: ca, New: cb})
	}
}

func rootName(p string) string {
	if p == "" {
		return "."
	}
	return p
}

var identRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)

// joinKey appends an object key to a path: "a.b", or a["x.y"] when the key
// is not a plain identifier.
func joinKey(path, k string) string {
	if !identRE.MatchString(k) {
		return path + "[" + strconv.Quote(k) + "]"
	}
	if path == "" {
		return k
	}
	return path + "." + k
}

// jsonType names the JSON type of a decoded value.
func jsonType(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "boolean"
	case json.Number:
		return "number"
	case string:
		return "string"
	case []any:
		return "array"
	case map[string]any:
		return "object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// compact encodes a decoded value the canonical way: sorted keys, no HTML
// escaping.
func compact(v any) json.RawMessage {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		// Values come from json.Decoder, so they always encode.
		return json.RawMessage(strconv.Quote(fmt.Sprint(v)))
	}
	return json.RawMessage(strings.TrimSuffix(buf.String(), "\n"))
}

// maxListCells bounds the work of matching two lists (their lengths
// multiplied); longer lists are compared index by index.
const maxListCells = 1 << 20

// diffList reports the difference of two lists as insertions and removals
// around their longest common subsequence. Within a stretch between common
// elements, removed and inserted elements are paired up and compared as a
// change of that element, which keeps an edited element one difference.
func diffList(out *[]Difference, path string, a, b []any) {
	idx := func(i int) string { return path + "[" + strconv.Itoa(i) + "]" }
	if len(a)*len(b) > maxListCells {
		for i := range max(len(a), len(b)) {
			switch {
			case i >= len(b):
				*out = append(*out, Difference{Path: idx(i), Op: OpRemoved, Old: compact(a[i])})
			case i >= len(a):
				*out = append(*out, Difference{Path: idx(i), Op: OpAdded, New: compact(b[i])})
			default:
				diffValue(out, idx(i), a[i], b[i])
			}
		}
		return
	}
	ka, kb := make([]string, len(a)), make([]string, len(b))
	for i, x := range a {
		ka[i] = string(compact(x))
	}
	for j, y := range b {
		kb[j] = string(compact(y))
	}
	// lcs[i][j] is the length of the longest common subsequence of
	// ka[i:] and kb[j:].
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if ka[i] == kb[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var gapA, gapB []int
	flush := func() {
		n := min(len(gapA), len(gapB))
		for k := range n {
			diffValue(out, idx(gapB[k]), a[gapA[k]], b[gapB[k]])
		}
		for _, i := range gapA[n:] {
			*out = append(*out, Difference{Path: idx(i), Op: OpRemoved, Old: compact(a[i])})
		}
		for _, j := range gapB[n:] {
			*out = append(*out, Difference{Path: idx(j), Op: OpAdded, New: compact(b[j])})
		}
		gapA, gapB = gapA[:0], gapB[:0]
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && ka[i] == kb[j]:
			flush()
			i, j = i+1, j+1
		case j < len(b) && (i == len(a) || lcs[i][j+1] >= lcs[i+1][j]):
			gapB = append(gapB, j)
			j++
		default:
			gapA = append(gapA, i)
			i++
		}
	}
	flush()
}

// listKey returns the field that identifies the elements of both lists:
// "name", "id" or "key", when every element is an object holding it as a
// string or number and no two elements of a list share a value.
func listKey(a, b []any) string {
	if len(a) == 0 || len(b) == 0 {
		return ""
	}
	for _, key := range []string{"name", "id", "key"} {
		if uniqueKey(a, key) && uniqueKey(b, key) {
			return key
		}
	}
	return ""
}

func uniqueKey(l []any, key string) bool {
	seen := make(map[string]bool, len(l))
	for _, x := range l {
		m, ok := x.(map[string]any)
		if !ok {
			return false
		}
		var k string
		switch v := m[key].(type) {
		case string:
			k = "s" + v
		case json.Number:
			k = "n" + v.String()
		default:
			return false
		}
		if seen[k] {
			return false
		}
		seen[k] = true
	}
	return true
}

// diffKeyed compares two keyed lists element by element, matched by key;
// the path names the element by its key: providers[name="stripe"].weight.
// Elements are reported in head order, then those only at base; a list that
// keeps its elements but reorders them is one change of the whole list.
func diffKeyed(out *[]Difference, path, key string, a, b []any) {
	label := func(m map[string]any) string {
		switch v := m[key].(type) {
		case string:
			return fmt.Sprintf("%s[%s=%s]", path, key, strconv.Quote(v))
		default:
			return fmt.Sprintf("%s[%s=%v]", path, key, v)
		}
	}
	inA := make(map[string]map[string]any, len(a))
	var orderA []string
	for _, x := range a {
		m := x.(map[string]any)
		inA[label(m)] = m
		orderA = append(orderA, label(m))
	}
	inB := make(map[string]bool, len(b))
	var orderB []string
	for _, y := range b {
		m := y.(map[string]any)
		p := label(m)
		inB[p] = true
		if _, ok := inA[p]; ok {
			orderB = append(orderB, p)
		}
		if old, ok := inA[p]; ok {
			diffValue(out, p, old, m)
		} else {
			*out = append(*out, Difference{Path: p, Op: OpAdded, New: compact(m)})
		}
	}
	var kept []string
	for _, p := range orderA {
		if inB[p] {
			kept = append(kept, p)
		} else {
			*out = append(*out, Difference{Path: p, Op: OpRemoved, Old: compact(inA[p])})
		}
	}
	if !slices.Equal(kept, orderB) {
		*out = append(*out, Difference{Path: rootName(path), Op: OpChanged, Old: compact(a), New: compact(b)})
	}
}
