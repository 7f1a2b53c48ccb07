#!/usr/bin/python3
"""Independent Qwen3 / Qwen3-MoE forward pass in plain PyTorch.

A cross-check of the Go model in policy/model: it follows the Hugging Face
modeling code (Qwen3ForCausalLM, Qwen3MoeForCausalLM) written out with torch
tensor operations only (the transformers package is not needed), reads a
checkpoint folder (config.json + model.safetensors or a sharded index) with a
small pure-Python safetensors reader, and scores completions.

Input: JSON lines {"prompt_ids": [...], "completion_ids": [...],
"routing": optional [[[...]]] to replay, "temperature": optional,
"weights": optional per completion token}.
Output: one JSON line per input {"logprobs": [...], "routing": [[[...]]]}; with
--grad NAME (repeatable) also {"grads": {NAME: flat list}} holding the gradient
of sum_t weights[t] * logprob[t] with respect to that tensor (torch autograd).

usage: qwen3_ref.py --model DIR --input FILE.jsonl [--dtype float32|float64] [--grad NAME]...
"""

import argparse
import json
import math
import os
import struct
import sys

import torch

DTYPES = {"F32": (torch.float32, 4), "BF16": (torch.bfloat16, 2), "F16": (torch.float16, 2)}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    body = data[8 + n :]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt, size = DTYPES[info["dtype"]]
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(body[b:e]), dtype=dt) if e > b else torch.zeros(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).float()
    return out


def read_checkpoint(d):
    with open(os.path.join(d, "config.json")) as f:
        cfg = json.load(f)
    idx = os.path.join(d, "model.safetensors.index.json")
    if os.path.exists(idx):
        with open(idx) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        w = {}
        for fn in files:
            w.update(read_safetensors(os.path.join(d, fn)))
    else:
        w = read_safetensors(os.path.join(d, "model.safetensors"))
    return cfg, w


