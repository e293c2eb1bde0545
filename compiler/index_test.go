package compiler_test

import (
	"context"
	"io/fs"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/gen"
)

func TestAffected(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-nested-configs")
	res, err := compiler.Compile(context.Background(), "base", compiler.Options{FS: fsys, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("base repo has errors: %v", res.Errors)
	}
	all := []cuecast.ConfigPath{"app/api", "web/site", "web/site/eu"}
	tests := []struct {
		name    string
		changed []string
		want    []cuecast.ConfigPath
	}{
		{"module file", []string{"cue.mod/module.cue"}, all},
		{"anything under cue.mod", []string{"cue.mod/pkg/x.example/y/y.cue"}, all},
		{"manifest", []string{"cuecast.cue"}, all},
		{"new root file joins the manifest", []string{"owners.cue"}, all},
		{"imported library", []string{"lib/common/common.cue"}, []cuecast.ConfigPath{"app/api"}},
		{"new file in imported library", []string{"lib/common/more.cue"}, []cuecast.ConfigPath{"app/api"}},
		{"namespace schema, not imported", []string{"schemas/schemas.cue"}, []cuecast.ConfigPath{"app/api"}},
		{"own file", []string{"app/api/api.cue"}, []cuecast.ConfigPath{"app/api"}},
		{"new file in config dir", []string{"app/api/new.cue"}, []cuecast.ConfigPath{"app/api"}},
		{"new file in a config dir that is an ancestor of another", []string{"web/site/extra.cue"}, []cuecast.ConfigPath{"web/site", "web/site/eu"}},
		{"new file in namespace dir", []string{"web/common.cue"}, []cuecast.ConfigPath{"web/site", "web/site/eu"}},
		{"new config", []string{"web/blog/blog.cue"}, []cuecast.ConfigPath{"web/blog"}},
		{"new nested config", []string{"web/site/us/us.cue"}, []cuecast.ConfigPath{"web/site/us"}},
		{"deleted file", []string{"web/site/eu/eu.cue"}, []cuecast.ConfigPath{"web/site/eu"}},
		{"non-CUE file in config dir may be embedded", []string{"web/site/data.json"}, []cuecast.ConfigPath{"web/site"}},
		{"non-CUE file in namespace dir", []string{"web/README.md"}, nil},
		{"unrelated library", []string{"lib/other/other.cue"}, nil},
		{"file outside any package", []string{"docs/guide.md"}, nil},
		{"bad directory name is no config", []string{"web/Blog/blog.cue"}, nil},
		{"directory outside namespaces", []string{"ops/dns/dns.cue"}, nil},
		{"leading slash and dot segments", []string{"/app/./api/api.cue"}, []cuecast.ConfigPath{"app/api"}},
		{"several", []string{"lib/common/common.cue", "web/site/eu/eu.cue"}, []cuecast.ConfigPath{"app/api", "web/site/eu"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := res.Index.Affected(tt.changed)
			if !slices.Equal(got, tt.want) {
				t.Errorf("Affected(%q) = %v, want %v", tt.changed, got, tt.want)
			}
		})
	}
}

// TestIndexMerge: the tailer keeps one Index and refreshes the entries of
// the configs it recompiles.
func TestIndexMerge(t *testing.T) {
	files := gen.Repo(gen.Options{Configs: 8, Namespaces: 2, Libraries: 2})
	full, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: files.MapFS()})
	if err != nil || !full.OK() {
		t.Fatalf("full compile: %v %v", err, full.Errors)
	}
	cfg := gen.ConfigPath(gen.Options{Configs: 8, Namespaces: 2, Libraries: 2}, 0) // imports lib/l0
	if got := full.Index.Affected([]string{"lib/l1/l1.cue"}); slices.Contains(got, cuecast.ConfigPath(cfg)) {
		t.Fatalf("%s depends on lib/l1 before the edit", cfg)
	}
	// The config starts importing lib/l1 as well, and another is deleted.
	edited := files.Clone()
	src := string(edited[cfg+"/config.cue"])
	src = strings.Replace(src, "import (", "import (\n\tl1x \""+gen.Module+"/lib/l1\"", 1) + "\nmore_limits: l1x.Limits\n"
	edited[cfg+"/config.cue"] = []byte(src)
	deleted := gen.ConfigPath(gen.Options{Configs: 8, Namespaces: 2, Libraries: 2}, 1)
	delete(edited, deleted+"/config.cue")

	affected := full.Index.Affected(gen.Changed(files, edited))
	part, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: edited.MapFS(), Configs: affected})
	if err != nil || !part.OK() {
		t.Fatalf("partial compile: %v %v", err, part.Errors)
	}
	merged := full.Index.Merge(part.Index, part.Configs)
	if got := merged.Affected([]string{"lib/l1/l1.cue"}); !slices.Contains(got, cuecast.ConfigPath(cfg)) {
		t.Errorf("after merge, lib/l1 affects %v, want it to include %s", got, cfg)
	}
	if got := merged.Configs(); slices.Contains(got, cuecast.ConfigPath(deleted)) || len(got) != 7 {
		t.Errorf("after merge, index covers %v, want 7 configs without %s", got, deleted)
	}
	if got := full.Index.Affected([]string{"lib/l1/l1.cue"}); slices.Contains(got, cuecast.ConfigPath(cfg)) {
		t.Errorf("Merge modified the original index")
	}
}

