package integration_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/client"
	"github.com/cuecast/cuecast/internal/diskfull"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestLastKnownGoodSavedOnceThereIsSpace: a version applied while the
// last-known-good file's disk is full runs, and the report says the file
// was not saved; once there is space again the file is saved (at the next
// heartbeat, not only at the next version) and the error clears. Before,
// the file kept the older version, so a restart with the server out of
// reach started on it, and the report kept the error until a new version.
func TestLastKnownGoodSavedOnceThereIsSpace(t *testing.T) {
	t.Parallel()
	e := newEnv(t, envOpts{})
	fsys := diskfull.Mount(t, 64<<10)
	path := filepath.Join(fsys, "checkout.lkg")
	const instance = "lkg-full"
	e.ship(1, body(1))
	c, ev := e.newClient(instance, client.WithHeartbeat(200*time.Millisecond))
	w := watch(t, c, client.LastKnownGood(path))
	waitApplied(t, ev, 1)

	filler := diskfull.Fill(t, fsys)
	e.ship(2, body(2))
	waitApplied(t, ev, 2)
	e.waitReport(instance, func(r cuecast.Report) bool {
		return r.Version == 2 && strings.Contains(r.LastError, "last-known-good") && strings.Contains(r.LastError, "no space left on device")
	})
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	e.waitReport(instance, func(r cuecast.Report) bool { return r.Version == 2 && r.LastError == "" })
	poll.Until(t, "version 2 in the last-known-good file", poll.Patience, func() (bool, string) {
		b, err := os.ReadFile(path)
		return err == nil && bytes.Contains(b, body(2)), fmt.Sprintf("%v %.200s; events:%s", err, b, ev)
	})
	if s := w.Current(); s.Version != 2 {
		t.Errorf("serving version %d, want 2", s.Version)
	}
}
