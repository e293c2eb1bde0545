// Package gen generates synthetic config repos for tests and benchmarks: a
// CUE module with a manifest, a schema package, a few libraries and any
// number of configs spread over namespaces. The same Options always produce
// the same bytes.
//
// Each config imports lib/base (through its namespace library) and one of
// the Libraries shared libraries, round-robin, so with the default of ten
// libraries a change to lib/l3 affects exactly 10% of the configs.
package gen

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing/fstest"
)

// Module is the module path of generated repos.
const Module = "gen.example/configs"

// Options shape a generated repo.
type Options struct {
	Configs    int    // number of configs; default 200
	Namespaces int    // default 4
	Libraries  int    // shared libraries lib/l0…; default 10
	Seed       uint64 // varies the values, not the shape
	// Variants makes every namespace declare three dimensions, env (dev,
	// staging, prod), region (eu, us) and tier (t1…t4): 24 combinations.
	// A quarter of the configs (UsesDimensions) read env with @tag and
	// region through lib/geo, whose eu.cue is @if(eu): 6 variants each.
	// No config reads tier, so a compile shows whether its cost follows
	// the variants compiled or the combinations declared.
	Variants bool
}

// UsesDimensions reports whether config i of a repo generated with
// Variants reads env and region (6 variants).
func UsesDimensions(o Options, i int) bool { return o.Variants && i%4 == 0 }

func (o *Options) defaults() {
	if o.Configs <= 0 {
		o.Configs = 200
	}
	if o.Namespaces <= 0 {
		o.Namespaces = 4
	}
	if o.Libraries <= 0 {
		o.Libraries = 10
	}
}

// Files maps repo-relative slash paths to contents.
type Files map[string][]byte

// Repo generates a repo.
func Repo(o Options) Files {
	o.defaults()
	r := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	f := make(Files)
	f["cue.mod/module.cue"] = []byte(fmt.Sprintf("module: %q\nlanguage: version: \"v0.17.0\"\n", Module+"@v0"))

	var man strings.Builder
	man.WriteString("package manifest\n\n")
	for n := range o.Namespaces {
		fmt.Fprintf(&man, "namespaces: %s: {\n\towners: [\"team-%s\"]\n\tschema: %q\n", NS(n), NS(n), Module+"/schemas#Service")
		fmt.Fprintf(&man, "\trollout: stages: [{name: \"canary\", percent: 1, hold: \"5m\"}, {name: \"all\", percent: 100}]\n")
		if o.Variants {
			fmt.Fprintf(&man, "\tdimensions: {\n\t\tenv: [\"dev\", \"staging\", \"prod\"]\n\t\tregion: [\"eu\", \"us\"]\n\t\ttier: [\"t1\", \"t2\", \"t3\", \"t4\"]\n\t}\n")
		}
		fmt.Fprintf(&man, "}\n")
	}
	f["cuecast.cue"] = []byte(man.String())

	f["schemas/schemas.cue"] = []byte(`package schemas

#Duration: =~"^[0-9]+(ms|s|m)$"

#Service: {
	name:     =~"^[a-z][a-z0-9-]*$"
	owner:    =~"^team-[a-z0-9-]+$"
	env:      "prod" | "staging" | "dev"
	port:     int & >=1024 & <=65535
	replicas: int & >=1 & <=500
	timeouts: [string]: #Duration
	limits: {
		cpu_millis: int & >0
		memory_mb:  int & >0
	}
	features: [string]: bool
	upstreams: [...{host: string, port: int, weight: int & >=0 & <=100}]
	...
}
`)
	f["lib/base/base.cue"] = []byte(`package base

import "` + Module + `/schemas"

#Defaults: schemas.#Service & {
	env:      *"prod" | _
	port:     *8080 | _
	replicas: *3 | _
	timeouts: {
		read:  *"2s" | schemas.#Duration
		write: *"5s" | schemas.#Duration
	}
	limits: {
		cpu_millis: *500 | _
		memory_mb:  *512 | _
	}
}

Regions: ["eu-west-1", "us-east-1", "ap-southeast-1"]
`)
	for l := range o.Libraries {
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\n", Lib(l))
		fmt.Fprintf(&b, "Upstreams: [\n")
		for u := range 3 {
			fmt.Fprintf(&b, "\t{host: \"svc-%d-%d.internal\", port: %d, weight: %d},\n", l, u, 9000+u, 20+r.IntN(30))
		}
		fmt.Fprintf(&b, "]\n\nFeatures: {\n")
		for k := range 5 {
			fmt.Fprintf(&b, "\tflag_%d_%d: %v\n", l, k, r.IntN(2) == 0)
		}
		fmt.Fprintf(&b, "}\n\nLimits: {cpu_millis: %d, memory_mb: %d}\n", 250*(1+r.IntN(8)), 256*(1+r.IntN(8)))
		f[fmt.Sprintf("lib/%s/%s.cue", Lib(l), Lib(l))] = []byte(b.String())
	}
	if o.Variants {
		f["lib/geo/geo.cue"] = []byte("package geo\n\nZone: *\"us-east-1\" | string\n")
		f["lib/geo/eu.cue"] = []byte("@if(eu)\n\npackage geo\n\nZone: \"eu-west-1\"\n")
	}
	for n := range o.Namespaces {
		f[fmt.Sprintf("lib/ns/%s/%s.cue", NS(n), NS(n))] = []byte(fmt.Sprintf(`package %s

import "%s/lib/base"

#Service: base.#Defaults & {
	owner: "team-%s"
}
`, NS(n), Module, NS(n)))
	}
	for i := range o.Configs {
		n, l := i%o.Namespaces, i%o.Libraries
		p := ConfigPath(o, i)
		var b strings.Builder
		fmt.Fprintf(&b, "package %s\n\nimport (\n\t\"%s/lib/base\"\n\t\"%s/lib/ns/%s\"\n\t\"%s/lib/%s\"\n)\n\n",
			pkgName(i), Module, Module, NS(n), Module, Lib(l))
		fmt.Fprintf(&b, "%s.#Service\n\n", NS(n))
		fmt.Fprintf(&b, "name:     %q\n", fmt.Sprintf("svc-%d", i))
		fmt.Fprintf(&b, "replicas: %d\n", 1+r.IntN(20))
		fmt.Fprintf(&b, "port:     %d\n", 1024+r.IntN(60000))
		fmt.Fprintf(&b, "timeouts: idle: \"%ds\"\n", 10+r.IntN(50))
		fmt.Fprintf(&b, "limits: %s.Limits\n", Lib(l))
		fmt.Fprintf(&b, "features: %s.Features & {\n\tnew_checkout: %v\n}\n", Lib(l), r.IntN(2) == 0)
		fmt.Fprintf(&b, "upstreams: %s.Upstreams\n", Lib(l))
		fmt.Fprintf(&b, "regions: [for r in base.Regions {name: r, weight: %d}]\n", r.IntN(100))
		fmt.Fprintf(&b, "settings: {\n")
		for k := range 8 {
			fmt.Fprintf(&b, "\tkey_%d: %q\n", k, fmt.Sprintf("value-%d-%d", i, r.IntN(1000)))
		}
		fmt.Fprintf(&b, "\tratio: %d.%02d\n}\n", r.IntN(10), r.IntN(100))
		if UsesDimensions(o, i) {
			// The layering idiom: lib/base's default env, replaced by
			// the injected one; replicas from a table keyed by env.
			fmt.Fprintf(&b, "\n_env: string @tag(env,short=dev|staging|prod)\n")
			fmt.Fprintf(&b, "env: _env\n")
			fmt.Fprintf(&b, "_replicas: {dev: 1, staging: 2, prod: %d}\n", 3+r.IntN(20))
			fmt.Fprintf(&b, "settings: replicas_for_env: _replicas[_env]\n")
			fmt.Fprintf(&b, "settings: zone: geo.Zone\n")
		}
		src := b.String()
		if UsesDimensions(o, i) {
			src = strings.Replace(src, "import (\n", "import (\n\t\""+Module+"/lib/geo\"\n", 1)
		}
		f[p+"/config.cue"] = []byte(src)
	}
	return f
}

