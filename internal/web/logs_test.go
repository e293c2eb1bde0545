package web_test

import (
	"bufio"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast/internal/iostreams"
	"github.com/cuecast/cuecast/internal/poll"
)

// syncBuffer is the log the pipeline's concurrent writers write.
type syncBuffer struct{ iostreams.SyncBuffer }

// records returns the JSON log records written so far.
func (b *syncBuffer) records(t *testing.T) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(b.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec map[string]any
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("log line is not JSON: %q", sc.Text())
		}
		out = append(out, rec)
	}
	return out
}

// TestStructuredLogs: with a JSON handler, the records of a commit's
// version and of an operator action carry the commit, config, version and
// rollout as attributes, under fixed keys. The dashboard samples only once
// (before the first rollout): the action's record must name the rollout the
// action returned, not the one a sample happened to hold (it failed when the
// sample lagged on a busy machine).
func TestStructuredLogs(t *testing.T) {
	var buf syncBuffer
	f := start(t, fixtureOptions{policies: holdPolicy, token: "s3cret", sampleInterval: time.Hour,
		log: slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo})})
	f.waitRollout()
	sha := f.setAmount("4_000_000")
	find := func(msg string, match func(map[string]any) bool) map[string]any {
		for _, r := range buf.records(t) {
			if r["msg"] == msg && match(r) {
				return r
			}
		}
		return nil
	}
	poll.Until(t, "the version of the commit logged", poll.Patience, func() (bool, string) {
		r := find("published version", func(r map[string]any) bool { return r["commit"] == sha })
		return r != nil, "no record"
	})
	r := find("published version", func(r map[string]any) bool { return r["commit"] == sha })
	if r["config"] != string(checkout) || r["version"] != float64(2) || r["checksum"] == nil || r["size"] == nil {
		t.Errorf("published version record %v, want config %s version 2, its checksum and size", r, checkout)
	}
	// One record a version: the tailer logs "commit processed" after it
	// published the commit's versions, so every record of them is written
	// by then (the distributor and the tailer each logged the version).
	poll.Until(t, "the commit logged as processed", poll.Patience, func() (bool, string) {
		return find("commit processed", func(r map[string]any) bool { return r["commit"] == sha }) != nil, "no record"
	})
	n := 0
	for _, r := range buf.records(t) {
		if r["msg"] == "published version" && r["commit"] == sha {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d published version records of %s@2, want 1", n, checkout)
	}

	if code, msg := f.post("halt", "Bearer s3cret", `{"actor":"ada","reason":"logs test"}`); code != http.StatusNoContent {
		t.Fatalf("halt: %d %s", code, msg)
	}
	a := find("operator action done", func(map[string]any) bool { return true })
	if a == nil {
		t.Fatal("no record of the operator action")
	}
	for k, want := range map[string]any{"action": "halt", "config": string(checkout), "actor": "web:ada", "reason": "logs test"} {
		if a[k] != want {
			t.Errorf("action record %s = %v, want %v", k, a[k], want)
		}
	}
	if id, _ := a["rollout"].(string); id == "" || a["version"] == nil {
		t.Errorf("action record lacks the rollout ID or version: %v", a)
	}
}
