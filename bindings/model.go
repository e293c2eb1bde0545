package bindings

import (
	"fmt"
	"slices"
	"strings"
	"unicode"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
)

// kind is the shape of a type in the model both the Go and the TypeScript
// writer print: what a CUE value allows, in the terms JSON has.
type kind int

const (
	kAny    kind = iota // anything: CUE top, or a disjunction of several kinds
	kBool               // bool
	kInt                // int
	kFloat              // float
	kNumber             // number (int | float)
	kString             // string, possibly one of enum
	kBytes              // bytes (base64 in JSON)
	kNull               // null
	kStruct             // a struct with named fields
	kMap                // a struct with no named fields, only a pattern
	kList               // an open list of elem
	kTuple              // a closed list: JSON arrays of any element type
	kRef                // a named type: ref
)

// typ is one type of the model.
type typ struct {
	kind kind
	// ref names the type for kRef (a key of model.named).
	ref string
	// enum lists the strings a kString allows, when it is a disjunction of
	// string literals.
	enum []string
	// fields are a kStruct's named fields, in CUE order.
	fields []field
	// rest is the type of the fields a kStruct does not name when it is
	// open (`...` or a pattern constraint); nil when it is closed.
	rest *typ
	// elem is a kMap's or kList's element type.
	elem *typ
	// nullable is set on a reference that closes a cycle: Go needs a
	// pointer there.
	nullable bool
}

// field is one field of a struct.
type field struct {
	name     string // the JSON name
	goName   string // from @go(Name), or the name in Go's case
	doc      string
	optional bool
	// zero is @go(,optional=zero): an optional field without a pointer.
	zero bool
	t    *typ
}

// namedType is a type the bindings declare by name: the schema
// definition itself, each definition it refers to, and each open struct
// (Go needs a name to hang its decoding methods on).
type namedType struct {
	name string
	doc  string
	t    *typ
}

// model is everything a writer needs: the root type and every named type,
// in the order they were met.
type model struct {
	root  string
	named []*namedType
	index map[string]*namedType
	// byRef maps a referenced definition (import path and path) to its
	// name, so that every reference to it shares one type.
	byRef      map[string]string
	inProgress map[string]bool
	// filling are the named types whose body is being mapped: an open
	// struct there is that type, not a new one.
	filling map[string]bool
}

// refKey names a definition by its package and path; root is the package
// ReferencePath returned.
func refKey(root cue.Value, p cue.Path) string {
	imp := ""
	if inst := root.BuildInstance(); inst != nil {
		imp = inst.ImportPath
	}
	return pkgKey(imp) + " " + p.String()
}

// pkgKey is an import path without its major version and qualifier
// (example.com/x@v0:x is example.com/x), as a manifest's schema: names it.
func pkgKey(imp string) string {
	if imp == "" {
		return ""
	}
	return ast.ParseImportPath(imp).Path
}

// newModel builds the model of def, the schema definition ref names
// ("<import path>#<Definition>"), naming its root type after it.
func newModel(def cue.Value, ref string) (*model, error) {
	root := rootName(ref)
	if err := def.Err(); err != nil {
		return nil, fmt.Errorf("schema: %w", err)
	}
	m := &model{root: root, index: make(map[string]*namedType), byRef: make(map[string]string), inProgress: make(map[string]bool), filling: make(map[string]bool)}
	// The names the Go file declares besides the types.
	for _, n := range []string{"Namespace", "Watch"} {
		m.index[n] = &namedType{name: n}
	}
	nt := m.declare(root, def)
	// A reference to the root from inside it (a cycle) is the root type.
	// A reference names the package it is in; a value built from a
	// string rather than a loaded package has none.
	imp, defName, _ := strings.Cut(ref, "#")
	for _, pkg := range []string{imp, ""} {
		m.byRef[pkgKey(pkg)+" "+cue.ParsePath("#"+defName).String()] = nt.name
	}
	m.filling[nt.name] = true
	t, err := m.typeOf(def, root)
	if err != nil {
		return nil, err
	}
	nt.t = t
	return m, nil
}

// declare reserves a name (made unique) for a named type and returns it.
func (m *model) declare(name string, v cue.Value) *namedType {
	base, n := name, 2
	for m.index[name] != nil {
		name = fmt.Sprintf("%s%d", base, n)
		n++
	}
	nt := &namedType{name: name, doc: docOf(v)}
	m.named = append(m.named, nt)
	m.index[name] = nt
	return nt
}

