#!/usr/bin/env python3
"""PyTorch FSDP2 with CPU offload on one GPU: the peer of zinf's ZeRO-3 run with states in CPU memory (issue 28).

What it does: builds scripts/torch_gpt.py's TorchGPT (the twin of zinf's GPT-like model) with the given
shape, shards it with FSDP2 over a one-rank process group (torch.distributed.fsdp.fully_shard on every
transformer block, then on the whole model), with
    offload_policy = CPUOffloadPolicy(pin_memory=True)   parameters, gradients and AdamW states in CPU
                                                         memory; the optimizer step runs on the CPU
    mp_policy = MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)
                                                         bf16 compute from fp32 parameters
and torch.optim.AdamW(foreach=True) over the (CPU) parameters. It runs --warmup untimed steps then
--steps timed steps, each step being
    optimizer.zero_grad(set_to_none=True); loss = model(tokens, targets); loss.backward(); optimizer.step()
on a fresh [batch, seq + 1] batch of uniform random token ids per step (drawn from a generator seeded
with --seed; the draw and the copy to the GPU are not timed). Each step is timed with
time.perf_counter() from zero_grad to the end of optimizer.step() after torch.cuda.synchronize(): the
same clock as scripts/bench/torch_train.py and zinf's step time.
--device cpu (a smoke test without a GPU): gloo, no CPU offload, fp32; not a benchmark.

Output: ONE JSON line on stdout (and in --out when given):
  tokens_per_s_median  batch * seq / median of step_ms (in seconds)
  step_ms              the timed steps' wall times, in order
  warmup_step_ms       the warm-up steps' wall times
  losses               the loss of every step, warm-up steps first
  torch_version, gpu, config (the arguments, params, policies)
Exit status 2 on a bad argument.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
import torch.distributed as dist

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
    parser.add_argument("--layers", type=positive_int, default=24)
    parser.add_argument("--hidden", type=positive_int, default=2048)
    parser.add_argument("--heads", type=positive_int, default=16)
    parser.add_argument("--vocab", type=positive_int, default=50257)
    parser.add_argument("--seq", type=positive_int, default=2048, help="tokens per sequence (also max_positions)")
    parser.add_argument("--batch", type=positive_int, default=8, help="sequences per step")
    parser.add_argument("--steps", type=positive_int, default=3, help="timed steps")
    parser.add_argument("--warmup", type=non_negative_int, default=1, help="untimed steps before them")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--weight-decay", type=float, default=0.1)
    parser.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    parser.add_argument("--out", help="also write the JSON line to this file")
    args = parser.parse_args(argv)
    if args.hidden % args.heads != 0:
        parser.error(f"--heads: {args.heads} does not divide --hidden {args.hidden}")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device: cuda requested but torch.cuda.is_available() is False")
    return args


def main(argv=None):
    args = parse_args(argv)
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard

    cuda = args.device == "cuda"
    if cuda:
        torch.cuda.set_device(0)
    # One rank, rendezvous through a file: no port, no network.
    with tempfile.TemporaryDirectory() as rendezvous:
        dist.init_process_group(backend="nccl" if cuda else "gloo",
                                init_method=f"file://{os.path.join(rendezvous, 'store')}", rank=0, world_size=1)
        try:
            return run(args, cuda, CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard)
        finally:
            dist.destroy_process_group()


def run(args, cuda, CPUOffloadPolicy, MixedPrecisionPolicy, fully_shard):
    torch.manual_seed(args.seed)
    model = TorchGPT(args.layers, args.hidden, args.heads, args.vocab, args.seq)
    model.train()
    params = sum(p.numel() for p in model.parameters())
    shard = {}
    if cuda:
        shard["offload_policy"] = CPUOffloadPolicy(pin_memory=True)
        shard["mp_policy"] = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for block in model.blocks:
        fully_shard(block, **shard)
    fully_shard(model, **shard)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=args.weight_decay, foreach=True)
    device = torch.device("cuda" if cuda else "cpu")
    data = torch.Generator().manual_seed(args.seed)

    losses = []
    step_seconds = []
    for _ in range(args.warmup + args.steps):
        batch = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=data, dtype=torch.int64)
        batch = batch.to(device)
        tokens, targets = batch[:, :-1], batch[:, 1:]
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(tokens, targets)
        loss.backward()
        optimizer.step()
        if cuda:
            torch.cuda.synchronize()
        step_seconds.append(time.perf_counter() - start)
        losses.append(loss.item())

    timed = step_seconds[args.warmup:]
    config = {k: v for k, v in vars(args).items() if k != "out"}
    config.update({
        "params": params,
        "engine": "FSDP2 fully_shard per block + root, 1 rank",
        "offload_policy": "CPUOffloadPolicy(pin_memory=True)" if cuda else None,
        "mp_policy": "MixedPrecisionPolicy(param_dtype=bfloat16, reduce_dtype=float32)" if cuda else "fp32",
        "optimizer": "torch.optim.AdamW(foreach=True) on the CPU-resident parameters" if cuda
                     else "torch.optim.AdamW(foreach=True)",
    })
    result = {
        "tokens_per_s_median": args.batch * args.seq / statistics.median(timed),
        "step_ms": [s * 1e3 for s in timed],
        "warmup_step_ms": [s * 1e3 for s in step_seconds[:args.warmup]],
        "losses": losses,
        "torch_version": torch.__version__,
        "gpu": torch.cuda.get_device_name() if cuda else None,
        "config": config,
    }
    line = json.dumps(result)
    print(line)
    if args.out:
        Path(args.out).write_text(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
