package compiler_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// A golden case is a directory testdata/<case>/ holding repo.txtar (the
// input), want.json (the outputs) and want.err (the errors, one per line, as
// "file:line:col: message [ID]"). Unless the archive's comment says "nobase",
// its files are laid over testdata/base.txtar, a small valid repo, so each
// case shows only what it is about.
//
// The archive comment may also hold directives, one per line:
//
//	nobase                        start from an empty repo
//	delete: <path>                remove a base file
//	symlink: <path> -> <target>   add a symbolic link
//	unescape: <path>              decode \xNN escapes in that file
//	repeat: <path> <n>            repeat that file's content n times
//	configs: <a/b> [<c/d> ...]    set Options.Configs
func TestGolden(t *testing.T) {
	ents, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		if _, err := os.Stat(filepath.Join("testdata", e.Name(), "repo.txtar")); err != nil {
			continue
		}
		n++
		t.Run(e.Name(), func(t *testing.T) {
			dir := filepath.Join("testdata", e.Name())
			fsys, opts := loadCase(t, dir)
			opts.FS = fsys
			opts.Logger = testLogger(t)
			res, err := compiler.Compile(context.Background(), e.Name(), opts)
			if err != nil {
				t.Fatalf("Compile: %v", err)
			}
			checkGolden(t, filepath.Join(dir, "want.json"), renderOutputs(t, res))
			checkGolden(t, filepath.Join(dir, "want.err"), renderErrors(res))
		})
	}
	if n == 0 {
		t.Fatal("no golden cases found")
	}
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug}))
}

func loadCase(t testing.TB, dir string) (fstest.MapFS, compiler.Options) {
	t.Helper()
	ar, err := txtar.ParseFile(filepath.Join(dir, "repo.txtar"))
	if err != nil {
		t.Fatal(err)
	}
	fsys := make(fstest.MapFS)
	var opts compiler.Options
	directives := strings.Split(string(ar.Comment), "\n")
	useBase := true
	for _, d := range directives {
		if strings.TrimSpace(d) == "nobase" {
			useBase = false
		}
	}
	if useBase {
		base, err := txtar.ParseFile(filepath.Join("testdata", "base.txtar"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range base.Files {
			fsys[f.Name] = &fstest.MapFile{Data: f.Data, Mode: 0o644}
		}
	}
	for _, f := range ar.Files {
		fsys[f.Name] = &fstest.MapFile{Data: f.Data, Mode: 0o644}
	}
	for key, val := range caseDirectives(ar) {
		switch key {
		case "delete":
			delete(fsys, val)
		case "symlink":
			from, to, _ := strings.Cut(val, "->")
			fsys[strings.TrimSpace(from)] = &fstest.MapFile{Data: []byte(strings.TrimSpace(to)), Mode: fs.ModeSymlink | 0o777}
		case "unescape":
			f := fsys[val]
			s, err := strconv.Unquote(`"` + strings.ReplaceAll(strings.ReplaceAll(string(f.Data), `"`, `\"`), "\n", `\n`) + `"`)
			if err != nil {
				t.Fatalf("unescape %s: %v", val, err)
			}
			f.Data = []byte(s)
		case "repeat":
			name, count, _ := strings.Cut(val, " ")
			k, err := strconv.Atoi(count)
			if err != nil {
				t.Fatalf("repeat: %v", err)
			}
			f := fsys[name]
			f.Data = bytes.Repeat(f.Data, k)
		case "configs":
			for _, c := range strings.Fields(val) {
				opts.Configs = append(opts.Configs, cuecast.ConfigPath(c))
			}
		}
	}
	return fsys, opts
}

// caseDirectives are the "key: value" lines of a case's comment, trimmed,
// in order (repo.txtar's directives, which loadCase and the explain cases
// read).
func caseDirectives(ar *txtar.Archive) iter.Seq2[string, string] {
	return func(yield func(string, string) bool) {
		for _, d := range strings.Split(string(ar.Comment), "\n") {
			key, val, ok := strings.Cut(strings.TrimSpace(d), ":")
			if ok && !yield(key, strings.TrimSpace(val)) {
				return
			}
		}
	}
}

type goldenOutput struct {
	Checksum string   `json:"checksum"`
	JSON     string   `json:"json"`
	Files    []string `json:"files"`
	Tags     []string `json:"tags,omitempty"`
}

type goldenResult struct {
	Configs []cuecast.ConfigPath                `json:"configs"`
	Outputs map[cuecast.ConfigPath]goldenOutput `json:"outputs"`
}

func renderOutputs(t *testing.T, res *compiler.Result) []byte {
	g := goldenResult{Configs: res.Configs, Outputs: make(map[cuecast.ConfigPath]goldenOutput)}
	for cp, o := range res.Outputs {
		if o.Checksum != cuecast.Checksum(o.JSON) {
			t.Errorf("%s: checksum %s, want %s", cp, o.Checksum, cuecast.Checksum(o.JSON))
		}
		if !json.Valid(o.JSON) {
			t.Errorf("%s: output is not valid JSON: %s", cp, o.JSON)
		}
		g.Outputs[cp] = goldenOutput{Checksum: o.Checksum, JSON: string(o.JSON), Files: o.Files, Tags: o.Tags}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "\t")
	if err := enc.Encode(g); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func renderErrors(res *compiler.Result) []byte {
	var buf bytes.Buffer
	for _, e := range res.Errors {
		cfg := ""
		if e.Config != "" {
			cfg = " config=" + string(e.Config)
		}
		fmt.Fprintf(&buf, "%s%s\n", e.Error(), cfg)
		if e.Fix != "" {
			fmt.Fprintf(&buf, "\tfix: %s\n", e.Fix)
		}
	}
	return buf.Bytes()
}

func checkGolden(t *testing.T, file string, got []byte) {
	t.Helper()
	golden.Check(t, file, got, *update)
}
