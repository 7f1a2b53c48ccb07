#!/usr/bin/env bash
# parallel.sh [P...]: rollouts per minute of the demo's rollout phase at each
# rollout parallelism P (default 4 8), alternating ROUNDS times (default 2)
# so every setting sees the same machine.
#
# The work is one iteration of docs/results/demo-rl-6.json: the committed
# bash-sed starter rolls out the first 32 training tasks of that config's
# 1,400-instance built-in Python suite (seed 1), G = 8 (256 rollouts), at
# most 4 turns of 128 tokens, through `legorl rollout` (bin/legorl: run
# `make build` first). Wall time and the CPU of the process tree
# (/usr/bin/time) per run; /usr/bin/time does not see the CPU of the
# sandboxes' processes or the kernel's own threads, so watch the machine's
# idle time (vmstat) beside it.
#
# Usage: bench/parallel.sh            (from the repository root)
#        ROUNDS=3 bench/parallel.sh 2 4 8
set -euo pipefail
root=$(git rev-parse --show-toplevel)
work=${WORK:-$root/legorl-work/bench-parallel}
bin=$root/bin/legorl
rounds=${ROUNDS:-2}
[ $# -gt 0 ] || set -- 4 8
mkdir -p "$work"
[ -f "$work/suite/tasks.jsonl" ] || "$bin" tasks generate --n 1400 --seed 1 --languages python --out "$work/suite" >/dev/null
python3 - "$work/suite" <<'PY'
import json, sys
s = sys.argv[1]
train = [l for l in open(f"{s}/tasks.jsonl") if json.loads(l).get("split") == "train"][:32]
assert len(train) == 32, f"{len(train)} training tasks"
open(f"{s}/bench.jsonl", "w").writelines(train)
PY
printf 'round parallel wall_s cpu_s rollouts_per_min\n' | tee "$work/results.txt"
for r in $(seq 1 "$rounds"); do
	for p in "$@"; do
		out=$work/p$p-r$r
		rm -rf "$out" && mkdir -p "$out"
		/usr/bin/time -o "$out/time" -f '%e %U %S' "$bin" rollout --tasks "$work/suite/bench.jsonl" --split train \
			--policy "$root/policy/starter/bash-sed" --harness bash --run "par-$p-$r" --group 8 --parallel "$p" \
			--max-turns 4 --max-tokens 128 --store "file://$out/store" >"$out/log.txt" 2>&1 ||
			{ echo "bench-parallel: parallel $p round $r failed; see $out/log.txt" >&2; exit 1; }
		read -r wall user sys <"$out/time"
		awk -v r="$r" -v p="$p" -v w="$wall" -v u="$user" -v y="$sys" \
			'BEGIN { printf "%s %s %.1f %.1f %.1f\n", r, p, w, u+y, 256/w*60 }' | tee -a "$work/results.txt"
	done
done
