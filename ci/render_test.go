package ci_test

import (
	"encoding/json"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/cuecast/cuecast"
	"github.com/cuecast/cuecast/ci"
	"github.com/cuecast/cuecast/compiler"
	"github.com/cuecast/cuecast/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

// sampleReport is a hand-made report with one of everything, so the golden
// files do not move when configs-example does.
func sampleReport() *ci.Report {
	long := make([]ci.Difference, 0, 20)
	for i := range 20 {
		long = append(long, ci.Difference{Path: fmt.Sprintf("limits.tier_%02d", i), Op: ci.OpChanged,
			Old: json.RawMessage(fmt.Sprint(i * 10)), New: json.RawMessage(fmt.Sprint(i*10 + 5))})
	}
	return &ci.Report{
		Base:         ci.Revision{Rev: "main", Commit: "1111111111111111111111111111111111111111"},
		Head:         ci.Revision{Rev: "feature", Commit: "2222222222222222222222222222222222222222"},
		ChangedFiles: []string{"lib/service/service.cue", "payments/checkout/checkout.cue", "search/new/new.cue"},
		Risk: ci.Risk{
			Level: "high", Configs: 4, Compiled: 5, Namespaces: 2,
			Strict:    []cuecast.ConfigPath{"payments/checkout", "payments/refunds"},
			Libraries: []ci.Library{{Dir: "lib/service", Configs: []cuecast.ConfigPath{"payments/checkout", "payments/refunds", "search/indexer"}, Changes: 3, Wide: true}},
			Breaking: []ci.Breaking{
				{Config: "payments/checkout", Path: "providers[1].timeout", Reason: "field removed"},
				{Config: "payments/checkout", Path: "max_amount_minor", Reason: "type changed: number → string"},
				{Config: "search/old", Reason: "config removed"},
			},
			NewErrors: 1, PreExisting: 1,
		},
		Configs: []ci.ConfigChange{
			{Config: "payments/checkout", Status: ci.StatusChanged, Diff: []ci.Difference{
				{Path: "max_amount_minor", Op: ci.OpType, Old: json.RawMessage(`5000000`), New: json.RawMessage(`"5M"`), Breaking: true},
				{Path: "providers[1].timeout", Op: ci.OpRemoved, Old: json.RawMessage(`"4s"`), Breaking: true},
				{Path: "service.replicas", Op: ci.OpChanged, Old: json.RawMessage(`12`), New: json.RawMessage(`14`)},
				{Path: "three_ds.exempt", Op: ci.OpAdded, New: json.RawMessage("\"```|<b>\"")},
			}},
			{Config: "payments/refunds", Status: ci.StatusChanged, Diff: long},
			{Config: "payments/ledger", Status: ci.StatusInvalid, Errors: 1},
			{Config: "search/indexer", Status: ci.StatusUnchanged},
			{Config: "search/new", Status: ci.StatusAdded, Diff: []ci.Difference{{Path: "owner", Op: ci.OpAdded, New: json.RawMessage(`"team-search"`)}}},
			{Config: "search/old", Status: ci.StatusRemoved},
			{Config: "search/flag", From: "search/ui-flag", Status: ci.StatusRenamed},
			{Config: "search/broken", Status: ci.StatusStillInvalid, Errors: 1},
		},
		Errors: []ci.Finding{
			{Error: compiler.Error{Config: "payments/ledger", File: "payments/ledger/ledger.cue", Line: 7, Column: 3, ID: "cue",
				Message: "currency: 2 errors in empty disjunction | <x>"}},
			{Error: compiler.Error{Config: "search/broken", File: "search/broken/broken.cue", Line: 2, Column: 1, ID: "secret/aws-access-key",
				Message: "looks like an AWS access key", Fix: "move it to the secret store and reference it"}, PreExisting: true},
		},
		Namespaces: []ci.Namespace{
			{Name: "payments", Owners: []string{"team-payments", "alice@example.com"}, Consistency: cuecast.Strict,
				Configs: []cuecast.ConfigPath{"payments/checkout", "payments/ledger", "payments/refunds"}},
			{Name: "search", Owners: []string{"team-search"}, Consistency: cuecast.Relaxed, ImportConfigsFrom: []string{"payments"},
				Configs: []cuecast.ConfigPath{"search/broken", "search/flag", "search/indexer", "search/new", "search/old", "search/ui-flag"}},
		},
		Undeclared: []string{"billing"},
	}
}

// textReport is rep's text form (WriteText), as check prints it.
func textReport(t *testing.T, rep *ci.Report) string {
	t.Helper()
	var b strings.Builder
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got, *update)
}

