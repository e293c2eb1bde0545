package cli

import (
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/distributor/rollout"
)

// TestPrintRecordAsTheDashboard: `cuecast rollout status` words a named
// stage and shows times as the dashboard does (rollout.StageScope,
// rollout.FormatTime). It printed "canary 0%" and the note's RFC 3339 time.
func TestPrintRecordAsTheDashboard(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	hold := now.Add(20*time.Minute + 9*time.Second)
	rec := rollout.Record{Config: "search/ranking", Stable: 1, Current: &rollout.Rollout{
		Config: "search/ranking", Version: 2, From: 1, State: rollout.StateHolding, HoldUntil: hold,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{
			{Name: "canary", Instances: []string{"search-canary-1", "search-canary-2"}},
			{Name: "eu", Labels: map[string]string{"zone": "eu-1"}},
			{Name: "all", Percent: 100},
		}},
		Note: "holding until " + hold.Format(time.RFC3339),
	}, Pin: &rollout.Pin{Version: 1, Actor: "ann", Reason: "bad", At: now.In(time.FixedZone("CET", 3600))}}
	var stages []rollout.StageProgress
	for _, st := range rec.Current.Policy.Stages {
		stages = append(stages, rollout.StageProgress{Name: st.Name, Percent: st.Percent, Scope: rollout.StageScope(st), Status: "pending"})
	}
	var b strings.Builder
	printRecord(&b, rollout.Progress{Record: rec, Stages: stages}, now)
	out := b.String()
	for _, want := range []string{
		"canary       instances search-canary-1, search-canary-2  [",
		"eu           labels zone=eu-1  [",
		"all          100%  [",
		"holding until 2026-12-01 17:20:09 UTC",
		"PINNED to v1 by ann at 2026-12-01 17:00:00 UTC",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rollout status:\n%s\nwant it to contain %q", out, want)
		}
	}
	if strings.Contains(out, " 0%") || strings.Contains(out, "T17:20:09Z") {
		t.Errorf("rollout status:\n%s\nshows a named stage as 0%% or an RFC 3339 time", out)
	}
}

// TestPrintRecordFirstVersion: a rollout with no floor has nothing to fall
// back to; rollout status said "falls back to v0", a version that never
// was, and then "first version" of a v2 that superseded v1 before v1
// reached everyone (the floor is the version the whole fleet ran).
func TestPrintRecordFirstVersion(t *testing.T) {
	for _, v := range []uint64{1, 2} {
		rec := rollout.Record{Config: "app/example", Current: &rollout.Rollout{
			Config: "app/example", Version: v, State: rollout.StateWaiting,
			Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "all", Percent: 100}}},
		}}
		var b strings.Builder
		printRecord(&b, rollout.Progress{Record: rec}, time.Now())
		if out := b.String(); strings.Contains(out, "v0") || strings.Contains(out, "first version") ||
			!strings.Contains(out, "nothing to fall back to: no version has reached the whole fleet") {
			t.Errorf("rollout status of v%d without a floor:\n%s\nwant no v0, and why there is no fallback", v, out)
		}
	}
}

// TestPrintRecordEscapesRepoText: what rollout status prints of a
// rollout that a commit and its policy chose (author, stage names and
// scopes, analysis names and details, note, reason, pin actor) comes out
// with its terminal controls escaped.
func TestPrintRecordEscapesRepoText(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	const evil = "x\x1b]0;t\a\r\u202e\u009b"
	const shown = `x\x1b]0;t\x07\r\u202e\u009b`
	rec := rollout.Record{Config: "search/ranking", Current: &rollout.Rollout{
		Config: "search/ranking", Version: 2, From: 1, State: rollout.StateHalted,
		Author: "author " + evil, Note: "note " + evil, Reason: "reason " + evil,
		Analysis: []rollout.MetricState{{Name: "metric " + evil, Outcome: "fail", Detail: "detail " + evil}},
	}, Pin: &rollout.Pin{Version: 1, Actor: "actor " + evil, Reason: "bad", At: now}}
	stages := []rollout.StageProgress{{Name: "stage " + evil, Scope: "scope " + evil, Status: "current"}}
	var b strings.Builder
	printRecord(&b, rollout.Progress{Record: rec, Stages: stages}, now)
	out := b.String()
	for _, raw := range []string{"\x1b", "\a", "\r", "\u202e", "\u009b"} {
		if strings.Contains(out, raw) {
			t.Errorf("prints %q raw:\n%q", raw, out)
		}
	}
	for _, field := range []string{"author", "stage", "scope", "metric", "detail", "note", "reason", "actor"} {
		if !strings.Contains(out, field+" "+shown) {
			t.Errorf("lacks %s %s:\n%q", field, shown, out)
		}
	}
}

// TestPrintRecordSaysWhenNotExact: when the controller measured the stages
// without the regions' detail (a region did not answer the drill-down),
// rollout status says so and why; it printed the bucket counts as if exact.
func TestPrintRecordSaysWhenNotExact(t *testing.T) {
	now := time.Date(2026, 12, 1, 17, 0, 0, 0, time.UTC)
	rec := rollout.Record{Config: "search/ranking", Stable: 1, Current: &rollout.Rollout{
		Config: "search/ranking", Version: 2, From: 1, State: rollout.StateHolding,
		Policy: cuecast.Policy{Stages: []cuecast.Stage{{Name: "canary", Instances: []string{"east-1"}}, {Name: "all", Percent: 100}}},
	}}
	for _, tc := range []struct {
		without string
		want    bool
	}{{"", false}, {"region leaf-2 did not answer\x1b[2J", true}} {
		var b strings.Builder
		printRecord(&b, rollout.Progress{Record: rec, WithoutDetail: tc.without}, now)
		out := b.String()
		if got := strings.Contains(out, "NOT EXACT: counted without the regions' detail (region leaf-2 did not answer"); got != tc.want {
			t.Errorf("without detail %q: rollout status:\n%s\nsays NOT EXACT: %v, want %v", tc.without, out, got, tc.want)
		}
		if strings.Contains(out, "\x1b") {
			t.Errorf("rollout status:\n%q\nwrites the error's terminal controls", out)
		}
	}
}
