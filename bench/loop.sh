#!/usr/bin/env bash
# loop.sh [BASE]: rollouts per minute of one `legorl run` iteration's
# rollout phase, with the working tree's build and, given a commit or
# branch BASE, with BASE's beside it, alternating.
#
# The work is fixed: the committed bash starter (policy/starter/bash-sft)
# rolls out the first 16 training tasks of a 400-instance built-in Python
# suite (seed 1), G = 8 each (128 rollouts), 4 at once, at most 4 turns and
# 128 tokens a reply: what `legorl run` does in each iteration of
# docs/results/bash-rl*.json, through `legorl rollout` (the Beam pipeline
# on Prism, sandboxes, proxy, engine, grading, the Parquet commit). Each of
# ROUNDS rounds (default 2) runs the tree's binaries (bin/, from make
# build) and then BASE's. Each run prints one line in Go's benchmark
# format (bench/record.sh, `make bench-loop`, keeps them in
# docs/perf/loop.txt): rollouts per minute of wall time and per CPU-minute
# of the process tree (/usr/bin/time; the sandboxes' own processes are not
# counted), and the mean seconds of setup, agent and grading per rollout
# from the run's rollouts rows.
#
# Usage: bench/loop.sh               (from the repository root, after make build)
#        ROUNDS=3 WORK=/tmp/x bench/loop.sh main
set -euo pipefail
base=${1:-}
rounds=${ROUNDS:-2}
root=$(git rev-parse --show-toplevel)
work=${WORK:-$root/legorl-work/bench-loop}
sides=tree
if [ -n "$base" ]; then
	. "$root/scripts/lib/pair.sh"
	build_pair bench-loop "$base" "$work"
	sides="tree base"
	tree=$work/new/bin
else
	tree=$root/bin
	[ -x "$tree/legorl" ] || { echo "bench-loop: $tree/legorl is missing: run make build first" >&2; exit 1; }
	rm -rf "$work"
	mkdir -p "$work"
fi
. "$root/scripts/lib/bench-suite.sh"
bench_suite "$tree/legorl" "$work/suite" 16

for r in $(seq 1 "$rounds"); do
	for side in $sides; do
		bin=$tree
		[ "$side" = base ] && bin=$work/base/bin
		out="$work/$side/r$r"
		mkdir -p "$out"
		/usr/bin/time -o "$out/time" -f '%e %U %S' \
			"$bin/legorl" rollout --tasks "$work/suite/bench.jsonl" --split train \
			--policy "$root/policy/starter/bash-sft" --harness bash --run "bench-$side-$r" \
			--group 8 --parallel 4 --max-turns 4 --max-tokens 128 \
			--store "file://$out/store" >"$out/log.txt" 2>&1 ||
			{ echo "bench-loop: $side round $r failed; see $out/log.txt" >&2; exit 1; }
		read -r wall user sys <"$out/time"
		"$tree/legorl" export --store "file://$out/store" --run "bench-$side-$r" --table rollouts >"$out/rollouts.jsonl"
		python3 - "$side" "$wall" "$user" "$sys" "$out/rollouts.jsonl" <<'PY'
import json, sys
side, wall, user, sys_s, rows = sys.argv[1], *map(float, sys.argv[2:5]), sys.argv[5]
rows = [json.loads(l) for l in open(rows) if l.strip()]
n, cpu = len(rows), user + sys_s
mean = lambda k: sum(r[k] for r in rows) / n
print(f"BenchmarkIteration/{side} {n} {wall / n * 1e9:.0f} ns/op {n / wall * 60:.1f} rollouts/min "
      f"{n / cpu * 60:.1f} rollouts/cpu-min {mean('setup_seconds'):.3f} setup-s/rollout "
      f"{mean('agent_seconds'):.3f} agent-s/rollout {mean('grade_seconds'):.3f} grade-s/rollout", flush=True)
PY
	done
done
