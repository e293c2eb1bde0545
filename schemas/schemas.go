// Package schemas embeds the CUE shipped with cuecast: the manifest schema
// (#Manifest) that every config repo's cuecast.cue is validated against, and
// a reference #FeatureFlag for repos to copy, and #FlagSet (flags.cue), the
// feature flags that package flags evaluates in-process (docs/FLAGS.md).
package schemas

import (
	"embed"
	"io/fs"
)

//go:embed *.cue
var files embed.FS

// Files returns the shipped CUE files by name.
func Files() map[string][]byte {
	out := make(map[string][]byte)
	ents, err := fs.ReadDir(files, ".")
	if err != nil {
		// The embedded FS is built into the binary; failing to list it means
		// the binary is broken, not that the caller did anything wrong.
		panic("schemas: read embedded files: " + err.Error())
	}
	for _, e := range ents {
		b, err := fs.ReadFile(files, e.Name())
		if err != nil {
			panic("schemas: read embedded " + e.Name() + ": " + err.Error())
		}
		out[e.Name()] = b
	}
	return out
}
