package cuecast_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cuecast/cuecast"
)

func TestRepublished(t *testing.T) {
	cfg := cuecast.ConfigPath("svc/app/flags")
	for _, tc := range []struct{ stored, want string }{
		{cuecast.PointerSubject(cfg, 3), "ccr.svc.p.3.app.flags"},
		{cuecast.AllPointerSubject(cfg), "ccr.svc.p.all.app.flags"},
		{cuecast.InstancePointerSubject(cfg, "i-1"), "ccr.svc.i.i-1.app.flags"},
		{cuecast.StagedSubject(cfg), "ccr.svc.s.app.flags"},
		{cuecast.ActivationSubject(cfg), "ccr.svc.a.app.flags"},
	} {
		if got := cuecast.Republished(tc.stored); got != tc.want {
			t.Errorf("Republished(%q) = %q, want %q", tc.stored, got, tc.want)
		}
	}
}

func TestShortCommit(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"abc", "abc"},
		{"0123456789ab", "0123456789ab"},
		{"0123456789abcdef0123456789abcdef01234567", "0123456789ab"},
	} {
		if got := cuecast.ShortCommit(tc.in); got != tc.want {
			t.Errorf("ShortCommit(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCommitSubject(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"fix: one line", "fix: one line"},
		{"fix: subject\n\nbody\nmore", "fix: subject"},
	} {
		if got := cuecast.CommitSubject(tc.in); got != tc.want {
			t.Errorf("CommitSubject(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestReportOmitsAppliedAtBeforeAnApply: docs/PROTOCOL.md §4.3 says
// applied_at is omitted before anything was applied; omitempty never omits
// a time.Time, so every such report carried "0001-01-01T00:00:00Z".
func TestReportOmitsAppliedAtBeforeAnApply(t *testing.T) {
	b, err := json.Marshal(cuecast.Report{Instance: "web-1", Config: "payments/checkout", At: time.Now().UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "applied_at") {
		t.Errorf("report before an apply: %s; want no applied_at", b)
	}
	b, err = json.Marshal(cuecast.Report{Instance: "web-1", Config: "payments/checkout", Version: 1, AppliedAt: time.Unix(1, 0).UTC()})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"applied_at":"1970-01-01T00:00:01Z"`) {
		t.Errorf("report after an apply: %s; want its applied_at", b)
	}
}