// typeOf maps v; hint names a nested open struct that needs a type name.
func (m *model) typeOf(v cue.Value, hint string) (*typ, error) {
	if t, ok, err := m.reference(v); ok || err != nil {
		return t, err
	}
	k := v.IncompleteKind()
	if k == cue.BottomKind && labels(v) != nil {
		// A struct with a comprehension on a field it leaves open
		// (if type == "bool" {…}) is incomplete, not wrong: its fields are
		// there.
		k = cue.StructKind
	}
	switch k {
	case cue.StructKind:
		return m.structOf(v, hint)
	case cue.ListKind:
		elem := v.LookupPath(cue.MakePath(cue.AnyIndex))
		if !elem.Exists() {
			return &typ{kind: kTuple}, nil
		}
		et, err := m.typeOf(elem, hint+"Item")
		if err != nil {
			return nil, err
		}
		return &typ{kind: kList, elem: et}, nil
	case cue.BoolKind:
		return &typ{kind: kBool}, nil
	case cue.IntKind:
		return &typ{kind: kInt}, nil
	case cue.FloatKind:
		return &typ{kind: kFloat}, nil
	case cue.NumberKind:
		return &typ{kind: kNumber}, nil
	case cue.StringKind:
		return &typ{kind: kString, enum: stringLiterals(v)}, nil
	case cue.BytesKind:
		return &typ{kind: kBytes}, nil
	case cue.NullKind:
		return &typ{kind: kNull}, nil
	}
	// Top, or a disjunction of several kinds: Go has no sum types.
	return &typ{kind: kAny}, nil
}

// reference maps a value that is a definition, or a conjunction equal to
// one, to a named type. A conjunction that adds fields to a definition
// (#Base & {currency?: …}) is not the definition and is mapped inline.
func (m *model) reference(v cue.Value) (*typ, bool, error) {
	cands := []cue.Value{v}
	if op, args := v.Expr(); op == cue.AndOp {
		// A definition whose fields include every field the other operands
		// name has the conjunction's shape; the others only narrow it
		// (#Flag & {salt: *Key | _}). Subsume cannot tell: a definition
		// with a comprehension on a field it leaves open is incomplete.
		cands = nil
		for i, a := range args {
			have := labels(a)
			covers := have != nil
			for j, o := range args {
				for l := range labels(o) {
					covers = covers && (i == j || have[l])
				}
			}
			if covers {
				cands = append(cands, a)
			}
		}
	}
	for _, c := range cands {
		root, p := c.ReferencePath()
		if !root.Exists() || len(p.Selectors()) == 0 {
			continue
		}
		name := goName(p, true)
		if name == "" {
			continue // not a definition: map the value itself
		}
		key := refKey(root, p)
		if got, ok := m.byRef[key]; ok {
			return &typ{kind: kRef, ref: got, nullable: m.inProgress[key]}, true, nil
		}
		def := cue.Dereference(c)
		nt := m.declare(name, def)
		m.byRef[key] = nt.name
		m.inProgress[key] = true
		m.filling[nt.name] = true
		t, err := m.typeOf(def, nt.name)
		delete(m.inProgress, key)
		delete(m.filling, nt.name)
		if err != nil {
			return nil, false, err
		}
		nt.t = t
		return &typ{kind: kRef, ref: nt.name}, true, nil
	}
	return nil, false, nil
}

