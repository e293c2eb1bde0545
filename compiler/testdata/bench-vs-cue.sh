#!/bin/sh
# bench-vs-cue.sh: cuecast compile against the official cue CLI on the repos
# internal/gen makes, as BENCHMARKS.md (section Compiler) reports them.
#
#   compiler/testdata/bench-vs-cue.sh [RUNS] [CONFIGS...]   (from the module root)
#
# Builds cuecast from this tree and cue at the version go.mod names (into a
# temporary GOBIN), writes each repo with gen.Repo(gen.Options{Configs: N,
# Seed: 7}).Write(dir), then runs `cuecast compile --repo DIR` and, inside
# DIR, `cue export ./...` interleaved RUNS times each (default 5) under
# /usr/bin/time. Each line: tool, configs, wall s, user s, sys s, peak RSS
# KB, and the 1-minute load average when the run started. Run it on a quiet
# machine: the load average column says whether it was.
set -eu
runs=${1:-5}
[ $# -gt 0 ] && shift
sizes=${*:-2000 10000}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
go build -o "$work/cuecast" ./cmd/cuecast
GOBIN="$work" go install "cuelang.org/go/cmd/cue@$(go list -m -f '{{.Version}}' cuelang.org/go)"
echo "tool configs wall_s user_s sys_s maxrss_kb load1"
for n in $sizes; do
	go run ./compiler/testdata/genrepo -configs "$n" "$work/r$n"
	i=0
	while [ "$i" -lt "$runs" ]; do
		load=$(cut -d' ' -f1 /proc/loadavg)
		/usr/bin/time -f "cuecast $n %e %U %S %M $load" "$work/cuecast" compile --repo "$work/r$n" >/dev/null 2>"$work/err" || { cat "$work/err"; exit 1; }
		tail -n1 "$work/err"
		load=$(cut -d' ' -f1 /proc/loadavg)
		(cd "$work/r$n" && /usr/bin/time -f "cue $n %e %U %S %M $load" "$work/cue" export ./... >/dev/null 2>"$work/err") || { cat "$work/err"; exit 1; }
		tail -n1 "$work/err"
		i=$((i + 1))
	done
done