// edit is one random change to a generated repo, of a kind the tailer sees.
type edit struct {
	name  string
	apply func(f gen.Files, r *rand.Rand, o gen.Options)
}

func randomConfig(r *rand.Rand, o gen.Options) (int, string) {
	i := r.IntN(o.Configs)
	return i, gen.ConfigPath(o, i)
}

func replaceIn(f gen.Files, p, old, new string) {
	if b, ok := f[p]; ok {
		f[p] = []byte(strings.Replace(string(b), old, new, 1))
	}
}

func edits() []edit {
	return []edit{
		{"change a config value", func(f gen.Files, r *rand.Rand, o gen.Options) {
			_, p := randomConfig(r, o)
			replaceIn(f, p+"/config.cue", "replicas: ", "replicas: 1"+string(rune('0'+r.IntN(5))))
		}},
		{"change a library value", func(f gen.Files, r *rand.Rand, o gen.Options) {
			l := gen.Lib(r.IntN(o.Libraries))
			replaceIn(f, "lib/"+l+"/"+l+".cue", "port: 900", "port: 800")
		}},
		{"new file in a config dir", func(f gen.Files, r *rand.Rand, o gen.Options) {
			i, p := randomConfig(r, o)
			f[p+"/extra.cue"] = []byte("package svc" + strconv.Itoa(i) + "\n\nextra: \"added\"\n")
		}},
		{"new file in a namespace dir joining one config", func(f gen.Files, r *rand.Rand, o gen.Options) {
			i, p := randomConfig(r, o)
			ns, _, _ := strings.Cut(p, "/")
			f[ns+"/joined.cue"] = []byte("package svc" + strconv.Itoa(i) + "\n\njoined: true\n")
		}},
		{"new file in a library that conflicts", func(f gen.Files, r *rand.Rand, o gen.Options) {
			l := gen.Lib(r.IntN(o.Libraries))
			f["lib/"+l+"/more.cue"] = []byte("package " + l + "\n\nLimits: cpu_millis: 1\n")
		}},
		{"new file in a library dir of another package", func(f gen.Files, r *rand.Rand, o gen.Options) {
			l := gen.Lib(r.IntN(o.Libraries))
			f["lib/"+l+"/other.cue"] = []byte("package other\n\nx: 1\n")
		}},
		{"delete a config", func(f gen.Files, r *rand.Rand, o gen.Options) {
			_, p := randomConfig(r, o)
			delete(f, p+"/config.cue")
		}},
		{"add a config", func(f gen.Files, r *rand.Rand, o gen.Options) {
			ns := gen.NS(r.IntN(o.Namespaces))
			f[ns+"/added/added.cue"] = []byte("package added\n\nname: \"added\"\nowner: \"team-" + ns + "\"\nenv: \"dev\"\nport: 2000\nreplicas: 1\nlimits: {cpu_millis: 1, memory_mb: 1}\n")
		}},
		{"add a nested config", func(f gen.Files, r *rand.Rand, o gen.Options) {
			i, p := randomConfig(r, o)
			f[p+"/eu/eu.cue"] = []byte("package svc" + strconv.Itoa(i) + "\n\nregion: \"eu\"\n")
		}},
		{"tighten the schema", func(f gen.Files, r *rand.Rand, o gen.Options) {
			replaceIn(f, "schemas/schemas.cue", "<=500", "<=10")
		}},
		{"change a namespace library", func(f gen.Files, r *rand.Rand, o gen.Options) {
			ns := gen.NS(r.IntN(o.Namespaces))
			replaceIn(f, "lib/ns/"+ns+"/"+ns+".cue", "owner: ", "tier: \"gold\"\n\towner: ")
		}},
		{"change the base library", func(f gen.Files, r *rand.Rand, o gen.Options) {
			replaceIn(f, "lib/base/base.cue", `*"2s"`, `*"3s"`)
		}},
		{"drop a namespace from the manifest", func(f gen.Files, r *rand.Rand, o gen.Options) {
			replaceIn(f, "cuecast.cue", "namespaces: "+gen.NS(o.Namespaces-1)+":", "_unused:")
		}},
		{"non-CUE file in a config dir", func(f gen.Files, r *rand.Rand, o gen.Options) {
			_, p := randomConfig(r, o)
			f[p+"/README.md"] = []byte("# notes\n")
		}},
		{"unrelated new library", func(f gen.Files, r *rand.Rand, o gen.Options) {
			f["lib/unused/unused.cue"] = []byte("package unused\n\nx: 1\n")
		}},
		{"syntax error in a config", func(f gen.Files, r *rand.Rand, o gen.Options) {
			_, p := randomConfig(r, o)
			replaceIn(f, p+"/config.cue", "settings: {", "settings: {{")
		}},
	}
}

