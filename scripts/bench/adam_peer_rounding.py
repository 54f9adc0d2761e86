#!/usr/bin/env python3
"""DeepSpeedCPUAdam and torch.optim.AdamW on the same arrays, each against an fp64 AdamW (issue 25).

Runs --steps AdamW steps of both optimizers from the same fp32 parameters and the same fp32
gradients (new normal gradients every step), and an fp64 reference of the same steps, and prints
one JSON object per step: for each side, the relative error of its update (p_t - p_{t-1}) against
the fp64 update, as the median and the maximum over the elements, and how many parameters differ
from torch's bit for bit. zinf's CPU kernel is bit-for-bit torch's AdamW (tests/unit/kernels
adam_test's fixtures), so "torch" stands for zinf here. Also prints DeepSpeed's per-step scalars as
it computes them (fp32 beta powers, 1/sqrt(1 - beta2^t) in fp32) next to the fp64 ones, so a
difference in the updates can be traced to them. Run with the project venv:
  .venv/bin/python scripts/bench/adam_peer_rounding.py --elements 1000000 --steps 5
"""
import argparse
import json

import numpy
import torch


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1_000_000)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--lr", type=float, default=3e-4)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.999)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--grad-std", type=float, default=1e-3, help="gradients ~ N(0, grad_std^2)")
    args = parser.parse_args()
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    initial = torch.randn(args.elements, generator=gen) * 0.02
    p_torch = torch.nn.Parameter(initial.clone())
    p_ds = torch.nn.Parameter(initial.clone())
    hyper = dict(lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps, weight_decay=args.weight_decay)
    opt_torch = torch.optim.AdamW([p_torch], foreach=False, **hyper)
    opt_ds = DeepSpeedCPUAdam([p_ds], adamw_mode=True, **hyper)
    p64 = initial.double().numpy().copy()
    m64 = numpy.zeros_like(p64)
    v64 = numpy.zeros_like(p64)
    for t in range(1, args.steps + 1):
        grad = torch.randn(args.elements, generator=gen) * args.grad_std
        before = {"torch": p_torch.detach().clone().double().numpy(), "deepspeed": p_ds.detach().clone().double().numpy()}
        p_torch.grad = grad.clone()
        p_ds.grad = grad.clone()
        opt_torch.step()
        opt_ds.step()
        g64 = grad.double().numpy()
        p64_before = p64.copy()
        p64 *= 1.0 - args.lr * args.weight_decay
        m64 = args.beta1 * m64 + (1.0 - args.beta1) * g64
        v64 = args.beta2 * v64 + (1.0 - args.beta2) * g64 * g64
        bc1 = 1.0 - args.beta1**t
        bc2 = 1.0 - args.beta2**t
        p64 -= args.lr / bc1 * m64 / (numpy.sqrt(v64) / numpy.sqrt(bc2) + args.eps)
        update64 = p64 - p64_before
        row = {"step": t}
        for name, p in (("torch", p_torch), ("deepspeed", p_ds)):
            update = p.detach().double().numpy() - before[name]
            rel = numpy.abs(update - update64) / numpy.abs(update64)
            row[name] = {"update_rel_err_median": float(numpy.median(rel)), "update_rel_err_max": float(rel.max())}
        row["params_differing_bits"] = int((p_torch.detach() != p_ds.detach()).sum())
        # DeepSpeed's scalars (csrc/includes/cpu_adam.h: IncrementStep, update_state) in fp32.
        b1_t = numpy.float32(args.beta1) ** numpy.float32(t)
        b2_t = numpy.float32(args.beta2) ** numpy.float32(t)
        ds_bc1 = numpy.float32(1) - b1_t
        ds_bc2_rsqrt = numpy.float32(1) / numpy.sqrt(numpy.float32(1) - b2_t)
        row["scalars"] = {
            "bias_correction1": {"fp64": bc1, "deepspeed_fp32": float(ds_bc1), "rel_diff": float(ds_bc1) / bc1 - 1},
            "rsqrt_bias_correction2": {"fp64": 1 / numpy.sqrt(bc2), "deepspeed_fp32": float(ds_bc2_rsqrt),
                                       "rel_diff": float(ds_bc2_rsqrt) * numpy.sqrt(bc2) - 1},
        }
        print(json.dumps(row))


if __name__ == "__main__":
    main()
