package cli

import (
	"testing"

	"github.com/cuecast/cuecast"
)

// TestRewatchSignal: a config watched by its base path is watched again
// when its variants change; one named by its variant path never is (a
// removed variant would otherwise be re-watched, found removed and
// signalled again, for ever), and its base's signal does not reach it.
func TestRewatchSignal(t *testing.T) {
	base := cuecast.ConfigPath("search/suggest")
	variant := cuecast.ConfigPath("search/suggest/env=prod/region=eu")
	r := newRewatchSignal(variant)
	if r.of(variant) != nil {
		t.Fatal("a config named by its variant path has a rewatch signal")
	}
	r.notify(base) // must not block, and reaches nobody
	r = newRewatchSignal(base, variant)
	r.notify(base)
	r.notify(base) // a pending signal is the same signal
	select {
	case <-r.of(base):
	default:
		t.Fatal("the base path's watcher got no signal")
	}
	if r.of(variant) != nil {
		t.Error("the variant path's watcher shares its base's signal")
	}
}
