package compiler_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/compiler"
)

// TestIDsListsEveryID: IDs, which the metrics export at 0 from the start
// (docs/OPERATIONS.md, "every ID the compiler defines"), names each ID
// constant of errors.go; four added since the list was written by hand
// were missing from cuecast_validation_rejections_total.
func TestIDsListsEveryID(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "errors.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			vs := s.(*ast.ValueSpec)
			for i, n := range vs.Names {
				if !strings.HasPrefix(n.Name, "ID") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				if !ok || lit.Kind != token.STRING {
					continue
				}
				v, err := strconv.Unquote(lit.Value)
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, v)
			}
		}
	}
	if len(want) < 20 {
		t.Fatalf("found %d ID constants in errors.go; the parse is wrong", len(want))
	}
	got := compiler.IDs()
	slices.Sort(want)
	if !slices.Equal(slices.Sorted(slices.Values(got)), want) {
		t.Errorf("IDs() = %v\nwant the constants of errors.go: %v", got, want)
	}
}
