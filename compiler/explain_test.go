package compiler_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// An explain golden case is a directory testdata/explain/<case>/ holding
// repo.txtar, laid over testdata/base.txtar as for TestGolden, and want.txt:
// one line per explained value (ExplainedValue.String), or the error. The
// archive comment names what to explain, one directive a line:
//
//	config: <a/b>             the config (required)
//	variant: env=prod,...     ExplainOptions.Variant
//	path: <cue path>          ExplainOptions.Path
func TestExplainGolden(t *testing.T) {
	dirs, err := filepath.Glob(filepath.Join("testdata", "explain", "*", "repo.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) == 0 {
		t.Fatal("no explain golden cases found")
	}
	for _, f := range dirs {
		dir := filepath.Dir(f)
		t.Run(filepath.Base(dir), func(t *testing.T) {
			fsys, _ := loadCase(t, dir)
			ar, err := txtar.ParseFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var cfg cuecast.ConfigPath
			opts := compiler.ExplainOptions{FS: fsys, Logger: testLogger(t)}
			for key, val := range caseDirectives(ar) {
				switch key {
				case "config":
					cfg = cuecast.ConfigPath(val)
				case "path":
					opts.Path = val
				case "variant":
					opts.Variant = make(map[string]string)
					for _, kv := range strings.Split(val, ",") {
						k, v, _ := strings.Cut(kv, "=")
						opts.Variant[k] = v
					}
				}
			}
			if cfg == "" {
				t.Fatal("repo.txtar's comment names no config:")
			}
			ex, err := compiler.Explain(context.Background(), dir, cfg, opts)
			sameWalks(t, dir, cfg, opts)
			var got strings.Builder
			var ce *compiler.CompileError
			switch {
			case errors.As(err, &ce):
				got.WriteString("compile error:\n")
				for _, e := range ce.Errors {
					got.WriteString(e.Error() + "\n")
				}
			case err != nil:
				got.WriteString("error: " + err.Error() + "\n")
			default:
				if opts.Variant == nil {
					sameAsCompile(t, fsys, cfg, ex)
				}
				for _, v := range ex.Values {
					got.WriteString(v.String() + "\n")
				}
			}
			checkGolden(t, filepath.Join(dir, "want.txt"), []byte(got.String()))
		})
	}
}

// sameWalks checks that explaining cfg over only what it can read gives
// what explaining it over the whole repo does, without Explain's retry.
func sameWalks(t *testing.T, dir string, cfg cuecast.ConfigPath, opts compiler.ExplainOptions) {
	t.Helper()
	scoped, err1 := compiler.ExplainWalk(context.Background(), dir, cfg, opts, true)
	whole, err2 := compiler.ExplainWalk(context.Background(), dir, cfg, opts, false)
	if fmt.Sprint(err1) != fmt.Sprint(err2) {
		t.Errorf("scoped walk: error %v, whole repo: %v", err1, err2)
	}
	if !reflect.DeepEqual(scoped, whole) {
		t.Errorf("scoped walk explains differently from the whole repo's:\n%+v\n%+v", scoped, whole)
	}
}

// sameAsCompile checks that Explain compiled cfg to what Compile does.
func sameAsCompile(t *testing.T, fsys fs.FS, cfg cuecast.ConfigPath, ex *compiler.Explanation) {
	t.Helper()
	res, err := compiler.Compile(context.Background(), "repo", compiler.Options{FS: fsys, Configs: []cuecast.ConfigPath{cfg}})
	if err != nil {
		t.Fatal(err)
	}
	out, ok := res.Outputs[cfg]
	if !ok {
		t.Fatalf("Compile has no output for %s: %v", cfg, res.Errors)
	}
	if string(out.JSON) != string(ex.JSON) {
		t.Errorf("Explain's output differs from Compile's:\ngot  %s\nwant %s", ex.JSON, out.JSON)
	}
}

// TestExplainVariantPath: a variant path (a changed row of a check, which
// the PR comment explains) names the config and its variant at once, and
// explains exactly what compile built for it; a combination compile does
// not build is ErrUnknownVariant, never another variant.
func TestExplainVariantPath(t *testing.T) {
	ctx := context.Background()
	res, err := compiler.Compile(ctx, "../configs-example", compiler.Options{Logger: testLogger(t)})
	if err != nil || !res.OK() {
		t.Fatalf("compile: %v %v", err, res.Errors)
	}
	const variant = "search/suggest/env=prod/region=eu"
	byPath, err := compiler.Explain(ctx, "../configs-example", variant, compiler.ExplainOptions{})
	if err != nil {
		t.Fatalf("explain %s: %v", variant, err)
	}
	byOpts, err := compiler.Explain(ctx, "../configs-example", "search/suggest",
		compiler.ExplainOptions{Variant: map[string]string{"env": "prod", "region": "eu"}})
	if err != nil {
		t.Fatalf("explain search/suggest --variant: %v", err)
	}
	if string(byPath.JSON) != string(res.Outputs[variant].JSON) || string(byOpts.JSON) != string(byPath.JSON) {
		t.Errorf("explain of %s does not give what compile built:\ncompile %s\npath    %s\noptions %s",
			variant, res.Outputs[variant].JSON, byPath.JSON, byOpts.JSON)
	}
	for _, bad := range []compiler.ExplainOptions{
		{Variant: map[string]string{"env": "prod", "region": "ap"}}, // no such value
		{Variant: map[string]string{"env": "prod"}},                 // region missing
	} {
		if _, err := compiler.Explain(ctx, "../configs-example", "search/suggest", bad); !errors.Is(err, compiler.ErrUnknownVariant) {
			t.Errorf("explain search/suggest %v: %v, want ErrUnknownVariant", bad.Variant, err)
		}
	}
	if _, err := compiler.Explain(ctx, "../configs-example", variant,
		compiler.ExplainOptions{Variant: map[string]string{"env": "staging"}}); !errors.Is(err, compiler.ErrUnknownVariant) {
		t.Errorf("a variant path and options that disagree: %v, want ErrUnknownVariant", err)
	}
}

// TestExplainDocExample runs docs/VARIANTS.md's explain examples on
// configs-example as written: each line shown is a line explain prints (a
// line cut with "…" starts one), with PATH as without.
func TestExplainDocExample(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "docs", "VARIANTS.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(doc), "## Explaining a value")
	_, block, _ := strings.Cut(section, "```\n")
	block, _, _ = strings.Cut(block, "```")
	var lines []string // what the current command prints
	ran := 0
	for _, l := range strings.Split(block, "\n") {
		cmd, isCmd := strings.CutPrefix(l, "$ cuecast explain --repo configs-example ")
		switch {
		case isCmd:
			args := strings.Fields(cmd)
			opts := compiler.ExplainOptions{}
			if len(args) > 1 {
				opts.Path = args[1]
			}
			ex, err := compiler.Explain(context.Background(), filepath.Join("..", "configs-example"), cuecast.ConfigPath(args[0]), opts)
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			lines = lines[:0]
			for _, v := range ex.Values {
				lines = append(lines, v.String())
			}
			ran++
		case strings.HasPrefix(l, "$ "):
			lines = nil // another repo's example
		case lines != nil && l != "":
			want, cut := strings.CutSuffix(l, ", …")
			if !slices.ContainsFunc(lines, func(got string) bool { return got == want || cut && strings.HasPrefix(got, want+", ") }) {
				t.Errorf("docs/VARIANTS.md shows\n%s\nbut explain prints\n%s", l, strings.Join(lines, "\n"))
			}
		}
	}
	if ran < 2 {
		t.Errorf("ran %d examples of docs/VARIANTS.md, want 2", ran)
	}
}

// TestExplainEachAgreesWithExplain: explaining configs together, on one
// plan, gives each the answer (explanation or error) Explain gives it
// alone, across namespaces, variant paths, a config with variants named
// without one and a config that does not exist.
func TestExplainEachAgreesWithExplain(t *testing.T) {
	ctx := context.Background()
	const repo = "../configs-example"
	res, err := compiler.Compile(ctx, repo, compiler.Options{Logger: testLogger(t)})
	if err != nil || !res.OK() {
		t.Fatalf("compile: %v %v", err, res.Errors)
	}
	var cfgs []cuecast.ConfigPath
	for p := range res.Outputs {
		cfgs = append(cfgs, p)
	}
	slices.Sort(cfgs)
	cfgs = append(cfgs, "search/nosuch", "nosuch/config")
	var got []string
	err = compiler.ExplainEach(ctx, repo, cfgs, compiler.ExplainOptions{}, func(cfg cuecast.ConfigPath, ex *compiler.Explanation, err error) error {
		got = append(got, explainAnswer(cfg, ex, err))
		return nil
	})
	if err != nil {
		t.Fatalf("ExplainEach: %v", err)
	}
	if len(got) != len(cfgs) {
		t.Fatalf("ExplainEach answered %d of %d configs", len(got), len(cfgs))
	}
	for i, cfg := range cfgs {
		ex, err := compiler.Explain(ctx, repo, cfg, compiler.ExplainOptions{})
		if want := explainAnswer(cfg, ex, err); got[i] != want {
			t.Errorf("%s: ExplainEach gives\n%s\nExplain gives\n%s", cfg, got[i], want)
		}
	}
}

// explainAnswer is everything an answer of Explain says, on lines.
func explainAnswer(cfg cuecast.ConfigPath, ex *compiler.Explanation, err error) string {
	if err != nil {
		return fmt.Sprintf("%s: error %v", cfg, err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s %v %s\n", ex.Config, ex.Variant, ex.JSON)
	for _, v := range ex.Values {
		b.WriteString(v.String() + "\n")
	}
	return b.String()
}