// structOf maps a struct: named fields, and the type of the others when
// it is open. A struct with no named fields is a map.
func (m *model) structOf(v cue.Value, hint string) (*typ, error) {
	it, err := v.Fields(cue.Optional(true), cue.Patterns(true))
	if err != nil {
		return nil, fmt.Errorf("fields of %s: %w", hint, err)
	}
	t := &typ{kind: kStruct}
	var patterns []*typ
	for it.Next() {
		sel := it.Selector()
		fv := it.Value()
		if sel.ConstraintType() == cue.PatternConstraint {
			pt, err := m.typeOf(fv, hint+"Value")
			if err != nil {
				return nil, err
			}
			patterns = append(patterns, pt)
			continue
		}
		if sel.IsDefinition() || sel.PkgPath() != "" || strings.HasPrefix(sel.String(), "_") {
			continue // hidden and definitions are not in the JSON
		}
		name := sel.Unquoted()
		f := field{name: name, goName: goName(cue.MakePath(sel), false), doc: docOf(fv),
			optional: sel.ConstraintType() == cue.OptionalConstraint}
		a := fv.Attribute("go")
		if s, _ := a.String(0); s == "-" {
			continue
		} else if s != "" {
			f.goName = s
		}
		if s, _, _ := a.Lookup(1, "optional"); s == "zero" {
			f.zero = true
		}
		// Two CUE names can make one Go name (max_amount, maxAmount).
		for base, n := f.goName, 2; slices.ContainsFunc(t.fields, func(o field) bool { return o.goName == f.goName }); n++ {
			f.goName = fmt.Sprintf("%s%d", base, n)
		}
		if f.t, err = m.typeOf(fv, hint+exported(f.goName)); err != nil {
			return nil, err
		}
		t.fields = append(t.fields, f)
	}
	switch {
	case len(patterns) == 1:
		t.rest = patterns[0]
	case len(patterns) > 1:
		t.rest = &typ{kind: kAny}
	case v.LookupPath(cue.MakePath(cue.AnyString)).Err() == nil:
		// `...`; as gengotypes asks. (Allows says yes for a closed struct
		// that is incomplete.)
		t.rest = &typ{kind: kAny}
	}
	if len(t.fields) == 0 {
		if t.rest == nil {
			return t, nil // {}: a struct with nothing in it
		}
		return &typ{kind: kMap, elem: t.rest}, nil
	}
	if t.rest != nil && !m.filling[hint] {
		// Go hangs the decoding of the open part on a named type.
		nt := m.declare(hint, v)
		nt.t = t
		return &typ{kind: kRef, ref: nt.name}, nil
	}
	return t, nil
}

// labels is the set of fields a struct names (nil for no struct).
func labels(v cue.Value) map[string]bool {
	it, err := v.Fields(cue.Optional(true))
	if err != nil {
		return nil
	}
	out := make(map[string]bool)
	for it.Next() {
		out[it.Selector().String()] = true
	}
	return out
}

// stringLiterals returns the strings of a disjunction of string literals
// ("prod" | "staging"), nil for any other string.
func stringLiterals(v cue.Value) []string {
	if s, err := v.String(); err == nil && v.IsConcrete() {
		return []string{s}
	}
	op, args := v.Expr()
	if op != cue.OrOp {
		return nil
	}
	var out []string
	for _, a := range args {
		s, err := a.String()
		if err != nil || !a.IsConcrete() {
			return nil
		}
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

// goName makes a Go identifier of a CUE path as `cue exp gengotypes` does
// (definitions lose their #, nested selectors are joined, a leading digit
// gets an F), except that words split at any character Go does not allow
// are joined in mixed caps (max_amount_minor: MaxAmountMinor), the way Go
// names read. With defsOnly, a path that is not all definitions yields "".
func goName(p cue.Path, defsOnly bool) string {
	var sb strings.Builder
	for _, sel := range p.Selectors() {
		if defsOnly && !sel.IsDefinition() {
			return ""
		}
		s := sel.String()
		if sel.IsString() {
			s = sel.Unquoted()
		}
		s = strings.TrimRight(strings.TrimLeft(s, "#_"), "?!")
		sb.WriteString(exported(s))
	}
	return sb.String()
}

// exported is s in mixed caps, starting with an upper-case letter.
func exported(s string) string {
	var sb strings.Builder
	up := true
	for _, r := range s {
		switch {
		case unicode.IsLetter(r):
			if up {
				r = unicode.ToUpper(r)
			}
			sb.WriteRune(r)
			up = false
		case unicode.IsDigit(r):
			if sb.Len() == 0 {
				sb.WriteRune('F')
			}
			sb.WriteRune(r)
			up = true
		default:
			up = true
		}
	}
	if sb.Len() == 0 {
		return "X"
	}
	return sb.String()
}

// docOf is the doc comment CUE attached to v, without comment markers.
func docOf(v cue.Value) string {
	var lines []string
	for i, g := range v.Doc() {
		if i > 0 {
			lines = append(lines, "")
		}
		lines = append(lines, strings.Split(strings.TrimRight(g.Text(), "\n"), "\n")...)
	}
	return strings.Join(lines, "\n")
}
