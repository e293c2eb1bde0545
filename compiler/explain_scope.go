package compiler

import (
	"io/fs"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/cuecast/cuecast"
)

// scopeFS is a repo seen as only what one config can read: walkRepo lists
// the whole repo, which for one config of a large repo took most of
// Explain's time (BENCHMARKS.md), so Explain walks this view instead.
// ReadDir leaves out the subdirectories that are neither in full (or below
// one of them) nor on the way to one; everything else passes through.
type scopeFS struct {
	fsys fs.FS
	full []string        // directories kept with everything below them
	path map[string]bool // their ancestors, kept without their other subdirectories
}

func (s *scopeFS) Open(name string) (fs.File, error) { return s.fsys.Open(name) }

func (s *scopeFS) ReadFile(name string) ([]byte, error) { return fs.ReadFile(s.fsys, name) }

func (s *scopeFS) Stat(name string) (fs.FileInfo, error) { return fs.Stat(s.fsys, name) }

func (s *scopeFS) ReadLink(name string) (string, error) { return fs.ReadLink(s.fsys, name) }

func (s *scopeFS) Lstat(name string) (fs.FileInfo, error) { return fs.Lstat(s.fsys, name) }

func (s *scopeFS) ReadDir(name string) ([]fs.DirEntry, error) {
	ents, err := fs.ReadDir(s.fsys, name)
	if err != nil || s.keepsAll(name) {
		return ents, err
	}
	return slices.DeleteFunc(ents, func(e fs.DirEntry) bool {
		return e.IsDir() && !s.keeps(path.Join(name, e.Name()))
	}), nil
}

func (s *scopeFS) keepsAll(dir string) bool {
	for _, f := range s.full {
		if f == dir || strings.HasPrefix(dir, f+"/") {
			return true
		}
	}
	return false
}

func (s *scopeFS) keeps(dir string) bool { return s.path[dir] || s.keepsAll(dir) }

var _ fs.ReadDirFS = (*scopeFS)(nil)

// scopeForAll returns fsys limited to what any of cfgs can read: the
// union of scopeFor's views, which lists each directory's subdirectories
// that any of them lists.
func scopeForAll(fsys fs.FS, cfgs []cuecast.ConfigPath) (fs.FS, bool) {
	u := &scopeFS{fsys: fsys, path: make(map[string]bool)}
	for _, cfg := range cfgs {
		s, ok := scopeFor(fsys, cfg)
		if !ok {
			return nil, false
		}
		for _, f := range s.full {
			if !slices.Contains(u.full, f) {
				u.full = append(u.full, f)
			}
		}
		maps.Copy(u.path, s.path)
	}
	return u, true
}

// scopeFor returns fsys limited to what cfg can read: cue.mod, the root's
// files, cfg's directory and its ancestors, and the directories of every
// package of the module imported from there or named by the manifest (a
// schema), transitively. ok is false when fsys cannot show symlinks (the
// view would then hide them differently) or the module path is unknown;
// Explain then walks fsys whole.
func scopeFor(fsys fs.FS, cfg cuecast.ConfigPath) (*scopeFS, bool) {
	if _, ok := fsys.(fs.ReadLinkFS); !ok {
		return nil, false
	}
	mod, err := fs.ReadFile(fsys, "cue.mod/module.cue")
	if err != nil {
		return nil, false
	}
	modPath := modulePath(mod)
	if modPath == "" {
		return nil, false
	}
	s := &scopeFS{fsys: fsys, full: []string{"cue.mod", string(cfg)}, path: make(map[string]bool)}
	seen := map[string]bool{".": true}
	queue := append(ancestors(string(cfg)), string(cfg))
	// The manifest names its namespaces' schemas as "<import path>#<Def>".
	queue = append(queue, moduleImports(fsys, ".", modPath, true)...)
	for len(queue) > 0 {
		d := queue[0]
		queue = queue[1:]
		if seen[d] {
			continue
		}
		seen[d] = true
		if d != string(cfg) && !slices.Contains(ancestors(string(cfg)), d) {
			s.full = append(s.full, d)
		}
		queue = append(queue, ancestors(d)...)
		queue = append(queue, moduleImports(fsys, d, modPath, false)...)
	}
	for _, f := range s.full {
		for _, a := range ancestors(f) {
			s.path[a] = true
		}
	}
	for _, a := range ancestors(string(cfg)) {
		s.path[a] = true
	}
	return s, true
}

// schemaRef finds the import paths a manifest names in strings.
var schemaRef = regexp.MustCompile(`"([^"#\s]+)#`)

// moduleImports returns the directories of the module's packages that the
// .cue files directly in dir import, or, with strs, name in a string as a
// manifest names a schema.
func moduleImports(fsys fs.FS, dir, modPath string, strs bool) []string {
	ents, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil
	}
	var out []string
	add := func(imp string) {
		if rest, ok := strings.CutPrefix(imp, modPath+"/"); ok && rest != "" {
			out = append(out, path.Clean(rest))
		}
	}
	for _, e := range ents {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".cue") {
			continue
		}
		p := path.Join(dir, e.Name())
		src, err := fs.ReadFile(fsys, p)
		if err != nil || len(src) > MaxFileSize {
			continue
		}
		for _, imp := range parseHeader(p, src).imports {
			add(imp)
		}
		if strs {
			for _, m := range schemaRef.FindAllSubmatch(src, -1) {
				add(string(m[1]))
			}
		}
	}
	return out
}
