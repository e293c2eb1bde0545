package mutator_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"cuelang.org/go/cue/ast"
	"cuelang.org/go/cue/cuecontext"
	"cuelang.org/go/cue/literal"
	"cuelang.org/go/cue/parser"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gittest"
	"github.com/cuecast/cuecast/internal/golden"
	"github.com/cuecast/cuecast/mutator"
)

var update = flag.Bool("update", false, "rewrite testdata/shapes.golden from the edits made")

// readCases reads testdata/shapes.txt: "CONFIG PATH=VALUE" per line.
func readCases(t *testing.T) []mutator.Assignment {
	t.Helper()
	f, err := os.Open("testdata/shapes.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []mutator.Assignment
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		cfg, assign, _ := strings.Cut(line, " ")
		p, v := splitAssign(assign)
		out = append(out, mutator.Assignment{Config: cuecast.ConfigPath(cfg), Path: p, Value: v})
	}
	return out
}

// splitAssign splits PATH=VALUE at the first "=" outside quotes.
func splitAssign(a string) (string, string) {
	quoted := false
	for i, r := range a {
		switch {
		case r == '"':
			quoted = !quoted
		case r == '=' && !quoted:
			return a[:i], a[i+1:]
		}
	}
	return a, ""
}

// TestGoldenRoundTrip sets one value in each of the configs of
// testdata/shapes (every shape of CUE file the mutator must edit in place:
// comments everywhere, multi-line lists and structs, every string form,
// numbers in every notation, defaults, attributes, @if files, variants),
// all in one bulk commit, and checks that each file differs from the
// original in exactly the changed literal, that it matches its golden and
// that explain finds the new value at the same file:line.
func TestGoldenRoundTrip(t *testing.T) {
	t.Parallel()
	cases := readCases(t)
	if len(cases) < 50 {
		t.Fatalf("%d shapes, want at least 50", len(cases))
	}
	r := shapesRepo(t)
	base := r.Head()
	ctx := context.Background()
	res, err := mutator.New(r.Dir, mutator.Options{}).Set(ctx, mutator.Request{
		Set: cases, Reason: "golden round trip", Identity: alice, Mode: mutator.ModeCommit,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Values) != len(cases) {
		t.Fatalf("%d values set, want %d", len(res.Values), len(cases))
	}
	if parent := parentOf(t, r, res.Commit); parent != base {
		t.Errorf("commit's parent %s, want %s", parent, base)
	}
	cc := cuecontext.New()
	for i, v := range res.Values {
		a := cases[i]
		t.Run(string(a.Config), func(t *testing.T) {
			orig, err := os.ReadFile(filepath.Join("testdata/shapes", v.Edited.File))
			if err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(r.Dir, v.Edited.File))
			if err != nil {
				t.Fatal(err)
			}
			want := a.Value
			if e, err := parser.ParseExpr("v", a.Value); err != nil || isIdent(e) {
				want = literal.String.Quote(a.Value)
			}
			off := offset(t, orig, v.Edited.Line, v.Edited.Column)
			if orig[off] == '*' {
				off++ // explain placed the default at its star
			}
			// got = orig[:off] + want + orig[off+n:] for the n that leaves
			// the old literal, and nothing else, replaced.
			n := len(orig) - (len(got) - off - len(want)) - off
			if n <= 0 || off+n > len(orig) || !bytes.Equal(got[:off], orig[:off]) ||
				string(got[off:off+len(want)]) != want || !bytes.Equal(got[off+len(want):], orig[off+n:]) {
				t.Fatalf("%s changed beyond the literal at %s:\n--- before\n%s\n--- after\n%s", v.Edited.File, v.Edited, orig, got)
			}
			oldLit := string(orig[off : off+n])
			e, err := parser.ParseExpr("old", oldLit)
			if err != nil {
				t.Fatalf("replaced %q, which is not one literal: %v", oldLit, err)
			}
			js, err := cc.BuildExpr(e).MarshalJSON()
			if err != nil || !jsonEqual(js, v.Old) {
				t.Errorf("replaced %q (%s), but the old value was %s", oldLit, js, v.Old)
			}
			golden.Check(t, filepath.Join("testdata/shapes.golden", strings.ReplaceAll(string(a.Config.Base()), "/", "_")+"_"+path.Base(v.Edited.File)), got, *update)
			ex, err := compiler.Explain(ctx, r.Dir, a.Config, compiler.ExplainOptions{Path: a.Path})
			if err != nil {
				t.Fatal(err)
			}
			if len(ex.Values) != 1 {
				t.Fatalf("explain %s %s: %d values, want 1", a.Config, a.Path, len(ex.Values))
			}
			ev := ex.Values[0]
			if !jsonEqual(ev.JSON, v.New) {
				t.Errorf("explain after set: %s, want %s", ev.JSON, v.New)
			}
			if p := ev.Positions[0]; p.File != v.Edited.File || p.Line != v.Edited.Line {
				t.Errorf("explain after set places it at %s, want %s:%d", p, v.Edited.File, v.Edited.Line)
			}
		})
	}
}

func isIdent(e ast.Expr) bool {
	id, ok := e.(*ast.Ident)
	return ok && id.Name != "true" && id.Name != "false" && id.Name != "null"
}

func jsonEqual(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}

func offset(t *testing.T, src []byte, line, col int) int {
	t.Helper()
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			t.Fatalf("no line %d", line)
		}
		off += i + 1
	}
	return off + col - 1
}

func parentOf(t *testing.T, r *gittest.Repo, commit string) string {
	t.Helper()
	c, err := r.Git.CommitObject(plumbingHash(commit))
	if err != nil {
		t.Fatal(err)
	}
	return c.ParentHashes[0].String()
}
