package gen_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/gen"
)

func TestRepoIsDeterministic(t *testing.T) {
	a := gen.Repo(gen.Options{Configs: 30, Seed: 5})
	b := gen.Repo(gen.Options{Configs: 30, Seed: 5})
	if changed := gen.Changed(a, b); len(changed) != 0 {
		t.Errorf("same options, different files: %v", changed)
	}
	c := gen.Repo(gen.Options{Configs: 30, Seed: 6})
	if changed := gen.Changed(a, c); len(changed) == 0 {
		t.Error("a different seed changed nothing")
	}
}

func TestRepoShape(t *testing.T) {
	o := gen.Options{Configs: 20, Namespaces: 2, Libraries: 5}
	f := gen.Repo(o)
	var configs []string
	for _, p := range f.Paths() {
		if strings.HasSuffix(p, "/config.cue") {
			configs = append(configs, strings.TrimSuffix(p, "/config.cue"))
		}
	}
	if len(configs) != o.Configs {
		t.Fatalf("%d configs, want %d", len(configs), o.Configs)
	}
	for i := range o.Configs {
		if p := gen.ConfigPath(o, i); !slices.Contains(configs, p) {
			t.Errorf("ConfigPath(%d) = %s, not generated", i, p)
		}
	}
	for _, p := range []string{"cue.mod/module.cue", "cuecast.cue", "schemas/schemas.cue", "lib/base/base.cue", "lib/l4/l4.cue", "lib/ns/ns1/ns1.cue"} {
		if _, ok := f[p]; !ok {
			t.Errorf("missing %s", p)
		}
	}
}

func TestChanged(t *testing.T) {
	a := gen.Files{"x": []byte("1"), "y": []byte("2"), "gone": []byte("3")}
	b := a.Clone()
	b["y"] = []byte("changed")
	b["new"] = []byte("4")
	delete(b, "gone")
	if got, want := gen.Changed(a, b), []string{"gone", "new", "y"}; !slices.Equal(got, want) {
		t.Errorf("Changed = %v, want %v", got, want)
	}
	if len(a) != 3 || string(a["y"]) != "2" {
		t.Error("Clone shares the map with its source")
	}
}

func TestWriteAndMapFS(t *testing.T) {
	f := gen.Repo(gen.Options{Configs: 3})
	dir := t.TempDir()
	if err := f.Write(dir); err != nil {
		t.Fatal(err)
	}
	m := f.MapFS()
	for _, p := range f.Paths() {
		disk, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if string(disk) != string(f[p]) || string(m[p].Data) != string(f[p]) {
			t.Errorf("%s differs on disk or in the MapFS", p)
		}
	}
}
