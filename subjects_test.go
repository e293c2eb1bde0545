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
	} {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}
