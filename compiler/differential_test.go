package compiler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gen"
)

// cueVersion is the cue CLI the differential test compares with: the
// version of cuelang.org/go in go.mod.
const cueVersion = "v0.17.1"

// cueCLI finds the cue command: $CUECAST_CUE, else cue on PATH, else
// $GOPATH/bin/cue. make test installs it and sets $CUECAST_CUE, and then a
// missing or wrong cue fails the test. A plain go test without any cue of
// the right version skips it, saying how to install one.
func cueCLI(t *testing.T) string {
	t.Helper()
	p, missing := findCueCLI(t)
	if p == "" {
		t.Skip(missing)
	}
	return p
}

// findCueCLI is cueCLI for a test that checks against cue where it can:
// without a cue of the right version it returns "" and why.
func findCueCLI(t *testing.T) (string, string) {
	t.Helper()
	var cands []string
	if p := os.Getenv("CUECAST_CUE"); p != "" {
		out, err := exec.Command(p, "version").Output()
		if err != nil || !strings.Contains(string(out), "cue version "+cueVersion) {
			t.Fatalf("$CUECAST_CUE=%s: want cue %s, got %q (%v)", p, cueVersion, out, err)
		}
		return p, ""
	}
	if p, err := exec.LookPath("cue"); err == nil {
		cands = append(cands, p)
	}
	if out, err := exec.Command("go", "env", "GOPATH").Output(); err == nil {
		cands = append(cands, filepath.Join(strings.TrimSpace(string(out)), "bin", "cue"))
	}
	for _, c := range cands {
		out, err := exec.Command(c, "version").Output()
		if err == nil && strings.Contains(string(out), "cue version "+cueVersion) {
			return c, ""
		}
	}
	return "", fmt.Sprintf("no cue %s found (set CUECAST_CUE, or go install cuelang.org/go/cmd/cue@%s)", cueVersion, cueVersion)
}

// diffCase is a repo on disk, with symlinks.
type diffCase struct {
	name  string
	files map[string]string
	links map[string]string // link -> target
}

