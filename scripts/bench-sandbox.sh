#!/bin/sh
# bench-sandbox.sh: the local sandbox against bubblewrap, this tree and a
# base commit side by side (docs/PERFORMANCE.md, issue 18 deliverable 4).
#
#   scripts/bench-sandbox.sh [BASE] [ROUNDS] [OUT]
#
# Builds sandbox/local's test binary and a static legorl-sandbox-init (each
# with its own tree's scripts/lib/build-init.sh: the init's source moved)
# for BASE (default 9edd6d5, main before the second pass) and for this
# tree, then runs ROUNDS (default 12) alternating rounds of BenchmarkLocal
# (default options, sandboxes 20 ms apart), BenchmarkLocalBackToBack and
# BenchmarkAnchorBubblewrap (bwrap --unshare-all), 30 sandboxes each, and
# prints each binary's p50 as a ratio to bubblewrap's p50 in the same
# round. Raw output goes to OUT (default $TMPDIR/bench-sandbox.txt). Needs
# root (or user namespaces), bwrap and python3. Run it on a quiet machine:
# the figures are latencies.
set -eu
base=${1:-9edd6d5}
rounds=${2:-12}
out=${3:-${TMPDIR:-/tmp}/bench-sandbox.txt}
root=$(git rev-parse --show-toplevel)
work=$(mktemp -d)
trap 'git -C "$root" worktree remove --force "$work/base-tree" 2>/dev/null || true; rm -rf "$work"' EXIT

command -v bwrap >/dev/null || { echo "bench-sandbox: bwrap not found (apt-get install bubblewrap)" >&2; exit 2; }
build() { # build SRC DEST
	mkdir -p "$2"
	(cd "$1" && go test -c -o "$2/local.test" ./sandbox/local) &&
		"$1/scripts/lib/build-init.sh" "$1" "$2/legorl-sandbox-init"
}
git -C "$root" worktree add --detach "$work/base-tree" "$base" >/dev/null
build "$work/base-tree" "$work/base"
build "$root" "$work/tree"

: >"$out"
i=1
while [ "$i" -le "$rounds" ]; do
	for v in base tree; do
		echo "-- round $i $v load $(cut -d' ' -f1 /proc/loadavg)" >>"$out"
		(cd "$work/$v" && ./local.test -test.run '^$' -test.benchtime 30x \
			-test.bench '^(BenchmarkLocal|BenchmarkLocalBackToBack|BenchmarkAnchorBubblewrap)$') |
			grep '^Benchmark' >>"$out"
	done
	echo "bench-sandbox: round $i of $rounds done" >&2
	i=$((i + 1))
done

python3 - "$out" "$base" <<'EOF'
import re, statistics as st, sys
out, base = sys.argv[1], sys.argv[2]
runs, cur = {}, None
for line in open(out):
    m = re.match(r'-- round (\d+) (\w+)', line)
    if m:
        cur = runs.setdefault(m.group(2), []); cur.append({}); continue
    m = re.match(r'(Benchmark\w+)-\d+\s+\d+\s+\d+ ns/op\s+([\d.]+) cpu-ms/op\s+([\d.]+) p50-ms', line)
    if m and cur is not None:
        cur[-1][m.group(1)] = (float(m.group(2)), float(m.group(3)))
print("binary: benchmark | p50 / bubblewrap p50, same round: median (range) | p50 ms median (range) | cpu-ms/op median")
for v, name in (("base", base), ("tree", "this tree")):
    rs = [r for r in runs.get(v, []) if len(r) == 3]
    for b in ("BenchmarkAnchorBubblewrap", "BenchmarkLocal", "BenchmarkLocalBackToBack"):
        ratio = [r[b][1] / r["BenchmarkAnchorBubblewrap"][1] for r in rs]
        p50 = [r[b][1] for r in rs]
        cpu = [r[b][0] for r in rs]
        print("%s: %s (%d rounds) | %.2f (%.2f-%.2f) | %.1f (%.1f-%.1f) | %.1f" % (
            name, b[len("Benchmark"):], len(rs), st.median(ratio), min(ratio), max(ratio),
            st.median(p50), min(p50), max(p50), st.median(cpu)))
EOF
