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
}

// Diff compares two JSON documents and returns their differences sorted by
// path. Objects are compared key by key and arrays index by index, down to the
// first level where the values differ; an added or removed subtree is one
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
				*out = append(*out, Difference{Path: p, Op: OpAdded, New: compact(y)})
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
		for i := range max(len(av), len(bv)) {
			p := path + "[" + strconv.Itoa(i) + "]"
			switch {
			case i >= len(bv):
				*out = append(*out, Difference{Path: p, Op: OpRemoved, Old: compact(av[i])})
			case i >= len(av):
				*out = append(*out, Difference{Path: p, Op: OpAdded, New: compact(bv[i])})
			default:
				diffValue(out, p, av[i], bv[i])
			}
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