// TestAffectedProperty: for random edits of generated repos, every config
// whose compiled result changes (checksum, validity, existence) is among
// the configs Affected names, and compiling only those gives the same
// bytes as compiling everything.
func TestAffectedProperty(t *testing.T) {
	iterations := 24
	if testing.Short() || raceEnabled {
		iterations = 6
	}
	r := rand.New(rand.NewPCG(2026, 11))
	es := edits()
	moved := 0
	for it := range iterations {
		o := gen.Options{Configs: 12, Namespaces: 3, Libraries: 4, Seed: uint64(it)}
		base := gen.Repo(o)
		before := compileFS(t, base, nil)
		edited := base.Clone()
		var names []string
		for range 1 + r.IntN(3) {
			e := es[r.IntN(len(es))]
			e.apply(edited, r, o)
			names = append(names, e.name)
		}
		changed := gen.Changed(base, edited)
		affected := before.Index.Affected(changed)
		after := compileFS(t, edited, nil)

		for _, cp := range unionConfigs(before, after) {
			if outcome(before, cp) != outcome(after, cp) {
				moved++
			}
			if outcome(before, cp) != outcome(after, cp) && !slices.Contains(affected, cp) {
				t.Errorf("iteration %d (%s): %s changed (%s -> %s) but Affected(%q) = %v",
					it, strings.Join(names, ", "), cp, outcome(before, cp), outcome(after, cp), changed, affected)
			}
		}
		if len(affected) == 0 {
			continue
		}
		part := compileFS(t, edited, affected)
		for _, cp := range affected {
			if got, want := outcome(part, cp), outcome(after, cp); got != want {
				t.Errorf("iteration %d (%s): %s incremental %s, full %s", it, strings.Join(names, ", "), cp, got, want)
			}
		}
	}
	// Guard against a generator or edit set that changes nothing, which
	// would make the property hold trivially.
	if moved < iterations {
		t.Errorf("only %d config outcomes changed over %d iterations; the edits are too weak", moved, iterations)
	}
}

