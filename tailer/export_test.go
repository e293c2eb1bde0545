package tailer

import (
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/compiler"
)

// SetAfterPublish installs a hook run after each successful Publish and
// before the cursor moves: the window the crash test kills the process in.
func SetAfterPublish(t *Tailer, f func(cuecast.Version)) { t.afterPublish = f }

// Runaways returns the account of the tailer's abandoned evaluations.
func Runaways(t *Tailer) *compiler.Runaways { return t.runaways }

// WithSharedTimeout sets the limit of the evaluations every config needs
// (module path, manifest, schemas) apart from c.Timeout.
func WithSharedTimeout(c Config, d time.Duration) Config {
	c.sharedTimeout = d
	return c
}
