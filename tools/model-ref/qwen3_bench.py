#!/usr/bin/python3
"""PyTorch side of the policy model benchmark (policy/model/model_bench_test.go).

Builds the model of a config.json with random weights (std 0.02, norms 1) in
float32 and measures, on the same shapes as the Go benchmark (batch 8 x 512
tokens by default), tokens/s of
  - a training step: forward, loss = -mean logprob, backward, AdamW step with
    gradient clipping, and
  - a logprob-only forward under torch.no_grad().
The forward pass is qwen3_ref.forward (the cross-check reference), run per
sequence.

usage: qwen3_bench.py --config policy/model/testdata/tiny.json [--threads 1] [--steps 3]
Run it with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset (env -u ...), or
OpenBLAS may pick a slow kernel.
"""

import argparse
import json
import os
import sys
import time


def _threads_arg():
    for i, a in enumerate(sys.argv):
        if a == "--threads" and i + 1 < len(sys.argv):
            return sys.argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return "1"


# Debian's torch calls OpenBLAS, whose pthread pool ignores
# torch.set_num_threads; pin it (before torch loads it) to the same count.
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_arg())
os.environ.setdefault("OMP_NUM_THREADS", _threads_arg())

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import qwen3_ref  # noqa: E402


def tensors(cfg):
    d, hd = cfg["hidden_size"], cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
    H, KV = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], d), "model.norm.weight": (d,)}
    if not cfg.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (cfg["vocab_size"], d)
    for l in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % l
        shapes.update({p + "input_layernorm.weight": (d,), p + "post_attention_layernorm.weight": (d,),
                       p + "self_attn.q_proj.weight": (H * hd, d), p + "self_attn.k_proj.weight": (KV * hd, d),
                       p + "self_attn.v_proj.weight": (KV * hd, d), p + "self_attn.o_proj.weight": (d, H * hd),
                       p + "self_attn.q_norm.weight": (hd,), p + "self_attn.k_norm.weight": (hd,)})

        def mlp(pre, inter):
            shapes.update({pre + "gate_proj.weight": (inter, d), pre + "up_proj.weight": (inter, d),
                           pre + "down_proj.weight": (d, inter)})
        if qwen3_ref.is_moe(cfg, l):
            shapes[p + "mlp.gate.weight"] = (cfg["num_experts"], d)
            for e in range(cfg["num_experts"]):
                mlp(p + "mlp.experts.%d." % e, cfg["moe_intermediate_size"])
        else:
            mlp(p + "mlp.", cfg["intermediate_size"])
    g = torch.Generator().manual_seed(1)
    return {n: (torch.ones(s) if len(s) == 1 else torch.randn(s, generator=g) * 0.02).requires_grad_(True)
            for n, s in shapes.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    with open(a.config) as f:
        cfg = json.load(f)
    w = tensors(cfg)
    opt = torch.optim.AdamW(list(w.values()), lr=1e-4, weight_decay=0.01)
    g = torch.Generator().manual_seed(2)
    seqs = [torch.randint(0, cfg["vocab_size"], (a.seq,), generator=g).tolist() for _ in range(a.batch)]
    tokens = a.batch * a.seq

    def step():
        opt.zero_grad()
        loss = 0
        for ids in seqs:
            lp, _ = qwen3_ref.logprobs(cfg, w, ids[:1], ids[1:], 1.0, None)
            loss = loss - lp.sum() / tokens
        loss.backward()
        torch.nn.utils.clip_grad_norm_(list(w.values()), 1.0)
        opt.step()

    def fwd():
        with torch.no_grad():
            for ids in seqs:
                qwen3_ref.logprobs(cfg, w, ids[:1], ids[1:], 1.0, None)

    for name, f in (("train_step", step), ("logprobs", fwd)):
        f()  # warm up
        t = time.perf_counter()
        for _ in range(a.steps):
            f()
        sec = (time.perf_counter() - t) / a.steps
        print(json.dumps({"bench": name, "threads": a.threads, "batch": a.batch, "seq": a.seq,
                          "sec_per_op": round(sec, 4), "tokens_per_s": round(tokens / sec, 1)}))


if __name__ == "__main__":
    main()