func compileFS(t *testing.T, f gen.Files, configs []cuecast.ConfigPath) *compiler.Result {
	t.Helper()
	res, err := compiler.Compile(context.Background(), "gen", compiler.Options{FS: f.MapFS(), Configs: configs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func unionConfigs(a, b *compiler.Result) []cuecast.ConfigPath {
	out := slices.Concat(a.Configs, b.Configs)
	slices.Sort(out)
	return slices.Compact(out)
}

// outcome summarises what a compile did with one config.
func outcome(r *compiler.Result, cp cuecast.ConfigPath) string {
	if o, ok := r.Outputs[cp]; ok {
		return o.Checksum[:12]
	}
	if _, found := slices.BinarySearch(r.Configs, cp); found {
		return "error"
	}
	return "absent"
}

// TestAffectedEmbedBelowPackage: a package that embeds files can read any
// file below its directory (@embed(glob="data/*.json")), so a change there
// affects the configs loading that package; below a package that embeds
// nothing it affects none.
func TestAffectedEmbedBelowPackage(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-embed")
	fsys["web/embedded/embedded.cue"] = &fstest.MapFile{Data: []byte("@extern(embed)\n\npackage embedded\n\ndata: _ @embed(file=\"data.json\")\nmore: _ @embed(glob=\"extra/*.json\")\n")}
	fsys["web/embedded/extra/a.json"] = &fstest.MapFile{Data: []byte(`{"a": 1}`)}
	res, err := compiler.Compile(context.Background(), "base", compiler.Options{FS: fsys, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() {
		t.Fatalf("repo has errors: %v", res.Errors)
	}
	if _, ok := res.Outputs["web/embedded"]; !ok {
		t.Fatalf("web/embedded did not compile; configs %v", res.Configs)
	}
	tests := []struct {
		changed string
		want    []cuecast.ConfigPath
	}{
		{"web/embedded/extra/a.json", []cuecast.ConfigPath{"web/embedded"}},
		{"web/embedded/extra/new.json", []cuecast.ConfigPath{"web/embedded"}},
		{"web/embedded/extra/deeper/b.yaml", []cuecast.ConfigPath{"web/embedded"}},
		{"web/embedded/data.json", []cuecast.ConfigPath{"web/embedded"}},
		{"web/other/extra/a.json", nil},
	}
	for _, tt := range tests {
		if got := res.Index.Affected([]string{tt.changed}); !slices.Equal(got, tt.want) {
			t.Errorf("Affected(%q) = %v, want %v", tt.changed, got, tt.want)
		}
	}
}

// TestAffectsAll: the one rule for "this change can alter every config",
// which the tailer and the PR check use as Index.Affected does.
func TestAffectsAll(t *testing.T) {
	for f, want := range map[string]bool{
		"cue.mod":              true,
		"cue.mod/module.cue":   true,
		"cue.mod/pkg/x/y.json": true,
		"cuecast.cue":          true,
		"owners.cue":           true,
		"/cuecast.cue":         true,
		"./owners.cue":         true,
		"README.md":            false,
		"web/site/site.cue":    false,
		"cue.modx/a.cue":       false,
		"lib/cue.mod/a.cue":    false,
	} {
		if got := compiler.AffectsAll(f); got != want {
			t.Errorf("AffectsAll(%q) = %v, want %v", f, got, want)
		}
	}
}

// TestAffectedThroughSymlinkedFile: a config directory's CUE file that is a
// symlink is read like its target, so a change to the target file is a
// change to the config (it was not: check showed nothing and the tailer
// published no new version).
func TestAffectedThroughSymlinkedFile(t *testing.T) {
	fsys, _ := loadCase(t, "testdata/ok-base")
	fsys["shared/limits.cue"] = &fstest.MapFile{Data: []byte("package site\n\nlimit: 1\n"), Mode: 0o644}
	fsys["web/site/limits.cue"] = &fstest.MapFile{Data: []byte("../../shared/limits.cue"), Mode: fs.ModeSymlink | 0o777}
	res, err := compiler.Compile(context.Background(), "base", compiler.Options{FS: fsys, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if !res.OK() || !strings.Contains(string(res.Outputs["web/site"].JSON), `"limit":1`) {
		t.Fatalf("web/site does not compile with the linked file: errors %v, output %s", res.Errors, res.Outputs["web/site"].JSON)
	}
	for changed, want := range map[string][]cuecast.ConfigPath{
		"shared/limits.cue":   {"web/site"},
		"web/site/limits.cue": {"web/site"},
		"shared/other.cue":    {"web/site"}, // a file beside the target: the directory is a dependency
	} {
		if got := res.Index.Affected([]string{changed}); !slices.Equal(got, want) {
			t.Errorf("Affected(%q) = %v, want %v", changed, got, want)
		}
	}
}
