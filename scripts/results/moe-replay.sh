#!/usr/bin/env bash
# The MoE rows of docs/results/old-suite/NOTES.md: a tiny Qwen3-MoE (8 experts, top-2) samples
# rollouts through the engine; the trainer's train-inference check then
# recomputes every sampled token's logprob with and without replaying the
# recorded routes. PRECISION=bf16 makes the engine sample with bf16-rounded
# matrix-product inputs (backend.CPUBF16) while the trainer recomputes in
# fp32, so that routes can differ as between a serving engine and a trainer.
# Usage: [PRECISION=bf16] scripts/results/moe-replay.sh [WORKDIR]
set -euo pipefail
W=${1:-./legorl-work/moe-replay}
L=${LEGORL:-bin/legorl}
mkdir -p "$W"
[ -f "$W/suite/tasks.jsonl" ] || $L tasks generate --suite builtin --n 20 --seed 2 --out "$W/suite"
[ -f "$W/demos.jsonl" ] || $L sft demos --tasks "$W/suite" --harness bash --out "$W/demos.jsonl"
[ -f "$W/tokenizer.json" ] || $L tokenizer train --vocab 1024 --corpus "$W/demos.jsonl" --out "$W/tokenizer.json"
cat > "$W/moe.json" <<'JSON'
{"model_type": "qwen3_moe", "vocab_size": 1024, "hidden_size": 128, "intermediate_size": 384,
 "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 32,
 "max_position_embeddings": 4096, "tie_word_embeddings": true, "num_experts": 8,
 "num_experts_per_tok": 2, "norm_topk_prob": true, "moe_intermediate_size": 96,
 "decoder_sparse_step": 1, "mlp_only_layers": []}
JSON
[ -d "$W/init" ] || $L model init --config "$W/moe.json" --tokenizer "$W/tokenizer.json" --out "$W/init" --seed 1
$L rollout --tasks "$W/suite" --harness bash --policy "$W/init" --group 4 --store "file://$PWD/$W/store" \
  --run moe --iteration 0 --max-turns 3 --max-tokens 64 --precision "${PRECISION:-fp32}"
for mode in replay no-replay; do
  rm -rf "$W/out-$mode"
  flag=""; [ $mode = no-replay ] && flag=--no-replay
  $L train --store "file://$PWD/$W/store" --run moe --iteration 0 --policy "$W/init" --out "$W/out-$mode" \
    --lr 1e-4 --min-pearson 0 $flag
done
# The two gates' overall agreement, for docs/results/old-suite/NOTES.md.
python3 - "$W" "${PRECISION:-fp32}" > "$W/gates.json" <<'PY'
import json, sys
w, precision = sys.argv[1], sys.argv[2]
out = {"engine_precision": precision, "trainer_precision": "fp32"}
for mode in ("replay", "no-replay"):
    with open(f"{w}/out-{mode}/lineage.json") as f:
        out[mode] = json.load(f)["gate"]["overall"]
json.dump(out, sys.stdout, indent=2)
print()
PY
cat "$W/gates.json"
