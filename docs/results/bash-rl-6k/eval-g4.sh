#!/bin/bash
# eval.group 4 re-measurement of bash-rl-6k's start and kept checkpoint
cd "$(dirname "$0")/../../.."  # the repository root; run after docs/results/bash-rl-6k.json
for p in starter-bash-sft:0 iter-000070:70; do
  d=${p%%:*}; it=${p##*:}
  bin/legorl eval --tasks legorl-work/bash-rl-6k/work/pools/eval-heldout.jsonl --harness bash --policy legorl-work/bash-rl-6k/work/checkpoints/$d --group 4     --store file://$PWD/legorl-work/bash-rl-6k/store --run bash-rl-6k-g4 --iteration $it --max-turns 4 --max-tokens 128 --split heldout
done
