package cli_test

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/poll"
)

// TestWatchSaysConfigNotFound: a misspelt --config makes watch say on
// stderr that the config does not exist, instead of waiting in silence
// (issue 17, item 3).
func TestWatchSaysConfigNotFound(t *testing.T) {
	_, p := serveExample(t)

	stdout, stderr := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", "payments/chekout", "--instance", "web-1",
		"--trusted-key", p.PublicKey, "--lkg", filepath.Join(t.TempDir(), "lkg.json"))
	poll.Until(t, "watch says the config does not exist", 20*time.Second, func() (bool, string) {
		return strings.Contains(stderr.String(), "watch web-1: not-found payments/chekout: config payments/chekout does not exist"), stderr.String()
	})
	if stdout.String() != "" {
		t.Fatalf("stdout: got %q, want nothing applied", stdout.String())
	}
}
