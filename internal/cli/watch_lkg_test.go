package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cuecast/cuecast/internal/poll"
)

// TestWatchLastKnownGoodDirectory: watch --lkg makes the file's directory,
// as agent --dir does, instead of applying every version with "not saved as
// last-known-good" and leaving the instance nothing to start from; a path
// it cannot make a directory of stops it at start, exit 1, naming it.
func TestWatchLastKnownGoodDirectory(t *testing.T) {
	_, p := serveExample(t)

	lkg := filepath.Join(t.TempDir(), "state", "cuecast", "checkout.json")
	stdout, stderr := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", "payments/checkout", "--instance", "web-1",
		"--trusted-key", p.PublicKey, "--lkg", lkg)
	poll.Until(t, "watch applies v1 and saves it", poll.Patience, func() (bool, string) {
		_, err := os.Stat(lkg)
		return strings.Contains(stdout.String(), `"version":1`) && err == nil, "stdout " + stdout.String() + ", stderr " + stderr.String()
	})
	if strings.Contains(stderr.String(), "not saved") {
		t.Errorf("stderr: %q; want the version saved as last-known-good", stderr)
	}

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), poll.Patience)
	defer cancel()
	code, _, errOut := run(ctx, "watch", "--nats", p.ClientURL(), "--config", "payments/checkout", "--instance", "web-2",
		"--trusted-key", p.PublicKey, "--lkg", filepath.Join(file, "checkout.json"))
	if code != 1 || !strings.Contains(errOut.String(), "--lkg "+filepath.Join(file, "checkout.json")) {
		t.Errorf("--lkg under a file: exit %d, stderr %q; want exit 1 naming the path", code, errOut)
	}
}