func TestRenderGolden(t *testing.T) {
	rep := sampleReport()
	checkGolden(t, "comment.golden.md", []byte(rep.Markdown(0)))
	text := textReport(t, rep)
	checkGolden(t, "report.golden.txt", []byte(text))
}

func TestMarkdownShape(t *testing.T) {
	md := sampleReport().Markdown(0)
	for _, want := range []string{
		ci.Marker,
		"**Risk: high**",
		"<details><summary><code>payments/refunds</code> changed: 20 paths</summary>",
		"````diff", // the value holds ```, so the fence is longer
		"&lt;x&gt;",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if i, j := strings.Index(md, "Risk:"), strings.Index(md, "| config |"); i < 0 || j < 0 || i > j {
		t.Errorf("the risk summary must come before the table")
	}
}

func TestMarkdownTruncation(t *testing.T) {
	rep := sampleReport()
	// 300 configs with 100 changed paths each, all different: far over the
	// limit.
	for i := range 300 {
		var d []ci.Difference
		for j := range 100 {
			d = append(d, ci.Difference{Path: fmt.Sprintf("k%03d", j), Op: ci.OpChanged,
				Old: json.RawMessage(`"` + strings.Repeat("é", 50) + `"`), New: json.RawMessage(fmt.Sprintf(`"x%d"`, i))})
		}
		rep.Configs = append(rep.Configs, ci.ConfigChange{Config: cuecast.ConfigPath(fmt.Sprintf("search/c%03d", i)), Status: ci.StatusChanged, Diff: d})
	}
	for _, limit := range []int{0, 20_000, 3_000} {
		md := rep.Markdown(limit)
		max := limit
		if max == 0 {
			max = ci.MaxBody
		}
		if len(md) > max {
			t.Errorf("limit %d: got %d bytes", limit, len(md))
		}
		if utf8.RuneCountInString(md) >= 65536 {
			t.Errorf("limit %d: %d characters, GitHub takes fewer than 65,536", limit, utf8.RuneCountInString(md))
		}
		if !strings.Contains(md, "truncated") {
			t.Errorf("limit %d: no truncation note", limit)
		}
		if a, b := strings.Count(md, "<details>"), strings.Count(md, "</details>"); a != b {
			t.Errorf("limit %d: %d <details> but %d </details>", limit, a, b)
		}
		if n := strings.Count(md, "\n```"); n%2 != 0 {
			t.Errorf("limit %d: odd number of code fences (%d)", limit, n)
		}
		if !strings.HasPrefix(md, ci.Marker) || !strings.Contains(md, "**Risk: high**") {
			t.Errorf("limit %d: the marker and risk summary must survive truncation", limit)
		}
	}
}

// TestMarkdownGroupsAlikeChanges: 334 configs changed alike (one library
// edit) are one row and one diff, not 334 of each.
func TestMarkdownGroupsAlikeChanges(t *testing.T) {
	rep := sampleReport()
	rep.Configs = nil
	for i := range 334 {
		rep.Configs = append(rep.Configs, ci.ConfigChange{Config: cuecast.ConfigPath(fmt.Sprintf("payments/c%03d", i)), Status: ci.StatusChanged,
			Diff: []ci.Difference{{Path: "service.replicas", Op: ci.OpChanged, Old: json.RawMessage("6"), New: json.RawMessage("8")}}})
	}
	rep.Configs = append(rep.Configs, ci.ConfigChange{Config: "search/indexer", Status: ci.StatusChanged,
		Diff: []ci.Difference{{Path: "shards", Op: ci.OpChanged, Old: json.RawMessage("1"), New: json.RawMessage("2")}}})
	md := rep.Markdown(0)
	if strings.Contains(md, "truncated") || len(md) > 20_000 {
		t.Errorf("%d bytes, truncated=%v; want a short report", len(md), strings.Contains(md, "truncated"))
	}
	if !strings.Contains(md, "| 334 configs: `payments/c000`, `payments/c001`, `payments/c002` and 331 more | changed |") {
		t.Errorf("no grouped row for the 334 configs:\n%s", md)
	}
	if n := strings.Count(md, "+ service.replicas: 8"); n != 1 {
		t.Errorf("the shared diff appears %d times, want once", n)
	}
	if !strings.Contains(md, "`search/indexer`") {
		t.Errorf("the config changed differently is not listed on its own")
	}
}
