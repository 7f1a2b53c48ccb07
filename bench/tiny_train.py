#!/usr/bin/python3
"""PyTorch side of the training-step comparison with policy/model's
BenchmarkTrainStep and BenchmarkLogprobs: the same reference tiny Qwen3
config (policy/model/testdata/tiny.json: 4 layers, d=256, 4 query heads and
2 KV heads of 64, QK-norm, RoPE theta 1e6, SwiGLU 768, vocab 4096, tied
embeddings), batch 8 x 512 tokens, AdamW (lr 1e-4, weight decay 0.01,
gradient clipping at 1), fp32, one thread by default.

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/tiny_train.py

Prints tokens/s for one optimizer step (forward, backward, clip, AdamW) and
for the logprob-only forward, over wall-clock time and over this process's
CPU time (tokens/cpu-s, the figure that survives a busy machine).
"""
import argparse
import json
import math
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
# torch.set_num_threads: without this (or threadpoolctl) it runs one
# busy-waiting thread per core and its tokens per CPU-second halve or worse.
# It must be set before torch loads OpenBLAS.
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads_arg())
os.environ.setdefault("OMP_NUM_THREADS", _threads_arg())

import torch  # noqa: E402
import torch.nn as nn

try:
    import threadpoolctl
except ImportError:
    threadpoolctl = None
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CONFIG = os.path.join(HERE, "..", "policy", "model", "testdata", "tiny.json")


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rope_tables(seq, head_dim, theta):
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = torch.outer(torch.arange(seq, dtype=torch.float64), inv)
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float(), ang.sin().float()


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat([-x[..., h:], x[..., :h]], dim=-1)


class Layer(nn.Module):
    def __init__(self, c):
        super().__init__()
        d, hd = c["hidden_size"], c["head_dim"]
        self.h, self.kv, self.hd = c["num_attention_heads"], c["num_key_value_heads"], hd
        eps = c["rms_norm_eps"]
        self.input_layernorm = RMSNorm(d, eps)
        self.q_proj = nn.Linear(d, self.h * hd, bias=False)
        self.k_proj = nn.Linear(d, self.kv * hd, bias=False)
        self.v_proj = nn.Linear(d, self.kv * hd, bias=False)
        self.o_proj = nn.Linear(self.h * hd, d, bias=False)
        self.q_norm = RMSNorm(hd, eps)
        self.k_norm = RMSNorm(hd, eps)
        self.post_attention_layernorm = RMSNorm(d, eps)
        f = c["intermediate_size"]
        self.gate_proj = nn.Linear(d, f, bias=False)
        self.up_proj = nn.Linear(d, f, bias=False)
        self.down_proj = nn.Linear(f, d, bias=False)

    def forward(self, x, cos, sin, mask):
        B, S, _ = x.shape
        h = self.input_layernorm(x)
        q = self.q_norm(self.q_proj(h).view(B, S, self.h, self.hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(h).view(B, S, self.kv, self.hd)).transpose(1, 2)
        v = self.v_proj(h).view(B, S, self.kv, self.hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        rep = self.h // self.kv
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        att = (q @ k.transpose(-1, -2)) / math.sqrt(self.hd) + mask
        o = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, S, self.h * self.hd)
        x = x + self.o_proj(o)
        h = self.post_attention_layernorm(x)
        return x + self.down_proj(F.silu(self.gate_proj(h)) * self.up_proj(h))


class Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"])
        self.layers = nn.ModuleList(Layer(c) for _ in range(c["num_hidden_layers"]))
        self.norm = RMSNorm(c["hidden_size"], c["rms_norm_eps"])
        if not c.get("tie_word_embeddings", False):
            self.lm_head = nn.Linear(c["hidden_size"], c["vocab_size"], bias=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def logprobs(self, ids):
        """Log-probability of ids[:, 1:] given the prefix, shape [B, S-1]."""
        S = ids.shape[1]
        cos, sin = rope_tables(S, self.c["head_dim"], self.c["rope_theta"])
        mask = torch.full((S, S), float("-inf")).triu(1)
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        x = self.norm(x[:, :-1])
        w = self.embed_tokens.weight if not hasattr(self, "lm_head") else self.lm_head.weight
        logits = x @ w.t()
        return logits.log_softmax(-1).gather(-1, ids[:, 1:, None]).squeeze(-1)


def timed(fn, tokens, min_time):
    fn()  # warm up
    n, wall, cpu = 0, 0.0, 0.0
    while wall < min_time or n < 2:
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        n += 1
    return tokens * n / wall, tokens * n / cpu, n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=DEFAULT_CONFIG)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=512)
    ap.add_argument("--min-time", type=float, default=5.0, help="seconds per measurement")
    ap.add_argument("--count", type=int, default=3, help="repeats of each measurement")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    if threadpoolctl is not None:
        # Debian's torch calls OpenBLAS; keep its pool to the same count.
        threadpoolctl.threadpool_limits(args.threads)
        for info in threadpoolctl.threadpool_info():
            print("# threadpool:", info.get("internal_api"), info.get("version"),
                  "architecture=" + str(info.get("architecture")), "num_threads=" + str(info.get("num_threads")))
    torch.manual_seed(1)
    with open(args.config) as f:
        c = json.load(f)
    model = Model(c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01)
    ids = torch.randint(0, c["vocab_size"], (args.batch, args.seq))
    tokens = args.batch * args.seq
    print(f"# torch {torch.__version__} threads={torch.get_num_threads()} "
          f"params={sum(p.numel() for p in model.parameters())} batch={args.batch} seq={args.seq}")

    def train_step():
        opt.zero_grad(set_to_none=True)
        loss = -model.logprobs(ids).mean()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()

    def logprobs():
        with torch.no_grad():
            model.logprobs(ids)

    for name, fn in [("train_step", train_step), ("logprobs", logprobs)]:
        for _ in range(args.count):
            wall, cpu, n = timed(fn, tokens, args.min_time)
            print(f"{name}/torch/threads={args.threads}\t{wall:9.0f} tokens/s\t{cpu:9.0f} tokens/cpu-s\t({n} runs)", flush=True)


if __name__ == "__main__":
    main()
