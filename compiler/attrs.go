package compiler

import (
	"bytes"
	"fmt"
	"strings"

	"cuelang.org/go/cue"
	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// This file reads the attributes that decide what a config compiles to
// (@if, @ignore, @extern and @tag) exactly as cue/load and the CUE runtime
// do, so that each output and variant equals `cue export [-t <values>]`:
// the file attributes from the declarations before the package clause,
// and attribute arguments with CUE's own attribute parser, never by
// splitting text.

// buildAttr reads a file's build attribute as cue/load does
// (internal/buildattr): among the attributes before the package clause
// (or before the first other declaration), an @ignore leaves the file out
// and an @if decides by its expression. An @if after the package clause is
// a plain attribute and selects nothing. excluded is the decision with no
// build tag set; names are the tag names the @if reads. Two @ifs are an
// error the loader reports, so the file is kept and reads no names.
func buildAttr(decls []ast.Decl) (excluded bool, names []string) {
	var ifAttr *ast.Attribute
loop:
	for _, d := range decls {
		switch x := d.(type) {
		case *ast.Attribute:
			switch key, _ := x.Split(); key {
			case "ignore":
				return true, nil
			case "if":
				if ifAttr != nil {
					return false, nil
				}
				ifAttr = x
			}
		case *ast.CommentGroup:
		default:
			break loop
		}
	}
	if ifAttr == nil {
		return false, nil
	}
	_, body := ifAttr.Split()
	included, ok := buildTagsTrue(body)
	return ok && !included, ifIdents(body)
}

// tagAttr is one @tag attribute of a field: the tag's name and
// shorthands, where the attribute is written and where the field's value
// starts (explain places an injected value there).
type tagAttr struct {
	name      string
	short     []string
	line, col int
	value     token.Pos
}

// tagField is an @tag attribute found on a field, not yet parsed.
type tagField struct {
	attr      *ast.Attribute
	line, col int
	value     token.Pos
}

// findTags returns the @tag attributes of a file that cue/load injects
// into (cue/load's findTags): those on fields with a plain label, outside
// lists, comprehensions and pattern constraints, where cue refuses them
// (the loader reports that). A file that does not mention @tag( is not
// parsed.
func findTags(name string, src []byte) []tagField {
	if !bytes.Contains(src, []byte("@tag(")) {
		return nil
	}
	f, err := parser.ParseFile(name, src)
	if err != nil {
		return nil // the loader reports it
	}
	var out []tagField
	ast.Walk(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.ListLit, *ast.Comprehension:
			return false
		case *ast.Field:
			if _, _, err := ast.LabelName(x.Label); err != nil || x.Constraint != token.ILLEGAL {
				return false
			}
			for _, a := range x.Attrs {
				if a.Name() == "tag" {
					p := a.Pos()
					out = append(out, tagField{attr: a, line: p.Line(), col: p.Column(), value: x.Value.Pos()})
				}
			}
		}
		return true
	}, nil)
	return out
}

// attrParser parses attributes with CUE's attribute parser (the one
// cue/load uses), which the cue package exposes only on a value's
// attributes: the attributes are put on the fields of one struct, built
// once. Not safe for concurrent use.
type attrParser struct {
	ctx *cue.Context
}

// parse returns attrs as CUE reads them, in order.
func (p *attrParser) parse(attrs []*ast.Attribute) []cue.Attribute {
	if len(attrs) == 0 {
		return nil
	}
	if p.ctx == nil {
		p.ctx = cuecontext.New()
	}
	decls := make([]ast.Decl, len(attrs))
	for i, a := range attrs {
		decls[i] = &ast.Field{Label: ast.NewIdent(fmt.Sprintf("a%d", i)), Value: ast.NewNull(),
			Attrs: []*ast.Attribute{{Text: a.Text}}}
	}
	v := p.ctx.BuildFile(&ast.File{Decls: decls})
	out := make([]cue.Attribute, len(attrs))
	for i, a := range attrs {
		out[i] = v.LookupPath(cue.MakePath(cue.Str(fmt.Sprintf("a%d", i)))).Attribute(a.Name())
	}
	return out
}

// parseTags returns the tags of fields, in order. A tag whose name is not
// an identifier is left out, as cue refuses it (the loader reports that).
func (p *attrParser) parseTags(fields []tagField) []tagAttr {
	attrs := make([]*ast.Attribute, len(fields))
	for i, tf := range fields {
		attrs[i] = tf.attr
	}
	var out []tagAttr
	for i, a := range p.parse(attrs) {
		name, err := a.String(0)
		if err != nil || !ast.IsValidIdent(name) {
			continue
		}
		t := tagAttr{name: name, line: fields[i].line, col: fields[i].col, value: fields[i].value}
		if s, ok, _ := a.Lookup(1, "short"); ok {
			t.short = strings.Split(s, "|")
		}
		out = append(out, t)
	}
	return out
}

// externEmbed reports whether a file attribute @extern(...) declares
// embed, as the CUE runtime reads it (its first argument, unquoted). The
// plain @extern(embed) is answered without building a value: its
// argument is an identifier, which the parser returns as written.
func externEmbed(a *ast.Attribute) bool {
	_, body := a.Split()
	if b := strings.TrimSpace(body); ast.IsValidIdent(b) {
		return b == "embed"
	}
	var p attrParser
	k, err := p.parse([]*ast.Attribute{a})[0].String(0)
	return err == nil && k == "embed"
}

// tagsOf returns the @tag attributes of file f (read into the loader's
// file system), parsed once.
func (c *compilation) tagsOf(f string) []tagAttr {
	if ts, ok := c.tags[f]; ok {
		return ts
	}
	var ts []tagAttr
	if strings.HasSuffix(f, ".cue") {
		ts = c.attrs.parseTags(findTags(f, c.mem.files[f]))
	}
	c.tags[f] = ts
	return ts
}
