package buildinfo

import (
	"runtime/debug"
	"testing"
)

func TestFromBuild(t *testing.T) {
	installed := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}}
	checkout := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"},
		Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "c2fb3ff0"},
			{Key: "vcs.time", Value: "2026-12-01T19:00:00Z"},
			{Key: "vcs.modified", Value: "true"},
		}}
	tests := []struct {
		name                  string
		version, commit, date string
		bi                    *debug.BuildInfo
		want                  Info
	}{
		{"release stamps win", "v0.2.0", "abc", "2026-12-02T00:00:00Z", checkout,
			Info{Version: "v0.2.0", Commit: "abc", Date: "2026-12-02T00:00:00Z", GoVersion: "go1.26.8", Modified: true}},
		{"go install at a tag", "", "", "", installed,
			Info{Version: "v0.1.0", Commit: "unknown", GoVersion: "go1.26.8"}},
		{"build from a checkout", "", "", "", checkout,
			Info{Version: "devel", Commit: "c2fb3ff0", Date: "2026-12-01T19:00:00Z", GoVersion: "go1.26.8", Modified: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := fromBuild(tt.version, tt.commit, tt.date, tt.bi)
			got.Platform = ""
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNoBuildInfo(t *testing.T) {
	got := fromBuild("", "", "", nil)
	if got.Version != "devel" || got.Commit != "unknown" || got.GoVersion == "" || got.Platform == "" {
		t.Errorf("got %+v, want devel, unknown and the runtime's Go version and platform", got)
	}
}