// TestDifferentialCueExport compiles repos with cuecast and with `cue
// export`, config by config, and holds the two to the same verdict and, for
// valid configs, the same JSON. The repos: a generated one and the shapes
// cuecast once rejected although cue accepted them (vendored packages,
// @embed, ignored and @if-excluded files, directories of ignored files,
// symlinks). Their namespaces enforce no schema, because cue export does
// not apply cuecast's manifest.
func TestDifferentialCueExport(t *testing.T) {
	cue := cueCLI(t)
	base := map[string]string{
		"cue.mod/module.cue": "module: \"test.example/repo\"\nlanguage: version: \"v0.17.0\"\n",
		"cuecast.cue":        "package manifest\n\nnamespaces: web: owners: [\"team-web\"]\n",
		"web/site/site.cue":  "package site\n\ntitle: \"Hello\"\nratio: 1.50\nbig: 12345678901234567890\n",
	}
	cases := []diffCase{
		{name: "vendored", files: map[string]string{
			"cue.mod/pkg/vend.example/util/util.cue":   "package util\n\nimport \"vend.example/other\"\n\nX: 41 + other.Y\n",
			"cue.mod/pkg/vend.example/other/other.cue": "package other\n\nY: 1\n",
			"web/vendored/v.cue":                       "package vendored\n\nimport \"vend.example/util\"\n\nanswer: util.X\n",
		}},
		{name: "embed", files: map[string]string{
			"web/embedded/e.cue":     "@extern(embed)\n\npackage embedded\n\ndata: _ @embed(file=\"data.json\")\nall: _ @embed(glob=\"*.yaml\")\n",
			"web/embedded/data.json": `{"regions": ["eu-west-1"], "n": 1.0}`,
			"web/embedded/a.yaml":    "a: 1\n",
			"web/quoted/e.cue":       "@extern(\"embed\")\n\npackage quoted\n\ndata: _ @embed(file=\"data.json\")\n",
			"web/quoted/data.json":   `{"quoted": true}`,
		}},
		{name: "ignored and excluded files", files: map[string]string{
			"web/site/_draft.cue":  "package draft\n\ntitle: \"Draft\"\n",
			"web/site/never.cue":   "@if(never)\n\npackage other\n\nx: 1\n",
			"web/site/always.cue":  "@if(!never)\n\npackage site\n\nsubtitle: \"Always\"\n",
			"web/drafts/_only.cue": "package drafts\n\nv: 1\n",
			"web/site/.hidden.cue": "package hidden\n\ny: 1\n",
			"web/nested/a/b/b.cue": "package b\n\nb: true\n",
			"web/nested/a/a.cue":   "package a\n\na: true\n",
			"web/conflict/c.cue":   "package conflict\n\nx: 1\nx: 2\n",
			"web/incomplete/i.cue": "package incomplete\n\nx: int\n",
			"web/unicode/u.cue":    "package unicode\n\n\"ключ\": \"значение\"\n\"a<b>\": \"&\"\n",
			"web/stdlib/s.cue":     "package stdlib\n\nimport \"strings\"\n\nx: strings.ToUpper(\"abc\")\n",
			"web/defaults/d.cue":   "package defaults\n\nlevel: *\"info\" | \"debug\"\nn: *1 | int\n",
			"web/hidden/h.cue":     "package hidden\n\n_h: 1\n#D: {a: int}\nv: _h + 1\n",
		}},
		{name: "symlinks", files: map[string]string{
			"lib/shared/extra.cue": "package site\n\nfooter: \"shared\"\n",
		}, links: map[string]string{
			"web/site/shared.cue": "../../lib/shared/extra.cue",
			"docs/latest.md":      "missing.md",
		}},
	}
	// Attributes as cue reads them: only an @if before the package clause
	// selects files (one after it is a plain attribute), @tag arguments
	// may be quoted, and a tag that is not a dimension is no variant.
	attrs := `package manifest

namespaces: web: {owners: ["team-web"], dimensions: {env: ["staging", "prod"], region: ["eu", "us"]}}
`
	cases = append(cases, diffCase{name: "attributes", files: map[string]string{
		"cuecast.cue":              attrs,
		"web/late-if/a.cue":        "package lateif\n\n@if(prod)\n\nx: 1\n",
		"web/late-if-import/a.cue": "package lateifimport\n\nimport \"test.example/repo/lib/late\"\n\nx: late.y\n",
		"lib/late/l.cue":           "package late\n\nimport \"strings\"\n\n@if(eu)\n\ny: strings.ToUpper(\"eu\")\n",
		"web/early-if/a.cue":       "package earlyif\n\nx: *1 | int\n",
		"web/early-if/prod.cue":    "// Comment before the attribute.\n\n@if(prod)\n\npackage earlyif\n\nx: 2\n",
		"web/quoted-short/a.cue":   "package quotedshort\n\nenv: string @tag(env,short=\"staging|prod\")\n",
		"web/quoted-name/a.cue":    "package quotedname\n\nenv: string @tag(\"env\",short=staging|prod)\n",
		"web/spaced/a.cue":         "package spaced\n\nenv: string @tag( env , short = staging|prod , type = string )\n",
		"web/not-dims/a.cue":       "package notdims\n\nport: *8080 | int @tag(port,type=int)\ndebug: *false | bool @tag(debug,type=bool)\nowner: *\"x\" | string @tag(owner)\n",
		"web/decl-tag/a.cue":       "package decltag\n\ns: {\n\t@tag(env,short=staging|prod)\n\tx: 1\n}\n",
	}})
	g := gen.Repo(gen.Options{Configs: 12, Seed: 7})
	genCase := diffCase{name: "generated", files: map[string]string{}}
	for p, b := range g {
		genCase.files[p] = string(b)
	}
	// The generated manifest names a schema per namespace; cue export
	// does not apply it, so drop it (the configs embed it anyway).
	genCase.files["cuecast.cue"] = strings.ReplaceAll(genCase.files["cuecast.cue"], "\tschema: \""+gen.Module+"/schemas#Service\"\n", "")
	cases = append(cases, genCase)
	// Variants: a quarter of the configs read env (@tag) and region (an
	// @if file of a library they import); each variant is held to
	// `cue export -t <value>...`.
	gv := gen.Repo(gen.Options{Configs: 8, Seed: 7, Variants: true})
	varCase := diffCase{name: "generated variants", files: map[string]string{}}
	for p, b := range gv {
		varCase.files[p] = string(b)
	}
	varCase.files["cuecast.cue"] = strings.ReplaceAll(varCase.files["cuecast.cue"], "\tschema: \""+gen.Module+"/schemas#Service\"\n", "")
	cases = append(cases, varCase)

	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			files := tc.files
			if !strings.HasPrefix(tc.name, "generated") {
				files = make(map[string]string)
				for p, s := range base {
					files[p] = s
				}
				for p, s := range tc.files {
					files[p] = s
				}
			}
			writeRepo(t, dir, files)
			for link, target := range tc.links {
				full := filepath.Join(dir, filepath.FromSlash(link))
				if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(target, full); err != nil {
					t.Fatal(err)
				}
			}
			res, err := compiler.Compile(context.Background(), dir, compiler.Options{Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			failed := make(map[string]bool)
			for _, e := range res.Errors {
				if e.Config == "" {
					t.Errorf("error outside any config: %v", e)
				}
				failed[string(e.Config)] = true
			}
			// Which dimension values each config reads is cue's to say:
			// it refuses a tag no file of the exported package reads.
			dims := make(map[cuecast.ConfigPath]map[string][]string)
			reads := make(map[cuecast.ConfigPath]map[string]bool)
			for _, cp := range res.Configs {
				dims[cp] = res.Manifest.Namespaces[cp.Namespace()].Dimensions
				reads[cp] = cueReads(t, cue, dir, cp, dims[cp])
			}
			variants := 0
			for _, cp := range res.Configs {
				ix, ok := cuecast.ParseVariantIndex(res.Outputs[cp].JSON)
				if !ok {
					continue
				}
				if want := usedDims(dims[cp], reads[cp]); !slices.Equal(ix.Dimensions, want) {
					t.Errorf("%s: cuecast varies along %q, cue reads values of %q", cp, ix.Dimensions, want)
				}
				for _, vp := range ix.Variants {
					variants++
					args := []string{"export", "--out", "json", "./" + string(cp)}
					var tags []string
					for _, dv := range vp.Variant() {
						if reads[cp][dv.Value] {
							args = append(args, "-t", dv.Value)
							tags = append(tags, dv.Value)
						}
					}
					slices.Sort(tags)
					if o := res.Outputs[vp]; !slices.Equal(o.Tags, tags) {
						t.Errorf("%s: Output.Tags %q, want %q", vp, o.Tags, tags)
					}
					cmd := exec.Command(cue, args...)
					cmd.Dir = dir
					cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
					want, err := cmd.CombinedOutput()
					got, ok := res.Outputs[vp]
					switch {
					case err != nil:
						t.Errorf("%s: cue %s: %v: %s", vp, strings.Join(args, " "), err, want)
					case !ok:
						t.Errorf("%s: cue export succeeds but cuecast has no output", vp)
					case !sameJSON(t, got.JSON, want):
						t.Errorf("%s: cuecast %s, cue %s: %s", vp, got.JSON, strings.Join(args, " "), want)
					}
				}
			}
			if tc.name == "generated variants" && variants != 2*6 {
				t.Errorf("%d variants compared, want 12 (2 configs of 8 with 6 each)", variants)
			}
			for _, cp := range res.Configs {
				if _, ok := cuecast.ParseVariantIndex(res.Outputs[cp].JSON); ok {
					continue
				}
				if used := usedDims(dims[cp], reads[cp]); len(used) > 0 {
					t.Errorf("%s: cue reads values of %q, but cuecast compiled no variants (errors %v)", cp, used, res.Errors)
					continue
				}
				cmd := exec.Command(cue, "export", "--out", "json", "./"+string(cp))
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				want, cueErr := cmd.Output()
				got, ok := res.Outputs[cp]
				switch {
				case cueErr != nil && ok:
					t.Errorf("%s: cue export fails (%s) but cuecast compiled %s", cp, strings.TrimSpace(stderr.String()), got.JSON)
				case cueErr == nil && !ok:
					t.Errorf("%s: cue export succeeds but cuecast failed: failed=%v errors %v", cp, failed[string(cp)], res.Errors)
				case cueErr == nil && !sameJSON(t, got.JSON, want):
					t.Errorf("%s: cuecast %s, cue export %s", cp, got.JSON, want)
				}
			}
			// A directory below a namespace that cuecast does not call a
			// config is one cue cannot export either (no CUE files it reads).
			configs := make(map[string]bool)
			for _, cp := range res.Configs {
				configs[string(cp)] = true
			}
			err = filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(dir, p)
				rel = filepath.ToSlash(rel)
				ns, _, nested := strings.Cut(rel, "/")
				if !nested || configs[rel] || ns == "cue.mod" || ns == "lib" || ns == "schemas" {
					return nil
				}
				cmd := exec.Command(cue, "export", "--out", "json", "./"+rel)
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
				if out, err := cmd.CombinedOutput(); err == nil {
					t.Errorf("%s: cue export succeeds (%s) but cuecast has no such config", rel, out)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		})
	}
}