def rms_norm(x, weight, eps):
    # Qwen3RMSNorm: in float32 (here: the working dtype), x * rsqrt(mean(x^2) + eps) * weight
    var = x.pow(2).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(var + eps))


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rope(S, head_dim, theta, dtype):
    # Qwen3RotaryEmbedding (default rope): inv_freq in float32, angles in float32.
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    pos = torch.arange(S).float()
    freqs = pos[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    if dtype == torch.float64:
        inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
        freqs = torch.arange(S, dtype=torch.float64)[:, None] * inv_freq[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().to(dtype), emb.sin().to(dtype)


def is_moe(cfg, l):
    n = cfg.get("num_experts", 0) or 0
    step = cfg.get("decoder_sparse_step", 1) or 1
    return l not in (cfg.get("mlp_only_layers") or []) and n > 0 and (l + 1) % step == 0


def mlp(x, w, pre):
    g = x @ w[pre + "gate_proj.weight"].T
    u = x @ w[pre + "up_proj.weight"].T
    return (torch.nn.functional.silu(g) * u) @ w[pre + "down_proj.weight"].T


def moe(cfg, x, w, pre, replay):
    """Qwen3MoeSparseMoeBlock; replay is None or a [S][k] list of expert ids."""
    E, K = cfg["num_experts"], cfg["num_experts_per_tok"]
    logits = x @ w[pre + "gate.weight"].T
    probs = torch.softmax(logits, dim=1)
    if replay is None:
        rw, sel = torch.topk(probs, K, dim=-1)
    else:
        sel = torch.tensor(replay, dtype=torch.int64)
        rw = torch.gather(probs, 1, sel)
    if cfg.get("norm_topk_prob", False):
        rw = rw / rw.sum(dim=-1, keepdim=True)
    out = torch.zeros_like(x)
    for e in range(E):
        tok, slot = torch.where(sel == e)
        if tok.numel() == 0:
            continue
        y = mlp(x[tok], w, pre + "experts.%d." % e)
        out = out.index_add(0, tok, y * rw[tok, slot, None])
    return out, sel.tolist()


def forward(cfg, w, ids, replay=None):
    """Returns final hidden states [S, d] (pre LM head) and routing [S][L][k]."""
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    KV = cfg.get("num_key_value_heads") or H
    hd = cfg.get("head_dim") or d // H
    eps = cfg.get("rms_norm_eps", 1e-6)
    theta = cfg.get("rope_theta", 1e6)
    S = len(ids)
    dtype = w["model.embed_tokens.weight"].dtype
    x = w["model.embed_tokens.weight"][torch.tensor(ids, dtype=torch.int64)]
    cos, sin = rope(S, hd, theta, dtype)
    mask = torch.full((S, S), float("-inf"), dtype=dtype).triu(1)
    routing = [[] for _ in range(S)]
    moe_idx = 0
    for l in range(cfg["num_hidden_layers"]):
        pre = "model.layers.%d." % l
        h = rms_norm(x, w[pre + "input_layernorm.weight"], eps)
        q = (h @ w[pre + "self_attn.q_proj.weight"].T).view(S, H, hd)
        k = (h @ w[pre + "self_attn.k_proj.weight"].T).view(S, KV, hd)
        v = (h @ w[pre + "self_attn.v_proj.weight"].T).view(S, KV, hd)
        q = rms_norm(q, w[pre + "self_attn.q_norm.weight"], eps).transpose(0, 1)
        k = rms_norm(k, w[pre + "self_attn.k_norm.weight"], eps).transpose(0, 1)
        v = v.transpose(0, 1)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(H // KV, dim=0)
        v = v.repeat_interleave(H // KV, dim=0)
        att = (q @ k.transpose(1, 2)) * (hd ** -0.5) + mask
        att = torch.softmax(att, dim=-1)
        o = (att @ v).transpose(0, 1).reshape(S, H * hd)
        x = x + o @ w[pre + "self_attn.o_proj.weight"].T
        h = rms_norm(x, w[pre + "post_attention_layernorm.weight"], eps)
        if is_moe(cfg, l):
            rp = None if replay is None else [replay[t][moe_idx] for t in range(S)]
            m, sel = moe(cfg, h, w, pre + "mlp.", rp)
            for t in range(S):
                routing[t].append(sel[t])
            moe_idx += 1
        else:
            m = mlp(h, w, pre + "mlp.")
        x = x + m
    return rms_norm(x, w["model.norm.weight"], eps), routing


def logprobs(cfg, w, prompt, completion, temperature, replay):
    ids = list(prompt) + list(completion)
    hidden, routing = forward(cfg, w, ids, replay)
    head = w["model.embed_tokens.weight"] if cfg.get("tie_word_embeddings", False) else w["lm_head.weight"]
    P = len(prompt)
    rows = hidden[P - 1 : len(ids) - 1]
    lp = torch.log_softmax((rows @ head.T) / temperature, dim=-1)
    tgt = torch.tensor(completion, dtype=torch.int64)
    return lp[torch.arange(len(completion)), tgt], routing


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    ap.add_argument("--grad", action="append", default=[])
    a = ap.parse_args()
    torch.set_num_threads(1)
    cfg, w = read_checkpoint(a.model)
    dt = torch.float64 if a.dtype == "float64" else torch.float32
    w = {k: v.to(dt) for k, v in w.items()}
    for name in a.grad:
        if name not in w:
            sys.exit("qwen3_ref: no tensor %r" % name)
        w[name].requires_grad_(True)
    with open(a.input) as f:
        for line in f:
            if not line.strip():
                continue
            req = json.loads(line)
            for name in a.grad:
                w[name].grad = None
            lp, routing = logprobs(cfg, w, req["prompt_ids"], req["completion_ids"],
                                   req.get("temperature") or 1.0, req.get("routing"))
            out = {"logprobs": [float(v) for v in lp.detach()], "routing": routing if any(routing) else None}
            if a.grad:
                wt = torch.tensor(req.get("weights") or [1.0] * len(lp), dtype=dt)
                (lp * wt).sum().backward()
                out["grads"] = {n: [float(v) for v in w[n].grad.flatten()] for n in a.grad}
            print(json.dumps(out))


if __name__ == "__main__":
    main()
