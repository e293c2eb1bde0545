package mutator

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/format"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// newValue is a value to write: its CUE text and its JSON.
type newValue struct {
	text string
	json json.RawMessage
}

// parseValue reads an assignment's value as one CUE literal, and its text
// to write is the literal as parsed: white space around it is dropped, and
// a comment or anything else beside it is refused, where written as given
// it would have commented out the rest of the line (and the fields on it).
// A bare word (or anything that does not parse) is a string when the
// current value is one, so region=eu needs no quotes.
func parseValue(cc *cue.Context, s string, current json.RawMessage) (newValue, error) {
	expr, err := parser.ParseExpr("value", s)
	if err == nil {
		// ParseExpr drops comments: whatever lies outside the expression
		// but white space is one.
		start, end := expr.Pos().Offset(), expr.End().Offset()
		if isLiteral(expr) {
			end = litEnd(expr)
		}
		for _, rest := range []string{s[:start], s[end:]} {
			if c := strings.TrimSpace(rest); c != "" {
				return newValue{}, fmt.Errorf("value %q: %q is a comment: a value is one CUE literal (say why in the reason)", s, c)
			}
		}
	}
	if err == nil && isLiteral(expr) {
		v := cc.BuildExpr(expr)
		if err := v.Err(); err != nil {
			return newValue{}, fmt.Errorf("value %q: %w", s, err)
		}
		js, err := v.MarshalJSON()
		if err != nil {
			return newValue{}, fmt.Errorf("value %q: %w", s, err)
		}
		text, err := format.Node(expr)
		if err != nil {
			return newValue{}, fmt.Errorf("value %q: %w", s, err)
		}
		return newValue{text: string(text), json: js}, nil
	}
	if len(current) > 0 && current[0] == '"' {
		switch {
		case strings.TrimSpace(s) != s:
			return newValue{}, fmt.Errorf("value %q: white space around a bare word: quote the string (\"…\") if it holds it", s)
		case strings.HasPrefix(s, `"`) || strings.HasPrefix(s, "#") || strings.HasPrefix(s, "'"):
			// A quoted string followed by more: "USD" "GBP".
			return newValue{}, fmt.Errorf("value %q is more than one CUE literal: give one quoted string", s)
		case strings.HasPrefix(s, "//") || strings.Contains(s, " //") || strings.Contains(s, "\t//"):
			return newValue{}, fmt.Errorf("value %q has a comment (//…): a value is one CUE literal; quote the string if it holds //", s)
		}
		js, _ := json.Marshal(s)
		return newValue{text: literal.String.Quote(s), json: js}, nil
	}
	return newValue{}, fmt.Errorf("value %q is not a CUE literal (a number, a quoted string, true, false or null)", s)
}

// isLiteral reports whether e is a scalar literal, a signed number included.
func isLiteral(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.BasicLit:
		return true
	case *ast.Ident:
		return e.Name == "true" || e.Name == "false" || e.Name == "null"
	case *ast.UnaryExpr:
		lit, ok := e.X.(*ast.BasicLit)
		return ok && (e.Op == token.SUB || e.Op == token.ADD) && (lit.Kind == token.INT || lit.Kind == token.FLOAT)
	}
	return false
}

// sameJSON reports whether two JSON scalars are the same value; numbers
// compare by value (1e3 is 1000).
func sameJSON(a, b json.RawMessage) bool {
	a, b = bytes.TrimSpace(a), bytes.TrimSpace(b)
	if bytes.Equal(a, b) {
		return true
	}
	x, okx := new(big.Rat).SetString(string(a))
	y, oky := new(big.Rat).SetString(string(b))
	if okx && oky {
		return x.Cmp(y) == 0
	}
	var sa, sb any
	if json.Unmarshal(a, &sa) != nil || json.Unmarshal(b, &sb) != nil {
		return false
	}
	ja, _ := json.Marshal(sa)
	jb, _ := json.Marshal(sb)
	return bytes.Equal(ja, jb)
}

// splice is one replacement in a file: bytes [start, end) become text.
type splice struct {
	start, end int
	text       string
}

