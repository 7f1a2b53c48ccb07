#!/usr/bin/env bash
# identical.sh BASE: show that a refactoring left behaviour unchanged. It
# builds `legorl` at commit BASE and at the working tree, runs the same
# fixed-seed `legorl run` (a 60-instance built-in suite, the committed bash
# starter, one RL iteration and a held-out eval) with each, then compares
# what the runs wrote: every row of every table of every run in the two
# stores (the rollouts, their segments with token ids and logprobs, the
# training steps; the loop's run and its eval runs), exported as JSON lines
# by the same binary, and the `legorl audit` of the loop's run. Columns that
# hold wall-clock times (`seconds`, `*_seconds`, `*_at_ms`, `*_per_second`) are the
# only ones dropped. It prints one line per table with the rows and sha256
# of each side, and exits non-zero if any table or the audit differs.
#
# BASE must read the same loop config (rl.tasks_per_iteration, eval.splits
# and max_tasks: 1fabd68 or later) and behave the same by design: commits
# that change what a run does on purpose cannot be compared so.
#
# Usage: scripts/identical.sh BASE          (from the repository root)
#        WORK=/tmp/x scripts/identical.sh BASE
set -euo pipefail
base=${1:?usage: scripts/identical.sh COMMIT}
root=$(git rev-parse --show-toplevel)
work=${WORK:-$root/legorl-work/identical}
. "$root/scripts/lib/pair.sh"
build_pair identical "$base" "$work"

cat >"$work/config.json" <<EOF
{
  "run": "identical",
  "builtin": {"n": 60, "seed": 1, "languages": ["python"]},
  "policy": "$root/policy/starter/bash-sft",
  "harness": "bash",
  "iterations": 1,
  "group": 2,
  "rollout": {"max_turns": 3, "max_tokens": 64, "parallel": 2},
  "train": {"lr": 0.0003, "steps": 1, "seed": 1},
  "rl": {"tasks_per_iteration": 8, "select": "variance"},
  "eval": {"group": 1, "max_tasks": 8, "splits": ["heldout"]}
}
EOF

for side in base new; do
	echo "identical: legorl run with the $side binary" >&2
	"$work/$side/bin/legorl" run --config "$work/config.json" --work "$work/$side/work" \
		--store "file://$work/$side/store" >"$work/$side/run.log" 2>&1 ||
		{ echo "identical: the $side run failed; see $work/$side/run.log" >&2; exit 1; }
done

# Rows of a table as sorted JSON lines, wall-clock columns dropped.
norm() {
	python3 -c '
import json, re, sys
drop = re.compile(r"(^seconds|_seconds|_at_ms|_ms|per_s|per_second)$")
rows = []
for line in sys.stdin:
    d = json.loads(line)
    rows.append(json.dumps({k: v for k, v in d.items() if not drop.search(k)}, sort_keys=True))
print("\n".join(sorted(rows)))'
}

status=0
for run in $(ls "$work/new/store/runs"); do
	for table in rollouts segments steps train_steps; do
		for side in base new; do
			"$work/new/bin/legorl" export --store "file://$work/$side/store" --run "$run" --table "$table" 2>/dev/null |
				norm >"$work/$side/$run.$table.jsonl" || true
		done
		b=$(sha256sum <"$work/base/$run.$table.jsonl" | cut -c1-16)
		n=$(sha256sum <"$work/new/$run.$table.jsonl" | cut -c1-16)
		rows=$(grep -c . "$work/new/$run.$table.jsonl" || true)
		[ "$rows" = 0 ] && continue
		if [ "$b" = "$n" ]; then
			echo "identical: $run $table: $rows rows, sha256 $n on both"
		else
			echo "identical: $run $table DIFFERS: base $b, new $n ($(grep -c . "$work/base/$run.$table.jsonl") and $rows rows)"
			status=1
		fi
	done
done
for side in base new; do
	ckpts=$(ls -d "$work/$side/work/checkpoints"/*/ | sed 's#/$##' | paste -sd,)
	"$work/new/bin/legorl" audit --store "file://$work/$side/store" --run identical \
		--checkpoints "$ckpts" 2>&1 |
		sed -E "s#$work/$side#WORK#g; s/[0-9.]+ ?(s|ms)\b/T/g" >"$work/$side/audit.txt" || true
done
if cmp -s "$work/base/audit.txt" "$work/new/audit.txt"; then
	echo "identical: audit output the same ($(wc -l <"$work/new/audit.txt") lines)"
else
	echo "identical: audit output DIFFERS:"; diff "$work/base/audit.txt" "$work/new/audit.txt" | head -20
	status=1
fi
exit $status
