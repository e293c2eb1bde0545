package compiler_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gen"
	"github.com/cuecast/cuecast/schemas"
)

// TestDeterministic compiles the same repo, including configs that fail,
// with different worker counts and compares every byte of the result.
func TestDeterministic(t *testing.T) {
	o := gen.Options{Configs: 48, Seed: 3}
	files := gen.Repo(o)
	// Some configs fail, so the error order is exercised too.
	for i := range 6 {
		p := gen.ConfigPath(o, i*7) + "/config.cue"
		files[p] = append(append([]byte(nil), files[p]...), []byte("port: 1\n")...)
	}
	var ref *compiler.Result
	for _, workers := range []int{1, 8, 3, 8} {
		res, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: files.MapFS(), Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Errors) == 0 || len(res.Outputs) == 0 {
			t.Fatalf("want both outputs and errors, got %d and %d", len(res.Outputs), len(res.Errors))
		}
		if ref == nil {
			ref = res
			continue
		}
		if !slices.Equal(res.Configs, ref.Configs) {
			t.Errorf("workers=%d: configs differ", workers)
		}
		if len(res.Outputs) != len(ref.Outputs) {
			t.Errorf("workers=%d: %d outputs, want %d", workers, len(res.Outputs), len(ref.Outputs))
		}
		for cp, o := range ref.Outputs {
			if got := res.Outputs[cp]; !bytes.Equal(got.JSON, o.JSON) || got.Checksum != o.Checksum || !slices.Equal(got.Files, o.Files) {
				t.Errorf("workers=%d: %s differs", workers, cp)
			}
		}
		if !slices.Equal(res.Errors, ref.Errors) {
			t.Errorf("workers=%d: errors differ:\n%v\nwant\n%v", workers, res.Errors, ref.Errors)
		}
	}
}

