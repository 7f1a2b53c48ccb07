#!/usr/bin/env bash
# record.sh NAME CMD [ARG...]: runs a component's benchmark command and
# writes its output to docs/perf/NAME.txt, with the make target and the
# machine it ran on, then remakes docs/PERFORMANCE.md's tables from
# docs/perf (go test ./internal/doccheck -update). `make bench-NAME` calls
# it. The command prints Go's benchmark format (go test -bench does; the
# scripts in bench/ print the same lines); the file is replaced only when
# the command succeeds.
set -euo pipefail
name=${1:?usage: bench/record.sh NAME CMD [ARG...]}
shift
root=$(git rev-parse --show-toplevel)
out=$root/docs/perf/$name.txt
mkdir -p "$root/docs/perf"
tmp=$(mktemp "$out.XXXXXX")
trap 'rm -f "$tmp"' EXIT
load() { cut -d' ' -f1 /proc/loadavg; }
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
mem=$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)
start=$(load)
{
	echo "command: make bench-$name"
	echo "machine: $(nproc) cores of $cpu, $mem, $(uname -sr), $(${GO:-go} env GOVERSION)"
} >"$tmp"
"$@" 2>&1 | { grep -v '^go: downloading ' || true; } | tee -a "$tmp"
echo "load: $start at the start, $(load) at the end" >>"$tmp"
mv "$tmp" "$out"
trap - EXIT
echo "bench: wrote docs/perf/$name.txt" >&2
cd "$root" && ${GO:-go} test -count=1 -run '^TestPerformanceTables$' ./internal/doccheck -update