// literalSpan finds the literal explain placed at line:col of src and
// returns its byte span: a number, string, bool or null, with its sign; for
// a default (*3) the literal after the star.
//
// With strict, the outermost expression there must be the literal: a value
// explain calls computed is edited only when it is a signed number (-5),
// never an operand of a larger expression (1 + x).
func literalSpan(name string, src []byte, line, col int, strict bool) (start, end int, err error) {
	off, ok := offsetOf(src, line, col)
	if !ok {
		return 0, 0, fmt.Errorf("%s:%d:%d: no such position", name, line, col)
	}
	f, err := parser.ParseFile(name, src, parser.ParseComments)
	if err != nil {
		return 0, 0, fmt.Errorf("parse %s: %w", name, err)
	}
	var found ast.Expr
	ast.Walk(f, func(n ast.Node) bool {
		if found != nil {
			return false
		}
		e, ok := n.(ast.Expr)
		if !ok || n.Pos().Offset() != off {
			return true
		}
		if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.MUL {
			e = u.X // a default: the literal after the star
		}
		if isLiteral(e) {
			found = e
			return false
		}
		return !strict
	}, nil)
	if found == nil {
		return 0, 0, fmt.Errorf("%s:%d:%d: no literal there", name, line, col)
	}
	return found.Pos().Offset(), litEnd(found), nil
}

func litEnd(e ast.Expr) int {
	switch e := e.(type) {
	case *ast.BasicLit:
		return e.Pos().Offset() + len(e.Value)
	case *ast.Ident:
		return e.Pos().Offset() + len(e.Name)
	case *ast.UnaryExpr:
		return litEnd(e.X)
	}
	return e.End().Offset()
}

// offsetOf converts a 1-based line and byte column to an offset.
func offsetOf(src []byte, line, col int) (int, bool) {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return 0, false
		}
		off += i + 1
	}
	off += col - 1
	return off, off >= 0 && off < len(src)
}

// lineCol converts an offset of src to a 1-based line and byte column.
func lineCol(src []byte, off int) (line, col int) {
	before := src[:off]
	return bytes.Count(before, []byte("\n")) + 1, off - bytes.LastIndexByte(before, '\n')
}

// apply applies splices to src, which must not overlap (two equal ones,
// the same literal reached twice, count once).
func apply(name string, src []byte, sp []splice) ([]byte, error) {
	sort.Slice(sp, func(i, j int) bool { return sp[i].start > sp[j].start })
	out := bytes.Clone(src)
	for i, s := range sp {
		if i > 0 && sp[i-1].start == s.start && sp[i-1].end == s.end {
			if sp[i-1].text != s.text {
				// Two assignments (a bulk change's configs) reach one
				// shared literal: the request's to fix.
				line, col := lineCol(src, s.start)
				return nil, badRequest("%s:%d:%d: the literal there would get two values, %s and %s: the configs share it; give it one value, or set each config's own with --at FILE", name, line, col, sp[i-1].text, s.text)
			}
			continue
		}
		if i > 0 && s.end > sp[i-1].start {
			line, col := lineCol(src, s.start)
			return nil, fmt.Errorf("%s:%d:%d: two edits overlap", name, line, col)
		}
		out = append(out[:s.start:s.start], append([]byte(s.text), out[s.end:]...)...)
	}
	if _, err := parser.ParseFile(name, out, parser.ParseComments); err != nil {
		return nil, fmt.Errorf("edited %s does not parse: %w", name, err)
	}
	return out, nil
}

// overrideField returns the CUE text of a field setting path to text, as
// one line (settings: max_suggestions: 8), or an error for a path with a
// list index, which a field cannot name.
func overrideField(path string, text string) (string, error) {
	p := cue.ParsePath(path)
	if err := p.Err(); err != nil {
		return "", fmt.Errorf("path %s: %w", path, err)
	}
	var labels []string
	for _, s := range p.Selectors() {
		if s.Type() != cue.StringLabel {
			return "", fmt.Errorf("path %s: --at adds a field, and %s is not one (a list element or a definition)", path, s)
		}
		labels = append(labels, s.String())
	}
	return strings.Join(labels, ": ") + ": " + text, nil
}

// newContext is the CUE context for reading values.
func newContext() *cue.Context { return cuecontext.New() }