func TestErrorFormat(t *testing.T) {
	e := compiler.Error{Config: "app/api", File: "app/api/api.cue", Line: 4, Column: 7, ID: "cue", Message: "port: invalid value 80"}
	if got, want := e.Error(), "app/api/api.cue:4:7: port: invalid value 80 [cue]"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestNoModule(t *testing.T) {
	fsys := fstest.MapFS{"cuecast.cue": {Data: []byte("package manifest\n")}}
	_, err := compiler.Compile(context.Background(), "norepo", compiler.Options{FS: fsys})
	if !errors.Is(err, compiler.ErrNoModule) {
		t.Fatalf("got %v, want ErrNoModule", err)
	}
}

func TestCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := compiler.Compile(ctx, "../configs-example", compiler.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

// TestTimeout: a config that evaluates for far longer than its limit is
// reported as config/timeout and does not hold up the others.
func TestTimeout(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-base")
	fsys["web/slow/slow.cue"] = &fstest.MapFile{Data: []byte(`package slow

import "list"

// 122,500 comprehension steps: about two seconds under -race on 2 cores,
// many times the limit below (and no more: it runs on after it).
n: len([for a in list.Range(0, 350, 1) for b in list.Range(0, 350, 1) if a*b < 0 {a}])
`)}
	// The slow config gets a limit it cannot meet; what every config needs
	// (manifest, schemas) gets a minute, since on a loaded machine a few
	// milliseconds of work can take longer than the config's 100 ms (seen:
	// "manifest evaluation did not finish within 100ms" under -race at
	// load 15).
	opts := compiler.Options{FS: fsys, Timeout: 100 * time.Millisecond, SharedTimeout: time.Minute, Workers: 1}
	res, err := compiler.Compile(context.Background(), "slow", opts)
	if err != nil {
		t.Fatal(err)
	}
	var timedOut []cuecast.ConfigPath
	for _, e := range res.Errors {
		if e.ID == compiler.IDConfigTimeout {
			timedOut = append(timedOut, e.Config)
		}
	}
	if !slices.Contains(timedOut, "web/slow") {
		t.Fatalf("errors %v, want a config/timeout for web/slow", res.Errors)
	}
	// Reported at the slow comprehension, not at line 1 of the first file.
	i := slices.IndexFunc(res.Errors, func(e compiler.Error) bool { return e.Config == "web/slow" })
	if e := res.Errors[i]; e.File != "web/slow/slow.cue" || e.Line != 7 || !strings.Contains(e.Message, "comprehension with 2 for clause(s) in field n") {
		t.Errorf("timeout reported as %v; want it at web/slow/slow.cue:7 naming the comprehension in field n", e)
	}
	if _, ok := res.Outputs["web/slow"]; ok {
		t.Error("web/slow has an output despite timing out")
	}
}

func TestProgress(t *testing.T) {
	var calls, last atomic.Int64
	res, err := compiler.Compile(context.Background(), "../configs-example", compiler.Options{
		Progress: func(done, total int) {
			calls.Add(1)
			last.Store(int64(done*1000 + total))
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// One call per evaluation: a config without variants, or a variant
	// (search/suggest has four).
	var n int64
	for _, o := range res.Outputs {
		if _, index := cuecast.ParseVariantIndex(o.JSON); !index {
			n++
		}
	}
	if calls.Load() != n || last.Load() != n*1000+n {
		t.Errorf("progress called %d times ending at %d, want %d ending at %d/%d", calls.Load(), last.Load(), n, n, n)
	}
}

// TestDiskSymlinks uses a real directory: symlinks inside the repo are
// followed, one leaving it is rejected.
func TestDiskSymlinks(t *testing.T) {
	dir := t.TempDir()
	o := gen.Options{Configs: 4, Namespaces: 1, Libraries: 1}
	files := gen.Repo(o)
	files["shared/extra.cue"] = []byte("package svc0\n\nshared_extra: 1\n")
	if err := files.Write(dir); err != nil {
		t.Fatal(err)
	}
	outside := filepath.Join(t.TempDir(), "outside.cue")
	if err := os.WriteFile(outside, []byte("package svc1\n\nleaked: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg0, cfg1 := gen.ConfigPath(o, 0), gen.ConfigPath(o, 1)
	if err := os.Symlink("../../shared/extra.cue", filepath.Join(dir, cfg0, "extra.cue")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(dir, cfg1, "outside.cue")); err != nil {
		t.Fatal(err)
	}
	res, err := compiler.Compile(context.Background(), dir, compiler.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := res.Outputs[cuecast.ConfigPath(cfg0)]; !ok || !strings.Contains(string(out.JSON), `"shared_extra":1`) {
		t.Errorf("%s: want output including the symlinked file, got %s (errors %v)", cfg0, out.JSON, res.Errors)
	}
	if len(res.Errors) != 1 || res.Errors[0].ID != compiler.IDFileSymlinkEscape || res.Errors[0].File != cfg1+"/outside.cue" {
		t.Errorf("errors %v, want one %s at %s/outside.cue", res.Errors, compiler.IDFileSymlinkEscape, cfg1)
	}
	if _, ok := res.Outputs[cuecast.ConfigPath(cfg1)]; ok {
		t.Errorf("%s compiled despite its escaping symlink", cfg1)
	}
}

// TestDiskSymlinksIntoHiddenPaths: a symlink that stays inside the repo
// but leads into a hidden directory (.git above all, whose config can
// hold a CI token) is refused like one leaving it: compile and explain
// read the work tree, and printed .git/config through an @embed of such
// a link. Directly, and through a symlinked directory on the way.
func TestDiskSymlinksIntoHiddenPaths(t *testing.T) {
	dir := t.TempDir()
	o := gen.Options{Configs: 4, Namespaces: 1, Libraries: 1}
	if err := gen.Repo(o).Write(dir); err != nil {
		t.Fatal(err)
	}
	cfg1, cfg2, cfg3 := gen.ConfigPath(o, 1), gen.ConfigPath(o, 2), gen.ConfigPath(o, 3)
	pkg := func(cfg string) string { return path.Base(cfg) }
	if err := os.MkdirAll(filepath.Join(dir, ".git"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{
		".git/leak2.cue":    "package " + pkg(cfg2) + "\n\nleaked: \"token-2\"\n",
		".git/leak3.cue":    "package " + pkg(cfg3) + "\n\nleaked: \"token-3\"\n",
		".git/config":       "[http]\n\textraheader = AUTHORIZATION: basic token-1\n",
		cfg1 + "/embed.cue": "@extern(embed)\n\npackage " + pkg(cfg1) + "\n\nsecret: _ @embed(file=secret.txt, type=text)\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		cfg2 + "/leak.cue":   "../../.git/leak2.cue",
		cfg3 + "/d":          "../../.git",
		cfg3 + "/leak.cue":   "d/leak3.cue",
		cfg1 + "/secret.txt": "../../.git/config",
	} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := compiler.Compile(context.Background(), dir, compiler.Options{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for cfg, out := range res.Outputs {
		if strings.Contains(string(out.JSON), "token-") {
			t.Errorf("%s holds what .git holds: %s", cfg, out.JSON)
		}
	}
	if _, ok := res.Outputs[cuecast.ConfigPath(cfg1)]; ok {
		t.Errorf("%s compiled, though the file it embeds is a link into .git", cfg1)
	}
	for _, cfg := range []string{cfg2, cfg3} {
		if out, ok := res.Outputs[cuecast.ConfigPath(cfg)]; ok {
			t.Errorf("%s compiled through a link into .git: %s", cfg, out.JSON)
		}
		if !slices.ContainsFunc(res.Errors, func(e compiler.Error) bool {
			return e.ID == compiler.IDFileSymlinkEscape && e.File == cfg+"/leak.cue"
		}) {
			t.Errorf("no %s at %s/leak.cue; errors %v", compiler.IDFileSymlinkEscape, cfg, res.Errors)
		}
	}
}

// FuzzCompile feeds arbitrary manifest and config text through a whole
// compile. Whatever the input, Compile must not panic and must report
// problems as Result.Errors with a file and position, not as a Go error.
func FuzzCompile(f *testing.F) {
	base, _ := loadCase(f, "testdata/ok-base")
	f.Add(string(base["cuecast.cue"].Data), string(base["app/api/api.cue"].Data))
	for _, c := range []string{"bad-manifest-hold", "bad-schema-closed", "bad-incomplete", "bad-secret-jwt", "bad-import-cycle", "bad-multiple-packages", "bad-manifest-unknown-field", "bad-syntax"} {
		fsys, _ := loadCase(f, filepath.Join("testdata", c))
		f.Add(string(fsys["cuecast.cue"].Data), string(fsys["app/api/api.cue"].Data))
	}
	f.Add("package manifest\nnamespaces: app: owners: [\"x\"]\n", "package api\na: b\nb: a\n")
	f.Add("package manifest\nnamespaces: [string]: owners: [\"x\"]\n", "package api\n#A: {a: #A}\nx: #A\n")
	f.Add("", "")
	f.Fuzz(func(t *testing.T, manifest, config string) {
		fsys := fstest.MapFS{}
		for k, v := range base {
			fsys[k] = v
		}
		fsys["cuecast.cue"] = &fstest.MapFile{Data: []byte(manifest)}
		fsys["app/api/api.cue"] = &fstest.MapFile{Data: []byte(config)}
		res, err := compiler.Compile(context.Background(), "fuzz", compiler.Options{FS: fsys, Timeout: 5 * time.Second})
		if err != nil {
			t.Fatalf("Compile returned a Go error for repo content: %v", err)
		}
		for _, e := range res.Errors {
			if e.File == "" || e.Line < 1 || e.Column < 1 || e.ID == "" || e.Message == "" {
				t.Errorf("error without a full position: %#v", e)
			}
		}
		for cp, o := range res.Outputs {
			if o.Checksum != cuecast.Checksum(o.JSON) {
				t.Errorf("%s: checksum mismatch", cp)
			}
		}
	})
}

// TestConcurrentCompiles: the tailer, the PR check and the CLI may compile
// in one process at once; Compile keeps no shared state.
func TestConcurrentCompiles(t *testing.T) {
	const n = 3
	results := make(chan *compiler.Result, n)
	errs := make(chan error, n)
	for range n {
		go func() {
			res, err := compiler.Compile(context.Background(), "../configs-example", compiler.Options{Workers: 2})
			if err != nil {
				errs <- err
				return
			}
			results <- res
		}()
	}
	var first *compiler.Result
	for range n {
		select {
		case err := <-errs:
			t.Fatal(err)
		case res := <-results:
			if !res.OK() {
				t.Fatalf("errors: %v", res.Errors)
			}
			if first == nil {
				first = res
				continue
			}
			for cp, o := range first.Outputs {
				if res.Outputs[cp].Checksum != o.Checksum {
					t.Errorf("%s: checksum %s, want %s", cp, res.Outputs[cp].Checksum, o.Checksum)
				}
			}
		}
	}
}

// TestWarnUndeclaredNamespace: configs under a directory the manifest does
// not declare are a library to the compiler; a full compile says so in the
// log so the forgotten declaration is found.
func TestWarnUndeclaredNamespace(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-base")
	fsys["billing/invoices/invoices.cue"] = &fstest.MapFile{Data: []byte("package invoices\n\ndue_days: 30\n")}
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	res, err := compiler.Compile(context.Background(), "warn", compiler.Options{FS: fsys, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || slices.Contains(res.Configs, "billing/invoices") {
		t.Fatalf("got configs %v errors %v, want a valid compile without billing/invoices", res.Configs, res.Errors)
	}
	if !strings.Contains(buf.String(), "dir=billing") || strings.Contains(buf.String(), "dir=lib") {
		t.Errorf("log %q: want a warning about billing and none about lib", buf.String())
	}
}

// TestManifestTimeout: the manifest is evaluated under the same limit as
// configs, so a runaway manifest cannot hang the tailer.
func TestManifestTimeout(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-base")
	fsys["slow.cue"] = &fstest.MapFile{Data: []byte(`package manifest

import "list"

_n: len([for a in list.Range(0, 150, 1) for b in list.Range(0, 150, 1) if a*b < 0 {a}])
`)}
	res, err := compiler.Compile(context.Background(), "slow", compiler.Options{FS: fsys, Timeout: 200 * time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest != nil || len(res.Errors) != 1 || res.Errors[0].ID != compiler.IDConfigTimeout || res.Errors[0].File != "cuecast.cue" {
		t.Fatalf("manifest %v, errors %v; want no manifest and one %s at cuecast.cue", res.Manifest, res.Errors, compiler.IDConfigTimeout)
	}
}

// TestShippedSchemasImportable: a config repo that vendors cuecast's schemas
// package under cue.mod/pkg, as configs-example/README.md says, can name
// #FeatureFlag as a namespace schema and import it from a config.
func TestShippedSchemasImportable(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-base")
	const vendored = "cue.mod/pkg/github.com/cuecast/cuecast/schemas/"
	for name, b := range schemas.Files() {
		fsys[vendored+name] = &fstest.MapFile{Data: b}
	}
	fsys["cuecast.cue"].Data = append(slices.Clone(fsys["cuecast.cue"].Data), []byte(`
namespaces: flags: {
	owners: ["team-flags"]
	schema: "github.com/cuecast/cuecast/schemas#FeatureFlag"
}
`)...)
	fsys["flags/checkout-v2/flag.cue"] = &fstest.MapFile{Data: []byte(`package flag

description: "new checkout flow"
owner:       "team-payments"
enabled:     true
`)}
	fsys["flags/typed/flag.cue"] = &fstest.MapFile{Data: []byte(`package flag

import "github.com/cuecast/cuecast/schemas"

schemas.#FeatureFlag & {
	description: "typed"
	owner:       "team-flags"
}
`)}
	res, err := compiler.Compile(context.Background(), "schemas", compiler.Options{FS: fsys})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("errors: %v", res.Errors)
	}
	for cp, want := range map[cuecast.ConfigPath]string{
		"flags/checkout-v2": `{"allow":[],"deny":[],"description":"new checkout flow","enabled":true,"owner":"team-payments","rollout_percent":100}`,
		"flags/typed":       `{"allow":[],"deny":[],"description":"typed","enabled":false,"owner":"team-flags","rollout_percent":100}`,
	} {
		if got := string(res.Outputs[cp].JSON); got != want {
			t.Errorf("%s = %s, want %s", cp, got, want)
		}
	}
}

// TestParallelMatchesSerial compiles a repo large enough for several load
// batches per worker, with configs failing in different ways (a schema
// conflict, an incomplete value, a missing import, a syntax error, a broken
// shared library), serially and in parallel, and requires byte-identical
// outputs and the same errors in the same order. Run it under -race.
func TestParallelMatchesSerial(t *testing.T) {
	o := gen.Options{Configs: 130, Seed: 11}
	files := gen.Repo(o)
	appendTo := func(i int, s string) {
		p := gen.ConfigPath(o, i) + "/config.cue"
		files[p] = append(append([]byte(nil), files[p]...), []byte(s)...)
	}
	appendTo(3, "port: 1\n")
	appendTo(55, "extra: string\n")
	appendTo(77, "bad: {\n")
	appendTo(101, "replicas: \"three\"\n")
	appendTo(128, "port: 2\n")
	files[gen.ConfigPath(o, 90)+"/more.cue"] = []byte("package svc90\n\nimport \"" + gen.Module + "/lib/nosuch\"\n\nx: nosuch.X\n")
	// lib/l7 is imported by every tenth config, in every batch.
	files["lib/l7/l7.cue"] = append(append([]byte(nil), files["lib/l7/l7.cue"]...), []byte("Limits: cpu_millis: \"many\"\n")...)

	compile := func(workers int) *compiler.Result {
		t.Helper()
		res, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: files.MapFS(), Workers: workers})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	serial := compile(1)
	if len(serial.Outputs) < 100 || len(serial.Errors) < 15 {
		t.Fatalf("want many outputs and errors, got %d and %d", len(serial.Outputs), len(serial.Errors))
	}
	workers := []int{2, 4}
	if raceEnabled {
		workers = []int{2}
	}
	for _, w := range workers {
		par := compile(w)
		if !slices.Equal(par.Configs, serial.Configs) {
			t.Errorf("workers=%d: configs differ", w)
		}
		if len(par.Outputs) != len(serial.Outputs) {
			t.Errorf("workers=%d: %d outputs, want %d", w, len(par.Outputs), len(serial.Outputs))
		}
		for cp, o := range serial.Outputs {
			if got, ok := par.Outputs[cp]; !ok || !bytes.Equal(got.JSON, o.JSON) || got.Checksum != o.Checksum || !slices.Equal(got.Files, o.Files) {
				t.Errorf("workers=%d: %s differs", w, cp)
			}
		}
		if !slices.Equal(par.Errors, serial.Errors) {
			t.Errorf("workers=%d: errors differ:\n%v\nwant\n%v", w, par.Errors, serial.Errors)
		}
	}
}

// TestLoadDoesNotGrowWithRepo guards against the loader being offered the
// whole repo for every batch of configs: it lists each package's ancestor
// directories, a namespace directory lists all its configs, and compiling
// n configs took time in n². What a batch is offered must not depend on
// how many configs the repo holds.
func TestLoadDoesNotGrowWithRepo(t *testing.T) {
	maxFiles := func(configs int) int {
		t.Helper()
		files := gen.Repo(gen.Options{Configs: configs, Seed: 5})
		var mu sync.Mutex
		most := 0
		res, err := compiler.CompileLoads(context.Background(), "gen", compiler.Options{FS: files.MapFS()}, func(n int) {
			mu.Lock()
			defer mu.Unlock()
			most = max(most, n)
		})
		if err != nil {
			t.Fatal(err)
		}
		if !res.OK() || len(res.Outputs) != configs {
			t.Fatalf("%d configs: %d outputs, errors %v", configs, len(res.Outputs), res.Errors)
		}
		return most
	}
	small, large := maxFiles(60), maxFiles(240)
	if small == 0 || large > small+5 {
		t.Errorf("the loader is offered up to %d files per batch with 60 configs and %d with 240; want about the same", small, large)
	}
}

// TestManifestOnly: a manifest-only compile returns the manifest a full
// compile validates, and reads no config (a broken one reports nothing).
func TestManifestOnly(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-nested-configs")
	full, err := compiler.Compile(t.Context(), "repo", compiler.Options{FS: fsys})
	if err != nil || !full.OK() || full.Manifest == nil {
		t.Fatalf("full compile: %v %v", err, full.Errors)
	}
	fsys["app/api/broken.cue"] = &fstest.MapFile{Data: []byte("package api\n\nnot cue at all {\n")}
	res, err := compiler.Compile(t.Context(), "repo", compiler.Options{FS: fsys, ManifestOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || len(res.Configs) != 0 || len(res.Outputs) != 0 {
		t.Errorf("manifest-only: errors %v, configs %v, %d outputs; want none", res.Errors, res.Configs, len(res.Outputs))
	}
	if !reflect.DeepEqual(res.Manifest, full.Manifest) {
		t.Errorf("manifest-only manifest:\n got %+v\nwant %+v", res.Manifest, full.Manifest)
	}
}

// TestNamespaceDimensionOf: the one lookup of a value's dimension, which
// variants, the cross-namespace import check and the manifest's check
// share; a value the manifest wrongly lists twice belongs to the first
// dimension by name, the one the manifest error names first.
func TestNamespaceDimensionOf(t *testing.T) {
	ns := compiler.Namespace{Dimensions: map[string][]string{
		"env": {"staging", "prod"}, "region": {"eu", "us", "prod"}, "tier": {"prod"},
	}}
	for _, c := range []struct {
		value, dim string
		ok         bool
	}{{"staging", "env", true}, {"eu", "region", true}, {"us", "region", true}, {"prod", "env", true}, {"dev", "", false}, {"env", "", false}} {
		if dim, ok := ns.DimensionOf(c.value); dim != c.dim || ok != c.ok {
			t.Errorf("DimensionOf(%q) = %q, %v; want %q, %v", c.value, dim, ok, c.dim, c.ok)
		}
	}
	if dim, ok := (compiler.Namespace{}).DimensionOf("prod"); ok || dim != "" {
		t.Errorf("DimensionOf in a namespace without dimensions = %q, %v; want none", dim, ok)
	}
}
