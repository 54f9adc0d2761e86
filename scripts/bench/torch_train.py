#!/usr/bin/env python3
"""Times GPT training steps in PyTorch (fp32 on the CPU; fp32 or bf16 on a GPU): the baseline `zinf bench train` runs next to zinf.

What it does: builds scripts/torch_gpt.py's TorchGPT (the twin of zinf's GPT-like model) with the given
shape, seeds torch (torch.manual_seed), fixes the CPU thread count (torch.set_num_threads), and runs
--warmup untimed steps then --steps timed steps, each step being
    optimizer.zero_grad(set_to_none=True); loss = model(tokens, targets); loss.backward(); optimizer.step()
with torch.optim.AdamW(foreach=True) (fused=True on a GPU) on random tokens: every step draws a fresh [batch, seq + 1] batch of
token ids uniform over the vocabulary from a generator seeded with --seed, and trains on its first seq
columns to predict the next. Each step is timed with time.perf_counter() from zero_grad to the end of
optimizer.step() (drawing the batch is not timed; on the CPU every op has finished when step() returns,
on a GPU torch.cuda.synchronize() waits for it before the clock is read).
--device cuda --dtype bf16: the model and batch on the GPU, fp32 parameters and AdamW states, the
forward and backward under torch.autocast(bfloat16) — eager PyTorch's usual bf16 mixed precision.
What it is not: a data-loading or convergence benchmark.

Output: ONE JSON line on stdout (anything else goes to stderr):
  tokens_per_s_median  batch * seq / median of step_ms (in seconds)
  step_ms              the timed steps' wall times, in order
  warmup_step_ms       the warm-up steps' wall times, in order (not in the median)
  losses               the loss of every step, warm-up steps first
  threads              torch.get_num_threads() during the run
  torch_version        torch.__version__
  config               the arguments, plus params (parameter count), dtype and optimizer

Usage: /usr/bin/python3 scripts/bench/torch_train.py [--layers 4 --hidden 1024 --heads 16 --vocab 50257
       --seq 256 --batch 8 --steps 10 --warmup 2 --threads N --seed 0 --lr 3e-4 --weight-decay 0.01
       --device cpu|cuda --dtype fp32|bf16]
--threads defaults to $OMP_NUM_THREADS, else every CPU. Exit status 2 on a bad argument.
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from pathlib import Path

import torch

# scripts/torch_gpt.py, found from this file's own location so the script runs from any directory.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from torch_gpt import TorchGPT  # noqa: E402  (needs the sys.path entry above)


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def non_negative_int(text):
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text} is not a non-negative integer")
    return value


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=positive_int, default=4)
    parser.add_argument("--hidden", type=positive_int, default=1024)
    parser.add_argument("--heads", type=positive_int, default=16)
    parser.add_argument("--vocab", type=positive_int, default=50257)
    parser.add_argument("--seq", type=positive_int, default=256, help="tokens per sequence (also max_positions)")
    parser.add_argument("--batch", type=positive_int, default=8, help="sequences per step")
    parser.add_argument("--steps", type=positive_int, default=10, help="timed steps")
    parser.add_argument("--warmup", type=non_negative_int, default=2, help="untimed steps before them")
    parser.add_argument("--threads", type=int, default=int(os.environ.get("OMP_NUM_THREADS", "0") or 0),
                        help="CPU threads (default $OMP_NUM_THREADS, else every CPU)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (torch's default)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: autocast mixed precision (--device cuda only)")
    args = parser.parse_args(argv)
    if args.dtype == "bf16" and args.device != "cuda":
        parser.error("--dtype: bf16 runs on --device cuda only")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device: cuda requested but torch.cuda.is_available() is False")
    if args.hidden % args.heads != 0:
        parser.error(f"--heads: {args.heads} does not divide --hidden {args.hidden}")
    if args.threads <= 0:
        args.threads = os.cpu_count() or 1
    return args


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    model = TorchGPT(args.layers, args.hidden, args.heads, args.vocab, args.seq).to(device)
    model.train()
    if args.device == "cuda":
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, fused=True)
        optimizer_name = "torch.optim.AdamW(fused=True)"
    else:
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, foreach=True)
        optimizer_name = "torch.optim.AdamW(foreach=True)"
    data = torch.Generator().manual_seed(args.seed)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if args.dtype == "bf16"
                else contextlib.nullcontext())

    losses = []
    step_seconds = []
    for _ in range(args.warmup + args.steps):
        batch = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=data, dtype=torch.int64)
        batch = batch.to(device)
        tokens = batch[:, :-1]
        targets = batch[:, 1:]
        if args.device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        with autocast:
            loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        if args.device == "cuda":
            torch.cuda.synchronize()
        step_seconds.append(time.perf_counter() - start)
        losses.append(loss.item())

    timed = step_seconds[args.warmup:]
    config = vars(args).copy()
    config.update({
        "params": sum(p.numel() for p in model.parameters()),
        "dtype": "float32" if args.dtype == "fp32" else "bfloat16 autocast, float32 parameters",
        "optimizer": optimizer_name,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "tied_embeddings": True,
    })
    result = {
        "tokens_per_s_median": args.batch * args.seq / statistics.median(timed),
        "step_ms": [s * 1e3 for s in timed],
        "warmup_step_ms": [s * 1e3 for s in step_seconds[:args.warmup]],
        "losses": losses,
        "threads": torch.get_num_threads(),
        "torch_version": torch.__version__,
        "config": config,
    }
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
