package compiler

import (
	"path"
	"slices"
	"strings"

	"github.com/cuecast/cuecast"
)

// Index maps repo files to the configs whose output they can change. It is
// built from the directories each config's packages are loaded from: the
// config's own directory, its ancestors (files there join the package when
// they declare the same package name) and, transitively, every imported
// package's directory and ancestors. An Index is immutable once built and
// safe for concurrent use.
type Index struct {
	// deps maps each config to its dependency directories, sorted.
	deps map[cuecast.ConfigPath][]string
	// byDir maps a dependency directory to the configs that depend on it.
	byDir map[string][]cuecast.ConfigPath
	// embeds maps a config to its dependency directories whose package
	// embeds files (@extern(embed)): such a package may read any file
	// below its directory, so those files affect the config too.
	embeds map[cuecast.ConfigPath][]string
	// namespaces are the top-level directories declared in the manifest,
	// so a file in a directory no config existed in can be recognised as
	// a new config.
	namespaces map[string]bool
}

// newIndex builds the index of configs' dependency directories; embedDirs
// are the directories whose package embeds files.
func newIndex(deps map[cuecast.ConfigPath][]string, namespaces map[string]Namespace, embedDirs map[string]bool) *Index {
	ix := emptyIndex(len(deps))
	ix.namespaces = make(map[string]bool, len(namespaces))
	for ns := range namespaces {
		ix.namespaces[ns] = true
	}
	for cp, dirs := range deps {
		var embeds []string
		for _, d := range dirs {
			if embedDirs[d] && d != "." {
				embeds = append(embeds, d)
			}
		}
		ix.add(cp, dirs, embeds)
	}
	ix.sortDirs()
	return ix
}

func emptyIndex(n int) *Index {
	return &Index{
		deps:   make(map[cuecast.ConfigPath][]string, n),
		byDir:  make(map[string][]cuecast.ConfigPath),
		embeds: make(map[cuecast.ConfigPath][]string),
	}
}

func (ix *Index) add(cp cuecast.ConfigPath, dirs, embeds []string) {
	ix.deps[cp] = dirs
	if len(embeds) > 0 {
		ix.embeds[cp] = embeds
	}
	for _, d := range dirs {
		ix.byDir[d] = append(ix.byDir[d], cp)
	}
}

// holdsPackage reports whether dep, one of cp's dependency directories,
// holds one of its packages proper (its own directory or an import's)
// rather than only being an ancestor of its directory: non-.cue files
// there may be embedded, files in ancestors may not. (The root is never a
// dependency directory: its files are the manifest.)
func holdsPackage(cp cuecast.ConfigPath, dep string) bool {
	return !strings.HasPrefix(string(cp), dep+"/")
}

func (ix *Index) sortDirs() {
	for d, cps := range ix.byDir {
		slices.Sort(cps)
		ix.byDir[d] = slices.Compact(cps)
	}
}

// Configs returns the configs the index covers, sorted.
func (ix *Index) Configs() []cuecast.ConfigPath {
	out := make([]cuecast.ConfigPath, 0, len(ix.deps))
	for cp := range ix.deps {
		out = append(out, cp)
	}
	slices.Sort(out)
	return out
}

// Affected returns the configs, sorted, whose output a change to the given
// files can alter. changed holds repo-relative slash paths of files that
// were modified, added or deleted. The answer errs on the side of too many:
//
//   - any file under cue.mod/ or a .cue file in the repo root (the manifest)
//     affects every config;
//   - a .cue file in a directory some config loads from (its own, an
//     ancestor, an imported package's or its ancestors') affects that config,
//     whether the file is new, changed or deleted;
//   - any other file in a config's package directory affects it (CUE can
//     embed files), and so does any file below a directory whose package
//     embeds files (@embed(glob="data/*.json"));
//   - a .cue file in a directory below a namespace where no config existed
//     yet names the new config that directory becomes.
func (ix *Index) Affected(changed []string) []cuecast.ConfigPath {
	set := make(map[cuecast.ConfigPath]bool)
	for _, f := range changed {
		f = path.Clean(strings.TrimPrefix(f, "/"))
		if affectsAll(f) {
			return ix.Configs()
		}
		dir := path.Dir(f)
		isCUE := strings.HasSuffix(f, ".cue")
		if isCUE {
			for _, cp := range ix.byDir[dir] {
				set[cp] = true
			}
			if ns, _, ok := strings.Cut(dir, "/"); ok && ix.namespaces[ns] {
				if cp := cuecast.ConfigPath(dir); cp.Validate() == nil {
					set[cp] = true
				}
			}
			continue
		}
		for _, cp := range ix.byDir[dir] {
			if holdsPackage(cp, dir) {
				set[cp] = true
			}
		}
		ix.embedders(dir, set)
	}
	out := make([]cuecast.ConfigPath, 0, len(set))
	for cp := range set {
		out = append(out, cp)
	}
	slices.Sort(out)
	return out
}

// embedders adds to set the configs that load a package embedding files
// from dir: a package in dir or in one of its ancestors (the root aside)
// that declares @extern(embed).
func (ix *Index) embedders(dir string, set map[cuecast.ConfigPath]bool) {
	if len(ix.embeds) == 0 {
		return
	}
	for d := dir; d != "."; d = path.Dir(d) {
		for _, cp := range ix.byDir[d] {
			if slices.Contains(ix.embeds[cp], d) {
				set[cp] = true
			}
		}
	}
}

// AffectsAll reports whether a change to the file f (a repo-relative slash
// path) can alter every config: anything under cue.mod/ (the module) and
// any .cue file in the repo root (the manifest's package). Index.Affected,
// the tailer and the PR check all decide "everything" by it.
func AffectsAll(f string) bool { return affectsAll(path.Clean(strings.TrimPrefix(f, "/"))) }

func affectsAll(f string) bool {
	return f == "cue.mod" || strings.HasPrefix(f, "cue.mod/") || (path.Dir(f) == "." && strings.HasSuffix(f, ".cue"))
}

// Merge returns a new index: ix updated with newer, the index of a compile
// limited to some configs. Entries for the configs newer covers replace
// ix's; configs missing from present (the full list of configs in the repo,
// Result.Configs) are dropped. ix itself is not modified.
func (ix *Index) Merge(newer *Index, present []cuecast.ConfigPath) *Index {
	out := emptyIndex(len(ix.deps))
	out.namespaces = newer.namespaces
	keep := make(map[cuecast.ConfigPath]bool, len(present))
	for _, cp := range present {
		keep[cp] = true
	}
	for cp, d := range ix.deps {
		if _, replaced := newer.deps[cp]; !replaced && keep[cp] {
			out.add(cp, d, ix.embeds[cp])
		}
	}
	for cp, d := range newer.deps {
		if keep[cp] {
			out.add(cp, d, newer.embeds[cp])
		}
	}
	out.sortDirs()
	return out
}

// Uses reports whether some config the index covers depends on dir or on
// a directory below it.
func (ix *Index) Uses(dir string) bool {
	for d := range ix.byDir {
		if under(d, dir) {
			return true
		}
	}
	return false
}
