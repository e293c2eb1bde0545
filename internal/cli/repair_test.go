package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/pipeline"
	"github.com/cuecast/cuecast/internal/pipelinetest"
	"github.com/cuecast/cuecast/internal/poll"
)

// TestRepairCommand: after the CUECAST stream of a stopped serve is deleted,
// `cuecast repair` republishes every config above the numbers it had.
func TestRepairCommand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	if code, _, stderr := run(ctx, "repair", "--repo", t.TempDir()); code != 2 || !strings.Contains(stderr.String(), "--reason") {
		t.Fatalf("repair without --reason: exit %d, %s; want 2 asking for --reason", code, stderr)
	}
	repo := exampleRepo(t)
	data := t.TempDir()
	p, stop := pipelinetest.Run(t, pipeline.Config{Repo: repo.Dir, DataDir: data})
	poll.Until(t, "first commit published", 20*time.Second, func() (bool, string) {
		st, err := p.Tailer.State(ctx)
		return err == nil && st.Cursor == repo.Head(), st.Cursor
	})
	stop()
	if err := os.RemoveAll(filepath.Join(data, "jetstream", "jetstream", "$G", "streams", "CUECAST")); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := run(ctx, "repair", "--repo", repo.Dir, "--data", data, "--reason", "test", "--log-level", "error")
	if code != 0 {
		t.Fatalf("repair: exit %d: %s", code, stderr)
	}
	if out := stdout.String(); !strings.Contains(out, "payments/checkout: stream held v0, v1 was published; now v2 (content), deployed, audited") {
		t.Fatalf("repair output:\n%s", out)
	}
}