// writeRepo writes files (repo-relative path -> content) below dir.
func writeRepo(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for p, s := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// sameJSON compares two JSON documents as values, numbers by their text.
func sameJSON(t *testing.T, a, b []byte) bool {
	t.Helper()
	decode := func(b []byte) any {
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var v any
		if err := d.Decode(&v); err != nil {
			t.Fatalf("decode %s: %v", b, err)
		}
		return v
	}
	return reflect.DeepEqual(decode(a), decode(b))
}

// cueReads returns the values of dims that cue reads for config cp: those
// `cue export -t <value>` does not refuse as "not used in any file" (a
// value an @if of a file it loads names, or a shorthand of an @tag in its
// package).
func cueReads(t *testing.T, cue, dir string, cp cuecast.ConfigPath, dims map[string][]string) map[string]bool {
	t.Helper()
	read := make(map[string]bool)
	for _, vals := range dims {
		for _, v := range vals {
			cmd := exec.Command(cue, "export", "--out", "json", "./"+string(cp), "-t", v)
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "CUE_REGISTRY=none")
			out, _ := cmd.CombinedOutput()
			read[v] = !strings.Contains(string(out), fmt.Sprintf("tag %q not used in any file", v))
		}
	}
	return read
}

// usedDims returns, sorted, the dimensions of which some value is read.
func usedDims(dims map[string][]string, read map[string]bool) []string {
	var used []string
	for d, vals := range dims {
		if slices.ContainsFunc(vals, func(v string) bool { return read[v] }) {
			used = append(used, d)
		}
	}
	slices.Sort(used)
	return used
}