// NS is the name of namespace n.
func NS(n int) string { return fmt.Sprintf("ns%d", n) }

// Lib is the package name of shared library l (directory lib/<Lib(l)>).
func Lib(l int) string { return fmt.Sprintf("l%d", l) }

// ConfigPath is the path of config i: "<ns>/svc<i>".
func ConfigPath(o Options, i int) string {
	o.defaults()
	return fmt.Sprintf("%s/svc%d", NS(i%o.Namespaces), i)
}

func pkgName(i int) string { return fmt.Sprintf("svc%d", i) }

// Clone copies f; the byte slices are shared, which is safe as long as
// callers replace contents rather than write into them.
func (f Files) Clone() Files {
	out := make(Files, len(f))
	for k, v := range f {
		out[k] = v
	}
	return out
}

// Paths returns the file paths, sorted.
func (f Files) Paths() []string {
	ps := make([]string, 0, len(f))
	for p := range f {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

// MapFS returns the files as an in-memory file system.
func (f Files) MapFS() fstest.MapFS {
	m := make(fstest.MapFS, len(f))
	for p, b := range f {
		m[p] = &fstest.MapFile{Data: b, Mode: 0o644}
	}
	return m
}

// Write writes the files under dir, creating directories as needed.
func (f Files) Write(dir string) error {
	for _, p := range f.Paths() {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return fmt.Errorf("create dir for %s: %w", p, err)
		}
		if err := os.WriteFile(full, f[p], 0o644); err != nil {
			return fmt.Errorf("write %s: %w", p, err)
		}
	}
	return nil
}

// Changed lists the paths that differ between a and b: added, removed or
// with different contents, sorted.
func Changed(a, b Files) []string {
	var out []string
	for p, x := range a {
		if y, ok := b[p]; !ok || string(x) != string(y) {
			out = append(out, p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, p)
		}
	}
	slices.Sort(out)
	return out
}
