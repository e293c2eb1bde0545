// Package buildinfo says which cuecast this binary is: the version, commit and
// build date a release stamps with -ldflags, or else what the Go toolchain
// recorded (the module version of `go install …@vX.Y.Z`, the VCS revision of a
// build from a checkout).
//
// A release build sets the three link-time values (see the Makefile's
// release target):
//
//	-X github.com/cuecast/cuecast/internal/buildinfo.version=v0.1.0
//	-X github.com/cuecast/cuecast/internal/buildinfo.commit=<sha>
//	-X github.com/cuecast/cuecast/internal/buildinfo.date=<RFC 3339>
package buildinfo

import (
	"runtime"
	"runtime/debug"
)

// Set by the linker only; never written at run time.
var (
	version string
	commit  string
	date    string
)

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit"`
	Date      string `json:"date"`
	GoVersion string `json:"go_version"`
	Platform  string `json:"platform"`
	Modified  bool   `json:"modified,omitempty"`
}

// Read returns the binary's build information. Link-time values win over
// what the toolchain recorded; a field nobody knows is "unknown", except
// Date, which is empty when the build recorded no time.
func Read() Info {
	return fromBuild(version, commit, date, readBuild())
}

func readBuild() *debug.BuildInfo {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return bi
}

func fromBuild(version, commit, date string, bi *debug.BuildInfo) Info {
	info := Info{
		Version:   version,
		Commit:    commit,
		Date:      date,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi != nil {
		if bi.GoVersion != "" {
			info.GoVersion = bi.GoVersion
		}
		// "(devel)" is what a build from a checkout records; a pseudo-version
		// or tag comes from `go install module@version`.
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				if info.Commit == "" {
					info.Commit = s.Value
				}
			case "vcs.time":
				if info.Date == "" {
					info.Date = s.Value
				}
			case "vcs.modified":
				info.Modified = s.Value == "true"
			}
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	if info.Commit == "" {
		info.Commit = "unknown"
	}
	return info
}
