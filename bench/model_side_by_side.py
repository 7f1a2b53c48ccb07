#!/usr/bin/python3
"""The Go model against PyTorch on the tiny config, side by side in one run.

Builds policy/model's test binary once, then alternates, round after round,
the Go benchmarks (BenchmarkTrainStep and BenchmarkLogprobs, GOMAXPROCS = T)
with bench/tiny_train.py (torch and OpenBLAS on T threads), for each thread
count T, so that both sides see the same moments of a shared machine. Both
report tokens per CPU-second (user + system time of the process, all
threads), one line per side and round in Go's benchmark format
(`make bench-train` keeps them in docs/perf/train.txt).

    /usr/bin/python3 bench/model_side_by_side.py --rounds 3 --threads 1,2

--also NAME=BINARY adds another build of the same benchmarks to every round
(for instance the test binary of an older commit, `go test -c -o BINARY
./policy/model` there), reported beside the same PyTorch run.

Run with `nice -n 19` on a shared machine: both sides then run at the same
priority.
"""
import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def go_side(binary, threads):
    env = dict(os.environ, GOMAXPROCS=str(threads))
    out = subprocess.run([binary, "-test.run", "^$", "-test.bench", "TrainStep$|Logprobs$",
                          "-test.benchtime", "2x", "-test.timeout", "0"],
                         cwd=os.path.join(ROOT, "policy", "model"), env=env,
                         capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"Benchmark(TrainStep|Logprobs)(-\d+)?\s", line)
        c = re.search(r"([\d.]+) tokens/cpu-s", line)
        if m and c:
            res["train_step" if m.group(1) == "TrainStep" else "logprobs"] = float(c.group(1))
    return res


def torch_side(threads):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
    out = subprocess.run(["/usr/bin/python3", os.path.join(ROOT, "bench", "tiny_train.py"),
                          "--threads", str(threads), "--count", "1", "--min-time", "2"],
                         env=env, capture_output=True, text=True, check=True).stdout
    res = {}
    for line in out.splitlines():
        m = re.match(r"(train_step|logprobs)/torch/threads=\d+\s+[\d.]+ tokens/s\s+([\d.]+) tokens/cpu-s", line)
        if m:
            res[m.group(1)] = float(m.group(2))
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--also", action="append", default=[], metavar="NAME=BINARY")
    args = ap.parse_args()
    threads = [int(t) for t in args.threads.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        binary = os.path.join(tmp, "model.test")
        subprocess.run(["go", "test", "-c", "-o", binary, "./policy/model"], cwd=ROOT, check=True)
        gos = [("go", binary)] + [tuple(a.split("=", 1)) for a in args.also]
        for r in range(args.rounds):
            for t in threads:
                res = [(name, go_side(os.path.abspath(b), t)) for name, b in gos]
                p = torch_side(t)
                for b in ("train_step", "logprobs"):
                    for name, v in [("torch", p)] + res:
                        print(f"BenchmarkModel/{b}/threads={t}/{name}\t1\t{v[b]:.0f} tokens/cpu-s", flush=True)

if __name__ == "__main__":
    sys.exit(main())
