package tailer

import "github.com/cuecast/cuecast"

// SetAfterPublish installs a hook run after each successful Publish and
// before the cursor moves: the window the crash test kills the process in.
func SetAfterPublish(t *Tailer, f func(cuecast.Version)) { t.afterPublish = f }
