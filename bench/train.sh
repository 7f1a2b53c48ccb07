#!/usr/bin/env bash
# train.sh: seconds of one `legorl train` update of a tools-agent iteration,
# with and without train.shared_prefix, side by side in one run.
#
# The work is fixed: the committed tools starter (policy/starter/tools-sft)
# rolls out the first 32 training tasks of a 400-instance built-in Python
# suite (seed 1), G = 8 each, 4 at once, at most 4 turns and 128 tokens a
# reply, once; then `legorl train` updates on those rollouts with the
# tools results runs' settings (lr 3e-4, 4 optimizer steps), alternating
# shared_prefix off and on ROUNDS times, each on its own copy of the store,
# so both see the same machine. The figures are the update's wall and CPU
# seconds (/usr/bin/time) and the train and recompute tokens per second it
# prints (every token of every sequence counted, prompts included, so the
# two sides count the same tokens); the ratios are the result. Each run
# prints one line in Go's benchmark format (bench/record.sh, `make
# bench-update`, keeps them in docs/perf/update.txt).
#
# Usage: bench/train.sh                 (from the repository root, after make build)
#        ROUNDS=3 WORK=/tmp/x bench/train.sh
set -euo pipefail
rounds=${ROUNDS:-3}
root=$(git rev-parse --show-toplevel)
work=${WORK:-$root/legorl-work/bench-train}
bin=$root/bin
policy=$root/policy/starter/tools-sft
[ -x "$bin/legorl" ] || { echo "bench-train: $bin/legorl is missing: run make build first" >&2; exit 1; }
rm -rf "$work"
mkdir -p "$work"
. "$root/scripts/lib/bench-suite.sh"

bench_suite "$bin/legorl" "$work/suite" 32
echo "bench-train: rolling out 32 tasks x 8 with the tools starter" >&2
"$bin/legorl" rollout --tasks "$work/suite/bench.jsonl" --split train --policy "$policy" --harness tools --run bench \
	--iteration 0 --group 8 --parallel 4 --max-turns 4 --max-tokens 128 --store "file://$work/store" >"$work/rollout.log" 2>&1 ||
	{ echo "bench-train: the rollouts failed; see $work/rollout.log" >&2; exit 1; }

for r in $(seq 1 "$rounds"); do
	for side in off on; do
		out="$work/$side/r$r"
		mkdir -p "$out"
		cp -r "$work/store" "$out/store"
		flag=false
		[ "$side" = on ] && flag=true
		printf '{"lr": 0.0003, "steps": 4, "shared_prefix": %s}\n' "$flag" >"$out/train.json"
		/usr/bin/time -o "$out/time" -f '%e %U %S' \
			"$bin/legorl" train --store "file://$out/store" --run bench --iteration 0 --policy "$policy" \
			--out "$out/ckpt" --config "$out/train.json" >"$out/log.txt" 2>&1 ||
			{ echo "bench-train: train ($side, round $r) failed; see $out/log.txt" >&2; exit 1; }
		read -r wall user sys <"$out/time"
		tt=$(grep -o '[0-9]* train tokens/s' "$out/log.txt" | cut -d' ' -f1)
		rt=$(grep -o '[0-9]* recompute tokens/s' "$out/log.txt" | cut -d' ' -f1)
		awk -v f="$flag" -v w="$wall" -v u="$user" -v y="$sys" -v tt="$tt" -v rt="$rt" \
			'BEGIN { printf "BenchmarkUpdate/shared_prefix=%s 1 %.1f s/op %.1f cpu-s/op %d train-tokens/s %d recompute-tokens/s\n", f, w, u+y, tt, rt }'
	done
done
