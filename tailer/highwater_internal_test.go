package tailer

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/cuecast/cuecast"
)

// TestHighWaterSurvivesRestartAndTornWrite: a reservation is on disk before
// the publish it precedes; a torn last line (a crash mid-write) is ignored;
// after a restart the reserved number may be published again only with the
// same commit and checksum, and lower numbers never.
func TestHighWaterSurvivesRestartAndTornWrite(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "highwater.default.jsonl")
	h, err := openHighWater(path)
	if err != nil {
		t.Fatal(err)
	}
	cp := cuecast.ConfigPath("pay/a")
	v := cuecast.Version{Config: cp, Version: 21, Commit: "c21", Checksum: "sha256:x"}
	if err := h.reserve(v); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"config":"pay/a","version":99,"comm`)
	f.Close()

	h, err = openHighWater(path)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := h.get(cp); !ok || m.Version != 21 || m.Commit != "c21" {
		t.Fatalf("after restart: mark %+v, want v21 from c21 (the torn line ignored)", m)
	}
	tl := &Tailer{hw: h, log: slog.New(slog.DiscardHandler)}
	st := &State{}
	if err := tl.checkNumber(st, v); err != nil {
		t.Errorf("republishing the reserved v21 with the same content: %v", err)
	}
	other := v
	other.Commit, other.Checksum = "c22", "sha256:y"
	if err := tl.checkNumber(st, other); !errors.Is(err, ErrInconsistent) {
		t.Errorf("v21 with other content: %v, want ErrInconsistent", err)
	}
	lower := other
	lower.Version = 9
	if err := tl.checkNumber(st, lower); !errors.Is(err, ErrInconsistent) {
		t.Errorf("v9 below the mark: %v, want ErrInconsistent", err)
	}
	if tl.Inconsistent() == nil {
		t.Error("a refused number does not make the tailer inconsistent")
	}
	next := other
	next.Version = 22
	st.HighWater = map[cuecast.ConfigPath]uint64{cp: 22}
	if err := tl.checkNumber(st, next); !errors.Is(err, ErrInconsistent) {
		t.Errorf("v22 when the cursor says v22 was published: %v, want ErrInconsistent", err)
	}
}
