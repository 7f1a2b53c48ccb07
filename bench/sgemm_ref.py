#!/usr/bin/python3
"""Anchor for policy/kernels' BenchmarkSgemm: fp32 matmul GFLOP/s of
OpenBLAS (through numpy) and PyTorch on the same shapes, on 1 and all cores.

Run it next to the Go benchmark, with OpenBLAS free to pick its own kernel:

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 bench/sgemm_ref.py

Prints one line per shape, library and thread count with GFLOP/s over
wall-clock time and GFLOP/cpu-s over this process's CPU time (the figure
that survives a machine busy with other work; on all cores it is per core),
the same two metrics the Go benchmark reports.
"""
import argparse
import os
import re
import time

import numpy as np

try:
    import torch
except ImportError:  # numpy alone still gives the OpenBLAS anchor
    torch = None
try:
    import threadpoolctl
except ImportError:
    threadpoolctl = None

# name, transA, transB, m, n, k: the same list as benchShapes in
# policy/kernels/gemm_bench_test.go.
SHAPES = [
    ("sq256", False, False, 256, 256, 256),
    ("sq512", False, False, 512, 512, 512),
    ("sq1024", False, False, 1024, 1024, 1024),
    ("4096x256x768", False, False, 4096, 768, 256),
    ("4096x256x768T", False, True, 4096, 768, 256),
    ("768x4096x256TA", True, False, 768, 256, 4096),
    ("4096x256x4096T", False, True, 4096, 4096, 256),
    ("1x256x4096T", False, True, 1, 4096, 256),
    ("4x256x768T", False, True, 4, 768, 256),
]


def operands(rng, ta, tb, m, n, k):
    a = rng.uniform(-1, 1, (k, m) if ta else (m, k)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, k) if tb else (k, n)).astype(np.float32)
    return a, b


def measure(fn, flops, min_time):
    fn()  # warm up: page in, pick kernels
    n, wall, cpu = 0, 0.0, 0.0
    while wall < min_time:
        w0, c0 = time.perf_counter(), time.process_time()
        fn()
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
        n += 1
    return flops * n / wall / 1e9, flops * n / max(cpu, 1e-9) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--min-time", type=float, default=1.0, help="seconds per measurement")
    ap.add_argument("--count", type=int, default=3, help="repeats of each measurement")
    ap.add_argument("--only", default="", help="regular expression: measure only the shapes it matches")
    args = ap.parse_args()

    ncpu = os.cpu_count() or 1
    threads = [1] if ncpu == 1 else [1, ncpu]
    if threadpoolctl is not None:
        for info in threadpoolctl.threadpool_info():
            print("# threadpool:", info.get("internal_api"), info.get("version"),
                  "architecture=" + str(info.get("architecture")), "threading=" + str(info.get("threading_layer")),
                  info.get("filepath"))
    else:
        print("# threadpoolctl not installed: OpenBLAS kernel unknown")
    print("# numpy", np.__version__, "torch", torch.__version__ if torch else "absent",
          "OPENBLAS_CORETYPE=" + os.environ.get("OPENBLAS_CORETYPE", "(unset)"))

    rng = np.random.default_rng(1)
    for name, ta, tb, m, n, k in SHAPES:
        if args.only and not re.search(args.only, name):
            continue
        a, b = operands(rng, ta, tb, m, n, k)
        flops = 2.0 * m * n * k
        c = np.empty((m, n), np.float32)
        npa, npb = (a.T if ta else a), (b.T if tb else b)
        libs = [("openblas", lambda: np.matmul(npa, npb, out=c))]
        if torch is not None:
            ta_, tb_ = torch.from_numpy(a), torch.from_numpy(b)
            tpa, tpb = (ta_.t() if ta else ta_), (tb_.t() if tb else tb_)
            tc = torch.empty(m, n)
            libs.append(("torch", lambda: torch.matmul(tpa, tpb, out=tc)))
        for lib, fn in libs:
            for t in threads:
                if lib == "torch":
                    torch.set_num_threads(t)
                limits = threadpoolctl.threadpool_limits(t) if threadpoolctl and lib == "openblas" else None
                try:
                    for _ in range(args.count):
                        wall, cpu = measure(fn, flops, args.min_time)
                        print(f"BenchmarkSgemm/{name}/{lib}/threads={t}\t1\t{wall:8.1f} GFLOP/s\t{cpu:8.1f} GFLOP/cpu-s", flush=True)
                finally:
                    if limits is not None:
                        limits.restore_original_limits()

if __name__ == "__main__":
    main()
