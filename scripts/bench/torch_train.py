#!/usr/bin/env python3
"""Times GPT training steps in PyTorch (fp32 on the CPU; fp32 or bf16 on a GPU): the baseline `zinf bench train` runs next to zinf.

What it does: builds scripts/torch_gpt.py's TorchGPT (the twin of zinf's GPT-like model) with the given
shape — or, with --hf-config FILE, Hugging Face transformers' own model of that config.json
(transformers.AutoModelForCausalLM.from_config, fp32, attn_implementation from --attn: "sdpa", torch's
scaled_dot_product_attention, by default, or "eager", HF's matmul/softmax attention; --layers, --hidden,
--heads and --vocab are then ignored; the loss is the mean cross-entropy of its logits against the
next tokens, as for TorchGPT) — seeds torch (torch.manual_seed), fixes the CPU thread count
(torch.set_num_threads), and runs
--warmup untimed steps then --steps timed steps, each step being
    optimizer.zero_grad(set_to_none=True); loss = model(tokens, targets); loss.backward(); optimizer.step()
with torch.optim.AdamW(foreach=True) (fused=True on a GPU; lr, betas, eps and weight decay from the
arguments) on random tokens: every step draws a fresh [batch, seq + 1] batch of
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
  config               the arguments, plus params (parameter count), dtype, optimizer and model
                       ("TorchGPT" or the transformers class name, e.g. "LlamaForCausalLM")

Usage: /usr/bin/python3 scripts/bench/torch_train.py [--layers 4 --hidden 1024 --heads 16 --vocab 50257
       --seq 256 --batch 8 --steps 10 --warmup 2 --threads N --seed 0 --lr 3e-4 --weight-decay 0.01
       --beta1 0.9 --beta2 0.999 --eps 1e-8 --device cpu|cuda --dtype fp32|bf16
       --hf-config config.json --attn sdpa|eager]
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
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.999)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--hf-config", default=None,
                        help="a Hugging Face config.json: train transformers' model of it instead of TorchGPT")
    parser.add_argument("--attn", choices=["sdpa", "eager"], default="sdpa",
                        help="transformers' attention implementation (--hf-config only)")
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32",
                        help="bf16: autocast mixed precision (--device cuda only)")
    args = parser.parse_args(argv)
    if args.dtype == "bf16" and args.device != "cuda":
        parser.error("--dtype: bf16 runs on --device cuda only")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device: cuda requested but torch.cuda.is_available() is False")
    if args.hf_config is not None and not Path(args.hf_config).is_file():
        parser.error(f"--hf-config: {args.hf_config} is not a file")
    if args.hf_config is None and args.hidden % args.heads != 0:
        parser.error(f"--heads: {args.heads} does not divide --hidden {args.hidden}")
    if args.threads <= 0:
        args.threads = os.cpu_count() or 1
    return args


def build_hf_model(config_path, attn):
    """transformers' causal LM of config_path, fp32, randomly initialised (seeded by the caller)."""
    import transformers  # only this path needs it

    config = transformers.AutoConfig.from_pretrained(config_path)
    return transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn, dtype=torch.float32)


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    if args.hf_config is not None:
        hf_model = build_hf_model(args.hf_config, args.attn)
        vocab = hf_model.config.vocab_size
        model_name = type(hf_model).__name__

        def model(tokens, targets):
            # The mean cross-entropy of every position's logits against its next token, as zinf and
            # TorchGPT compute it (transformers' labels= path would drop the last position).
            logits = hf_model(input_ids=tokens).logits
            return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))

        module = hf_model.to(device)
    else:
        module = TorchGPT(args.layers, args.hidden, args.heads, args.vocab, args.seq).to(device)
        vocab = args.vocab
        model_name = "TorchGPT"
        model = module
    module.train()
    adamw = {"lr": args.lr, "betas": (args.beta1, args.beta2), "eps": args.eps, "weight_decay": args.weight_decay}
    if args.device == "cuda":
        optimizer = torch.optim.AdamW(module.parameters(), **adamw, fused=True)
        optimizer_name = "torch.optim.AdamW(fused=True)"
    else:
        optimizer = torch.optim.AdamW(module.parameters(), **adamw, foreach=True)
        optimizer_name = "torch.optim.AdamW(foreach=True)"
    data = torch.Generator().manual_seed(args.seed)
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if args.dtype == "bf16"
                else contextlib.nullcontext())

    losses = []
    step_seconds = []
    for _ in range(args.warmup + args.steps):
        batch = torch.randint(0, vocab, (args.batch, args.seq + 1), generator=data, dtype=torch.int64)
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
    if args.hf_config is not None:
        hf = module.config
        config.update({"layers": hf.num_hidden_layers, "hidden": hf.hidden_size, "heads": hf.num_attention_heads,
                       "kv_heads": hf.num_key_value_heads, "vocab": hf.vocab_size})
    config.update({
        "params": sum(p.numel() for p in module.parameters()),
        "model": model_name,
        "attn_implementation": args.attn if args.hf_config is not None else None,
        "dtype": "float32" if args.dtype == "fp32" else "bfloat16 autocast, float32 parameters",
        "optimizer": optimizer_name,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "tied_embeddings": bool(getattr(getattr(module, "config", None), "tie_word_embeddings", True)),
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
