#!/usr/bin/env bash
# loop.sh [BASE]: rollouts per minute of one `legorl run` iteration's rollout
# phase, this tree against commit BASE, side by side in one run.
#
# The work is fixed: the committed bash starter (policy/starter/bash-sft)
# rolls out the first 16 training tasks of a 400-instance built-in Python
# suite (seed 1), G = 8 each (128 rollouts), 4 at once, at most 4 turns and
# 128 tokens a reply: what `legorl run` does in each iteration of
# docs/results/bash-rl*.json. Each binary runs it through `legorl rollout`
# (the Beam pipeline on Prism, sandboxes, proxy, engine, grading, the
# Parquet commit), alternating base and new ROUNDS times, so both see the
# same machine; the ratio of their rollouts per minute is the figure (wall
# clock, and per CPU-second of the process tree from /usr/bin/time).
# BASE defaults to 749b4ce, the commit issue 18 measured "today" on.
#
# Usage: bench/loop.sh [BASE]        (from the repository root)
#        ROUNDS=3 WORK=/tmp/x bench/loop.sh 749b4ce
set -euo pipefail
base=${1:-749b4ce}
rounds=${ROUNDS:-2}
root=$(git rev-parse --show-toplevel)
work=${WORK:-$root/legorl-work/bench-loop}
. "$root/scripts/lib/pair.sh"
. "$root/scripts/lib/bench-suite.sh"
build_pair bench-loop "$base" "$work"

bench_suite "$work/new/bin/legorl" "$work/suite" 16

printf 'round side wall_s cpu_s rollouts rollouts_per_min rollouts_per_cpu_min\n' | tee "$work/results.txt"
for r in $(seq 1 "$rounds"); do
	for side in base new; do
		out="$work/$side/r$r"
		mkdir -p "$out"
		/usr/bin/time -o "$out/time" -f '%e %U %S' \
			"$work/$side/bin/legorl" rollout --tasks "$work/suite/bench.jsonl" --split train \
			--policy "$root/policy/starter/bash-sft" --harness bash --run "bench-$side-$r" \
			--group 8 --parallel 4 --max-turns 4 --max-tokens 128 \
			--store "file://$out/store" >"$out/log.txt" 2>&1 ||
			{ echo "bench-loop: $side round $r failed; see $out/log.txt" >&2; exit 1; }
		read -r wall user sys <"$out/time"
		n=$("$work/new/bin/legorl" export --store "file://$out/store" --run "bench-$side-$r" --table rollouts | grep -c .)
		awk -v r="$r" -v s="$side" -v w="$wall" -v u="$user" -v y="$sys" -v n="$n" \
			'BEGIN { printf "%s %s %.1f %.1f %d %.1f %.1f\n", r, s, w, u+y, n, n/w*60, n/(u+y)*60 }' | tee -a "$work/results.txt"
	done
done
awk 'NR > 1 { w[$2] += $6; c[$2] += $7; k[$2]++ }
	END { printf "new / base: rollouts per minute %.2fx, per CPU-minute %.2fx\n", (w["new"]/k["new"])/(w["base"]/k["base"]), (c["new"]/k["new"])/(c["base"]/k["base"]) }' \
	"$work/results.txt" | tee -a "$work/results.txt"
