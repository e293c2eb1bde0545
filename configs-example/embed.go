// Package example is configs-example embedded, so that `cuecast demo` runs
// from an installed binary, far from the source tree. The Go file is the
// only non-CUE file the compiler meets here, and it ignores it.
package example

import "embed"

// FS holds the example config repo, rooted at its top (cuecast.cue).
//
//go:embed cue.mod cuecast.cue schemas lib payments search growth README.md
var FS embed.FS
