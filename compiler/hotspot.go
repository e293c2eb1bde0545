package compiler

import (
	"fmt"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/parser"
	"cuelang.org/go/cue/token"
)

// hotSpot is the construct most likely to have made an evaluation slow.
type hotSpot struct {
	file      string
	line, col int
	field     string // top-level field holding it; "" when none
	what      string // "a comprehension with 2 for clauses", …
	score     float64
}

// findHotSpot guesses where an evaluation that ran out of time spent it.
// CUE cannot be interrupted nor asked what it is doing, and it evaluates a
// package as a whole, so the time cannot be measured per field; instead the
// files are read for what makes CUE slow: comprehensions (cost multiplies
// with each for clause), disjunctions (alternatives multiply when
// disjunctions meet) and list.Range. The result is labelled a guess where it
// is reported.
func findHotSpot(files map[string][]byte, names []string) (hotSpot, bool) {
	var best hotSpot
	for _, name := range names {
		f, err := parser.ParseFile(name, files[name])
		if err != nil || f == nil {
			continue
		}
		for _, d := range f.Decls {
			field := ""
			if fd, ok := d.(*ast.Field); ok {
				if l, _, err := ast.LabelName(fd.Label); err == nil {
					field = l
				}
			}
			ast.Walk(d, func(n ast.Node) bool {
				score, what := cost(n)
				if score > best.score {
					p := n.Pos()
					best = hotSpot{file: name, line: p.Line(), col: p.Column(), field: field, what: what, score: score}
				}
				return true
			}, nil)
		}
	}
	return best, best.score > 0
}

// cost scores one node by how much work it can make.
func cost(n ast.Node) (float64, string) {
	switch n := n.(type) {
	case *ast.Comprehension:
		fors := 0
		for _, c := range n.Clauses {
			if _, ok := c.(*ast.ForClause); ok {
				fors++
			}
		}
		return 10 * float64(pow(8, fors)), fmt.Sprintf("a comprehension with %d for clause(s)", fors)
	case *ast.BinaryExpr:
		switch n.Op {
		case token.OR:
			alts := disjuncts(n)
			return float64(alts), fmt.Sprintf("a disjunction of %d alternatives", alts)
		case token.AND:
			// Disjunctions unified with each other multiply.
			prod, parts := 1, 0
			for _, x := range conjuncts(n) {
				if d := disjuncts(x); d > 1 {
					prod *= d
					parts++
				}
			}
			if parts > 1 {
				return float64(prod), fmt.Sprintf("%d disjunctions unified, %d combinations", parts, prod)
			}
		}
	case *ast.CallExpr:
		if sel, ok := n.Fun.(*ast.SelectorExpr); ok {
			name, _, _ := ast.LabelName(sel.Sel)
			if x, ok := sel.X.(*ast.Ident); ok && x.Name == "list" && (name == "Range" || name == "Repeat") {
				return 20, "a call of list." + name
			}
		}
	}
	return 0, ""
}

func disjuncts(x ast.Expr) int {
	if b, ok := x.(*ast.BinaryExpr); ok && b.Op == token.OR {
		return disjuncts(b.X) + disjuncts(b.Y)
	}
	if p, ok := x.(*ast.ParenExpr); ok {
		return disjuncts(p.X)
	}
	return 1
}

func conjuncts(x ast.Expr) []ast.Expr {
	if b, ok := x.(*ast.BinaryExpr); ok && b.Op == token.AND {
		return append(conjuncts(b.X), conjuncts(b.Y)...)
	}
	if p, ok := x.(*ast.ParenExpr); ok {
		return conjuncts(p.X)
	}
	return []ast.Expr{x}
}

func pow(b, e int) int {
	r := 1
	for range e {
		r *= b
	}
	return r
}
