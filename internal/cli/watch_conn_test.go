package cli_test

import (
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestWatchSaysConnectionLostAndRegained: watch tells on stderr when serve's
// NATS goes away and when it is back (it used to be silent).
func TestWatchSaysConnectionLostAndRegained(t *testing.T) {
	repo := exampleRepo(t)
	data := t.TempDir()
	serve := func(listen string) (*pipeline.Pipeline, func()) {
		return pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, DataDir: data, Listen: listen})
	}
	p, stop := serve("127.0.0.1:0")
	u, err := url.Parse(p.ClientURL())
	if err != nil {
		t.Fatal(err)
	}
	stdout, stderr := startCmd(t, "watch", "--nats", p.ClientURL(), "--config", "payments/checkout", "--instance", "web-1",
		"--trusted-key", p.PublicKey, "--lkg", filepath.Join(t.TempDir(), "lkg.json"))
	poll.Until(t, "watch applied v1", 20*time.Second, func() (bool, string) {
		return strings.Contains(stdout.String(), `"version":1`), stdout.String() + stderr.String()
	})
	stop()
	poll.Until(t, "watch says the connection is lost", 20*time.Second, func() (bool, string) {
		return strings.Contains(stderr.String(), "watch web-1: lost the connection to NATS"), stderr.String()
	})
	_, stop = serve(u.Host)
	defer stop()
	poll.Until(t, "watch says it reconnected", 20*time.Second, func() (bool, string) {
		return strings.Contains(stderr.String(), "watch web-1: reconnected to NATS at"), stderr.String()
	})
}
