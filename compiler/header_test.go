package compiler

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/gen"
)

// TestScanHeaderAgrees: wherever the scanner's fast path answers, it gives
// the parser's header; and it does answer for the plain headers most
// files have.
func TestScanHeaderAgrees(t *testing.T) {
	srcs := map[string]string{
		"plain.cue":      "package a\n\nimport \"x.example/m/lib\"\n\nv: lib.v\n",
		"group.cue":      "package a\n\nimport (\n\t\"x.example/m/lib\"\n\tn \"x.example/m/lib/net:net\"\n\t\"strings\"\n)\n\nv: 1\n",
		"twodecls.cue":   "package a\nimport \"a.example/x\"\nimport y \"a.example/y\"\nz: 1\n",
		"attrs.cue":      "@if(prod)\n@extern(embed)\npackage a\n\nimport \"a.example/x\"\n",
		"notprod.cue":    "@if(!prod && !dev)\npackage a\n",
		"badtag.cue":     "@if(prod ==)\npackage a\n",
		"after.cue":      "package a\n@if(never)\nimport \"a.example/x\"\n",
		"experiment.cue": "@experiment(aliasv2)\npackage a\n",
		"nopkg.cue":      "import \"a.example/x\"\nv: 1\n",
		"comments.cue":   "// doc\npackage a // trailing\n\n/* not CUE */ import \"a.example/x\" // why\n",
		"oneline.cue":    "package a\nimport (\"a.example/x\")\n",
		"noend.cue":      "package a\nimport \"a.example/x\"",
		"underscore.cue": "package _\n",
		"def.cue":        "package #a\n",
		"broken.cue":     "package a\nimport \"a.example/x\n",
		"garbage.cue":    "\x00\x01 package",
		"empty.cue":      "",
		"raw.cue":        "package a\nimport #\"a.example/x\"#\n",
		"escaped.cue":    "package a\nimport \"a.example/\\u0078\"\n",
		"nocomma.cue":    "package a import \"x\"\n",
		"missing.cue":    "package a\nimport\n",
		"data.cue":       "package a\n\nx: 1\n@if(prod)\n",
		"twoifs.cue":     "@if(prod)\n@if(dev)\npackage a\n",
		"ignore.cue":     "@ignore()\npackage a\n",
		"quoted.cue":     "@extern(\"embed\")\npackage a\n",
		"lateextern.cue": "package a\n@extern(embed)\n",
	}
	for name, b := range gen.Repo(gen.Options{Configs: 20, Seed: 1}) {
		if strings.HasSuffix(name, ".cue") {
			srcs[name] = string(b)
		}
	}
	for _, root := range []string{"testdata", "../configs-example", "../schemas", "../flags"} {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if strings.HasSuffix(p, ".cue") {
				srcs[p] = string(b)
			}
			if strings.HasSuffix(p, ".txtar") {
				// The fixtures' files: "-- name --" sections.
				for _, part := range strings.Split(string(b), "\n-- ")[1:] {
					head, body, _ := strings.Cut(part, "\n")
					if n := strings.TrimSuffix(head, " --"); strings.HasSuffix(n, ".cue") {
						srcs[p+"/"+n] = body
					}
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	fast := 0
	for name, src := range srcs {
		h, ok := scanHeader(name, []byte(src))
		if !ok {
			continue
		}
		fast++
		if want := parseHeaderAST(name, []byte(src)); !reflect.DeepEqual(h, want) {
			t.Errorf("%s: scanned header %+v, parsed %+v", name, h, want)
		}
	}
	t.Logf("fast path for %d of %d files", fast, len(srcs))
	if fast < len(srcs)*3/4 {
		t.Errorf("the fast path answered for %d of %d files, want most", fast, len(srcs))
	}
}

// TestHeaderBuildAttributes: a header reads the build attribute and
// @extern as cue/load and the CUE runtime do: only before the package
// clause, the arguments as CUE's attribute parser reads them; two @ifs are
// left for the loader to report.
func TestHeaderBuildAttributes(t *testing.T) {
	for _, c := range []struct {
		src      string
		excluded bool
		names    []string
		embeds   bool
	}{
		{src: "@if(prod)\npackage a\n", excluded: true, names: []string{"prod"}},
		{src: "// why\n@if(prod || dev)\n\npackage a\n", excluded: true, names: []string{"prod", "dev"}},
		{src: "@if(!prod)\npackage a\n", names: []string{"prod"}},
		{src: "package a\n\n@if(prod)\n\nx: 1\n"},
		{src: "package a\n\nimport \"strings\"\n\n@if(prod)\n\nx: strings.ToUpper(\"a\")\n"},
		{src: "@if(prod)\n@if(dev)\npackage a\n"},
		{src: "@ignore()\npackage a\n", excluded: true},
		{src: "@extern(embed)\npackage a\n", embeds: true},
		{src: "@extern( embed )\npackage a\n", embeds: true},
		{src: "@extern(\"embed\")\npackage a\n", embeds: true},
		{src: "@extern(other)\npackage a\n"},
		{src: "package a\n@extern(embed)\n"},
	} {
		for name, h := range map[string]header{"parseHeader": parseHeader("a.cue", []byte(c.src)), "parseHeaderAST": parseHeaderAST("a.cue", []byte(c.src))} {
			if h.excluded != c.excluded || !slices.Equal(h.ifNames, c.names) || h.embeds != c.embeds {
				t.Errorf("%s(%q): excluded %v names %q embeds %v, want %v %q %v", name, c.src, h.excluded, h.ifNames, h.embeds, c.excluded, c.names, c.embeds)
			}
		}
	}
}
