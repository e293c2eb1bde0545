package cuecast

import "testing"

// TestSubjects pins the subjects docs/PROTOCOL.md §3 lists: a subscriber in
// another language builds the same strings.
func TestSubjects(t *testing.T) {
	cfg := ConfigPath("search/ranking/weights")
	for _, tt := range []struct{ got, want string }{
		{SubjectName(cfg), "ranking.weights"},
		{VersionSubject(cfg), "cc.search.v.ranking.weights"},
		{ChunkSubject(cfg), "cc.search.c.ranking.weights"},
		{PointerSubject(cfg, 42), "cc.search.p.42.ranking.weights"},
		{AllPointerSubject(cfg), "cc.search.p.all.ranking.weights"},
		{InstancePointerSubject(cfg, "web-7"), "cc.search.i.web-7.ranking.weights"},
		{StagedSubject(cfg), "cc.search.s.ranking.weights"},
		{ActivationSubject(cfg), "cc.search.a.ranking.weights"},
		{ReportSubject(cfg, "web-7"), "ccs.search.web-7.ranking.weights"},
		{ReportWildcard(cfg), "ccs.search.*.ranking.weights"},
		{SummarySubject("eu-west", cfg), "ccsum.eu-west.search.ranking.weights"},
		{DetailSubject(cfg), "ccsumq.search.ranking.weights"},
		{DetailReplySubject("eu-west", "0a1b"), "ccsumr.eu-west.0a1b"},
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestParseReportSubject(t *testing.T) {
	for _, tc := range []struct {
		subj string
		cfg  ConfigPath
		inst string
		ok   bool
	}{
		{"ccs.payments.web-1.checkout", "payments/checkout", "web-1", true},
		{"ccs.payments.web-1.eu.fees", "payments/eu/fees", "web-1", true},
		{ReportSubject("search/ranking/weights", "web-7"), "search/ranking/weights", "web-7", true},
		{"ccs.payments.web-1", "", "", false},
		{"ccs.payments", "", "", false},
		{"cc.payments.p.1.checkout", "", "", false},
	} {
		cfg, inst, ok := ParseReportSubject(tc.subj)
		if cfg != tc.cfg || inst != tc.inst || ok != tc.ok {
			t.Errorf("%s: got %q %q %t, want %q %q %t", tc.subj, cfg, inst, ok, tc.cfg, tc.inst, tc.ok)
		}
	}
}

func TestParseDetailReplySubject(t *testing.T) {
	for _, tc := range []struct {
		subj, region, token string
		ok                  bool
	}{
		{"ccsumr.eu-west.0a1b", "eu-west", "0a1b", true},
		{DetailReplySubject("us-east", "ff"), "us-east", "ff", true},
		{"ccsumr.eu-west", "", "", false},
		{"ccsumr.eu-west.0a1b.extra", "", "", false},
		{"ccsum.eu-west.0a1b", "", "", false},
	} {
		region, token, ok := ParseDetailReplySubject(tc.subj)
		if region != tc.region || token != tc.token || ok != tc.ok {
			t.Errorf("%s: got %q %q %t, want %q %q %t", tc.subj, region, token, ok, tc.region, tc.token, tc.ok)
		}
	}
}
