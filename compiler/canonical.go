package compiler

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"

	"cuelang.org/go/cue"
)

// encodeCanonical writes v as canonical JSON: object keys sorted by their
// UTF-8 bytes, no insignificant space, no HTML escaping, numbers exactly as
// CUE renders them (so 1.50 stays 1.50), definitions, hidden and optional
// fields left out. lint, when not nil, is called for every string value
// that matches one of pats or looks like a credential by its field name.
func encodeCanonical(v cue.Value, pats []secretPattern, lint func(Error)) ([]byte, error) {
	e := &encoder{lint: lint, pats: pats}
	if err := e.value(v, ""); err != nil {
		return nil, err
	}
	return e.buf.Bytes(), nil
}

type encoder struct {
	buf  bytes.Buffer
	tmp  bytes.Buffer
	enc  *json.Encoder // writes into tmp
	lint func(Error)
	pats []secretPattern
}

type field struct {
	label string
	v     cue.Value
}

func (e *encoder) value(v cue.Value, label string) error {
	if d, ok := v.Default(); ok {
		v = d
	}
	// No v.Err() per node: callers validate first, and Err allocates on
	// every call; an error value has BottomKind and lands in default.
	switch v.Kind() {
	case cue.StructKind:
		it, err := v.Fields()
		if err != nil {
			return err
		}
		var fs []field
		for it.Next() {
			f := field{it.Selector().Unquoted(), it.Value()}
			if e.lint != nil {
				// A credential used as a map key leaks as surely as one
				// used as a value.
				lintLabel(f.v, f.label, e.pats, e.lint)
			}
			fs = append(fs, f)
		}
		slices.SortFunc(fs, func(a, b field) int { return bytes.Compare([]byte(a.label), []byte(b.label)) })
		e.buf.WriteByte('{')
		for i, f := range fs {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			e.string(f.label)
			e.buf.WriteByte(':')
			if err := e.value(f.v, f.label); err != nil {
				return err
			}
		}
		e.buf.WriteByte('}')
	case cue.ListKind:
		it, err := v.List()
		if err != nil {
			return err
		}
		e.buf.WriteByte('[')
		for i := 0; it.Next(); i++ {
			if i > 0 {
				e.buf.WriteByte(',')
			}
			// Elements inherit the field's name for the secret lints:
			// tokens: ["ghp_..."] is as secret as token: "ghp_...".
			if err := e.value(it.Value(), label); err != nil {
				return err
			}
		}
		e.buf.WriteByte(']')
	case cue.StringKind:
		s, err := v.String()
		if err != nil {
			return err
		}
		if e.lint != nil {
			lintString(v, label, s, e.pats, e.lint)
		}
		e.string(s)
	case cue.IntKind:
		// The same digits MarshalJSON writes, without its allocations.
		b, err := v.AppendInt(e.buf.AvailableBuffer(), 10)
		if err != nil {
			return err
		}
		e.buf.Write(b)
	case cue.FloatKind, cue.NumberKind:
		b, err := v.MarshalJSON()
		if err != nil {
			return err
		}
		e.buf.Write(b)
	case cue.BoolKind:
		b, err := v.Bool()
		if err != nil {
			return err
		}
		if b {
			e.buf.WriteString("true")
		} else {
			e.buf.WriteString("false")
		}
	case cue.NullKind:
		e.buf.WriteString("null")
	case cue.BytesKind:
		b, err := v.Bytes()
		if err != nil {
			return err
		}
		e.string(base64.StdEncoding.EncodeToString(b))
	default:
		if err := v.Err(); err != nil {
			return err
		}
		// Validate(Concrete) runs first, so this is only reached for values
		// it lets through.
		return fmt.Errorf("%s: cannot export value of kind %s", v.Path(), v.IncompleteKind())
	}
	return nil
}

// string writes s as a JSON string without HTML escaping. encoding/json
// does the escaping so that control characters, invalid UTF-8 and U+2028/9
// are written exactly as every other Go JSON producer writes them.
func (e *encoder) string(s string) {
	if e.enc == nil {
		e.enc = json.NewEncoder(&e.tmp)
		e.enc.SetEscapeHTML(false)
	}
	e.tmp.Reset()
	// Encoding a string cannot fail.
	_ = e.enc.Encode(s)
	e.buf.Write(bytes.TrimSuffix(e.tmp.Bytes(), []byte("\n")))
}
