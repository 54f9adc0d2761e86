#!/usr/bin/env python3
"""Times PyTorch's AdamW (foreach=True) on one flat fp32 parameter tensor, the baseline for adam_bench.

The same work as adam_bench's BM_AdamW_f32grad: one tensor of N fp32 parameters with an fp32
gradient, weight_decay=0.01, run with a fixed number of CPU threads (torch.set_num_threads). Each size
is warmed up with 3 steps, then timed over --repeats steps; the median step time is reported as
params/s and as bytes/s at 28 bytes per parameter (read p, m, v, g; write p, m, v), the count
adam_bench uses.

Usage: python3 scripts/bench/torch_adam.py [--sizes 16777216,67108864] [--threads N] [--repeats 7] [--json]
--threads defaults to $OMP_NUM_THREADS, else every CPU. --json prints one JSON object instead of the table.
Needs PyTorch (Debian: apt-get install python3-torch).
"""
import argparse
import json
import os
import statistics
import time

import torch

BYTES_PER_PARAM = 28


def time_adamw(n, repeats):
    gen = torch.Generator().manual_seed(0)
    param = torch.nn.Parameter(torch.rand(n, generator=gen) * 2 - 1)
    param.grad = torch.rand(n, generator=gen) * 2 - 1
    opt = torch.optim.AdamW([param], lr=1e-3, weight_decay=0.01, foreach=True)
    for _ in range(3):
        opt.step()
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        opt.step()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="16777216,67108864", help="comma-separated parameter counts")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    threads = args.threads if args.threads > 0 else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    results = []
    for n in (int(s) for s in args.sizes.split(",") if s):
        seconds = time_adamw(n, args.repeats)
        results.append({
            "params": n,
            "median_step_seconds": seconds,
            "params_per_second": n / seconds,
            "bytes_per_second": n * BYTES_PER_PARAM / seconds,
        })
    if args.json:
        print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                          "optimizer": "torch.optim.AdamW(foreach=True)", "results": results}))
        return
    print(f"torch {torch.__version__}  AdamW(foreach=True)  threads={torch.get_num_threads()}")
    print(f"{'params':>12} {'step_ms':>10} {'Mparams/s':>10} {'GB/s':>8}")
    for r in results:
        print(f"{r['params']:>12} {r['median_step_seconds'] * 1e3:>10.2f} {r['params_per_second'] / 1e6:>10.1f} "
              f"{r['bytes_per_second'] / 1e9:>8.2f}")


if __name__ == "__main__":
    main()
