package tailer

import (
	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// SetAfterPublish installs a hook run after each successful Publish and
// before the cursor moves: the window the crash test kills the process in.
func SetAfterPublish(t *Tailer, f func(cuecast.Version)) { t.afterPublish = f }

// Runaways returns the account of the tailer's abandoned evaluations.
func Runaways(t *Tailer) *compiler.Runaways { return t.runaways }
