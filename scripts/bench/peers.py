#!/usr/bin/env python3
"""The peers' side of `zinf bench peers`: DeepSpeed and PyTorch 2 measured on this machine (issue 25).

`zinf bench peers` runs this script through the project venv (scripts/install-deps.sh makes .venv),
once per item and round, alternating with zinf's own measurement of the same item, and records both.
Each invocation measures ONE round of ONE item and prints ONE JSON object on stdout (everything else,
DeepSpeed's logging included, goes to stderr):

  optimizer  DeepSpeedCPUAdam(adamw_mode=True) (deepspeed.ops.adam, DeepSpeed's fused C++ CPU AdamW, the
             optimizer its ZeRO-Offload runs) and torch.optim.AdamW(foreach=True) on one flat fp32
             tensor of --elements parameters with an fp32 gradient, lr 1e-3, weight decay 0.01; 2
             untimed steps, then the median of --steps timed steps. 28 bytes per parameter (read p, g,
             m, v; write p, m, v), the count zinf's side uses.
  io         DeepSpeed's async I/O handle (deepspeed.ops.op_builder.AsyncIOBuilder().load().aio_handle,
             the library its NVMe swappers use) writing then reading --bytes through one pinned CPU
             tensor to a file in --dir (sync_pwrite / sync_pread of the whole tensor, O_DIRECT, block
             --block, queue depth --queue-depth, --io-threads threads); GB/s of each, the file removed.
             The timed write goes into a file posix_fallocate'd to its size first, as zinf's swap store
             writes into fallocated space; "write_gbps_new_file" is the same write into a new empty
             file (every request extends it), reported beside it.
  init       The initial weights and the token stream every training run of `zinf bench peers` shares:
             scripts/torch_gpt.py's TorchGPT built from --seed, saved as --out/model.safetensors under
             Hugging Face GPT-2 names (the names `zinf train`'s "init": {"safetensors": ...} reads,
             Conv1D weights transposed), and --out/tokens.bin, a flat uint16 token file (zinf's "data":
             {"source": "file"}) of --batches windows of batch * seq + 1 uniform random tokens in llm.c's
             DataLoader order (batch n starts at token n * batch * seq). Prints the two paths.
  train      One training run of scripts/torch_gpt.py's TorchGPT (zinf's GPT twin) on random tokens:
             --mode eager: plain PyTorch, torch.optim.AdamW(foreach=True);
             --mode compile: the same with torch.compile(model) (inductor on the CPU);
             --mode ds-cpu / ds-nvme: deepspeed.initialize on its CPU accelerator (DS_ACCELERATOR=cpu,
             gloo, one rank) with ZeRO stage 3, parameters and optimizer offloaded to the CPU or to
             NVMe under --nvme-path (its aio), fp32, AdamW with the same settings (DeepSpeedCPUAdam,
             which DeepSpeed picks for an offloaded optimizer), no gradient clipping (DeepSpeed's
             default clips to norm 1; zinf's and PyTorch's sides do not clip). The config is written here from the
             arguments and returned in the output ("ds_config").
             --optimizer swaps the optimizer to isolate where two sides' losses part (docs/peers.md):
             "torch" runs ds-cpu/ds-nvme with torch.optim.AdamW(foreach=True) as DeepSpeed's client
             optimizer (zero_force_ds_cpu_optimizer false) instead of DeepSpeedCPUAdam; "deepspeed"
             runs eager/compile with DeepSpeedCPUAdam(adamw_mode=True) instead of torch's AdamW; the
             default is each mode's own optimizer, as above.
             --activation-checkpointing wraps every block in torch.utils.checkpoint (non-reentrant).
             --init DIR / --tokens FILE (from `init`): start from those weights and train batch n of that
             token file at step n, as zinf does with the same files; without them, torch_gpt.py's
             initialisation from --seed and uniform random tokens.
             Reports tokens/s (batch * seq / median timed step), step times, the loss of every step,
             the process's peak RSS (getrusage ru_maxrss) and the bytes it read from and wrote to
             storage per timed step (/proc/self/io read_bytes / write_bytes over the timed steps: the
             block-layer bytes of every thread, DeepSpeed's aio threads included; buffered writes count
             when they are dirtied, O_DIRECT ones when they are submitted).

Failure: a peer that cannot run prints {"error": "<exact exception text>"} and exits 3, so the caller
records the error instead of a figure. Bad arguments exit 2 (argparse).
"""
import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
import traceback
from pathlib import Path

BYTES_PER_PARAM = 28
EXIT_PEER_FAILED = 3


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text} is not a positive integer")
    return value


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def versions():
    import torch
    out = {"python": sys.version.split()[0], "torch": torch.__version__}
    # The installed distribution's version, without importing deepspeed: the import alone takes many
    # seconds on a small machine, which every PyTorch-only run (and the CI test) would pay for nothing.
    from importlib import metadata
    try:
        out["deepspeed"] = metadata.version("deepspeed")
    except metadata.PackageNotFoundError as e:
        out["deepspeed"] = f"not installed: {e}"
    return out


def time_optimizer(opt, param, steps):
    """Wall seconds and process CPU seconds (every thread) of each timed step. On a shared machine the
    CPU seconds show the work a step did when the wall time also holds waiting for a core."""
    for _ in range(2):
        opt.step()
    seconds, cpu = [], []
    for _ in range(steps):
        start, start_cpu = time.perf_counter(), time.process_time()
        opt.step()
        seconds.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
    return seconds, cpu


def optimizer_side(name, timed, elements):
    seconds, cpu = timed
    median = statistics.median(seconds)
    return {"name": name, "step_seconds": seconds, "step_cpu_seconds": cpu, "params_per_s": elements / median,
            "gbps": BYTES_PER_PARAM * elements / median / 1e9}


def run_optimizer(args):
    import torch
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    result = {"item": "optimizer", "elements": args.elements, "threads": torch.get_num_threads(), "sides": {}}

    def fresh():
        p = torch.nn.Parameter(torch.rand(args.elements, generator=gen) * 2 - 1)
        p.grad = torch.rand(args.elements, generator=gen) * 2 - 1
        return p

    try:
        from deepspeed.ops.adam import DeepSpeedCPUAdam
        p = fresh()
        opt = DeepSpeedCPUAdam([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, adamw_mode=True)
        result["sides"]["deepspeed"] = optimizer_side("DeepSpeedCPUAdam(adamw_mode=True)",
                                                      time_optimizer(opt, p, args.steps), args.elements)
        del opt, p
    except Exception as e:  # noqa: BLE001 - recorded, not hidden
        result["sides"]["deepspeed"] = {"error": f"{type(e).__name__}: {e}"}
    p = fresh()
    opt = torch.optim.AdamW([p], lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01, foreach=True)
    result["sides"]["pytorch"] = optimizer_side("torch.optim.AdamW(foreach=True)", time_optimizer(opt, p, args.steps),
                                                args.elements)
    return result


def run_io(args):
    import torch
    from deepspeed.ops.op_builder import AsyncIOBuilder
    aio = AsyncIOBuilder().load(verbose=False)
    # aio_handle(block_size, queue_depth, single_submit, overlap_events, intra_op_parallelism)
    handle = aio.aio_handle(args.block, args.queue_depth, False, True, args.io_threads)
    elements = args.bytes // 4
    buffer = handle.new_cpu_locked_tensor(elements, torch.empty(0, dtype=torch.float32))
    buffer.copy_(torch.arange(elements, dtype=torch.float32))
    fd, path = tempfile.mkstemp(prefix="zinf-peers-aio-", suffix=".bin", dir=args.dir)
    os.close(fd)
    fd, fresh_path = tempfile.mkstemp(prefix="zinf-peers-aio-new-", suffix=".bin", dir=args.dir)
    try:
        # DeepSpeed's handle opens O_WRONLY | O_CREAT | O_DIRECT (no O_TRUNC) and writes in place. An
        # empty file makes every request extend the file, which ext4 serialises; zinf's swap store
        # writes into space it fallocated. The timed write is into the same kind of file: this one
        # posix_fallocate'd to the full size first (as its swappers' files are after their first swap).
        start = time.perf_counter()
        handle.sync_pwrite(buffer, fresh_path)
        fresh_write_s = time.perf_counter() - start
        os.close(fd)
        os.unlink(fresh_path)
        fd = os.open(path, os.O_WRONLY)
        os.posix_fallocate(fd, 0, elements * 4)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        start = time.perf_counter()
        written = handle.sync_pwrite(buffer, path)
        write_s = time.perf_counter() - start
        buffer.zero_()
        start = time.perf_counter()
        read = handle.sync_pread(buffer, path)
        read_s = time.perf_counter() - start
        # The bytes came back: a wrong read would make the figure meaningless.
        ok = bool(buffer[-1].item() == float(elements - 1) and buffer[elements // 2].item() == float(elements // 2))
    finally:
        if fd >= 0:
            os.close(fd)
        for leftover in (path, fresh_path):
            if os.path.exists(leftover):
                os.unlink(leftover)
        handle.free_cpu_locked_tensor(buffer)
    return {"item": "io", "bytes": elements * 4, "block": args.block, "queue_depth": args.queue_depth,
            "io_threads": args.io_threads, "directory": args.dir, "write_return": written, "read_return": read,
            "verified": ok, "sides": {"deepspeed": {"name": "deepspeed aio_handle sync_pwrite/sync_pread",
                                                    "write_gbps": elements * 4 / write_s / 1e9,
                                                    "write_gbps_new_file": elements * 4 / fresh_write_s / 1e9,
                                                    "read_gbps": elements * 4 / read_s / 1e9}}}


GPT2_CONV1D = ("attn.qkv.weight", "attn.proj.weight", "mlp.fc.weight", "mlp.proj.weight")
GPT2_NAMES = {"wte": "transformer.wte.weight", "wpe": "transformer.wpe.weight", "lnf.weight": "transformer.ln_f.weight",
              "lnf.bias": "transformer.ln_f.bias", "head.weight": "lm_head.weight"}
GPT2_BLOCK = {"ln1": "ln_1", "ln2": "ln_2", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj", "mlp.fc": "mlp.c_fc",
              "mlp.proj": "mlp.c_proj"}


def hf_gpt2_name(name):
    """torch_gpt.py's parameter name -> GPT2LMHeadModel's (libengine/model/hf_names.cpp's table)."""
    if name in GPT2_NAMES:
        return GPT2_NAMES[name]
    _, layer, rest = name.split(".", 2)  # blocks.{i}.{module}.{weight|bias}
    module, kind = rest.rsplit(".", 1)
    return f"transformer.h.{layer}.{GPT2_BLOCK[module]}.{kind}"


def is_conv1d(name):
    return any(name.endswith(suffix) for suffix in GPT2_CONV1D)


def run_init(args):
    import torch
    from safetensors.torch import save_file
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from torch_gpt import TorchGPT

    torch.manual_seed(args.seed)
    model = TorchGPT(args.layers, args.hidden, args.heads, args.vocab, args.seq)
    tensors = {hf_gpt2_name(n): (p.detach().t() if is_conv1d(n) else p.detach()).contiguous()
               for n, p in model.named_parameters()}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    weights = out / "model.safetensors"
    save_file(tensors, str(weights), metadata={"format": "pt"})
    if args.vocab > 65536:
        raise ValueError(f"--vocab {args.vocab}: a uint16 token file holds ids up to 65535")
    count = args.batches * args.batch * args.seq + 1
    gen = torch.Generator().manual_seed(args.seed + 1)
    tokens = torch.randint(0, args.vocab, (count,), generator=gen, dtype=torch.int64).to(torch.int32)
    path = out / "tokens.bin"
    path.write_bytes(tokens.numpy().astype("<u2").tobytes())
    return {"item": "init", "weights": str(weights), "tokens": str(path), "token_count": count,
            "params": sum(p.numel() for p in model.parameters())}


def load_init(model, path, gathered=None):
    """Copies the HF-named safetensors weights of `init` into torch_gpt.py's parameters (every one).
    `gathered(param)`: a context manager that makes one partitioned parameter whole for the copy
    (DeepSpeed ZeRO-3); one at a time, since its NVMe swapper holds only a few parameters in memory."""
    import contextlib
    import torch
    from safetensors.torch import load_file
    state = load_file(path)
    with torch.no_grad():
        for name, p in model.named_parameters():
            t = state.pop(hf_gpt2_name(name))
            with (gathered(p) if gathered else contextlib.nullcontext()):
                p.copy_(t.t() if is_conv1d(name) else t)
    if state:
        raise ValueError(f"--init {path}: tensors the model does not have: {sorted(state)}")


def storage_io_bytes():
    """(read_bytes, write_bytes) of this process so far, from /proc/self/io; None where it is not readable."""
    try:
        fields = dict(line.split(": ") for line in Path("/proc/self/io").read_text().splitlines())
        return int(fields["read_bytes"]), int(fields["write_bytes"])
    except (OSError, KeyError, ValueError):
        return None


def ds_config(args):
    zero = {"stage": 3, "stage3_param_persistence_threshold": 0,
            "offload_optimizer": {"device": "cpu", "pin_memory": False},
            "offload_param": {"device": "cpu", "pin_memory": False}}
    if args.mode == "ds-nvme":
        zero["offload_optimizer"] = {"device": "nvme", "nvme_path": args.nvme_path, "pin_memory": False}
        zero["offload_param"] = {"device": "nvme", "nvme_path": args.nvme_path, "pin_memory": False}
    # gradient_clipping 0: no clipping, as zinf's side ("grad_clip": 0.0) and PyTorch eager train.
    # DeepSpeed's default is 1.0 (GRADIENT_CLIPPING_DEFAULT): left out, it clips every step's
    # gradients to global norm 1, which made its losses part from the others' from step 2 on.
    return {"train_micro_batch_size_per_gpu": args.batch, "gradient_accumulation_steps": 1,
            "train_batch_size": args.batch, "gradient_clipping": 0.0, "zero_optimization": zero,
            "optimizer": {"type": "AdamW", "params": {"lr": args.lr, "betas": [args.beta1, args.beta2],
                                                      "eps": args.eps, "weight_decay": args.weight_decay}},
            "aio": {"block_size": 1048576, "queue_depth": 32, "single_submit": False, "overlap_events": True},
            "steps_per_print": 1000000, "wall_clock_breakdown": False}


def start_one_rank_group():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update({"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "LOCAL_WORLD_SIZE": "1",
                       "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)})


def run_train(args):
    import torch
    import torch.utils.checkpoint as checkpoint
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from torch_gpt import TorchGPT  # scripts/torch_gpt.py, zinf's GPT twin

    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    result = {"item": "train", "mode": args.mode, "threads": torch.get_num_threads(),
              "config": {k: v for k, v in vars(args).items() if k != "item"}}

    def build():
        model = TorchGPT(args.layers, args.hidden, args.heads, args.vocab, args.seq)
        if args.activation_checkpointing:
            for block in model.blocks:
                inner = block.forward
                block.forward = (lambda f: lambda x: checkpoint.checkpoint(f, x, use_reentrant=False))(inner)
        return model

    if args.mode in ("ds-cpu", "ds-nvme"):
        import deepspeed
        start_one_rank_group()
        deepspeed.init_distributed(dist_backend="gloo")
        config = ds_config(args)
        client_optimizer = None
        if args.optimizer == "torch":
            del config["optimizer"]
            config["zero_force_ds_cpu_optimizer"] = False
        result["ds_config"] = config
        # zero.Init partitions the parameters as they are created, as a ZeRO-3 run of a large model must.
        with deepspeed.zero.Init(config_dict_or_path=config):
            model = build()
        if args.init:
            # Each partitioned parameter gathered whole for its copy and re-partitioned on exit. All
            # at once fails on NVMe: "Not enough buffers 5 for swapping 17" (its swap buffers).
            load_init(model, args.init, lambda p: deepspeed.zero.GatheredParameters([p], modifier_rank=0))
        if args.optimizer == "torch":
            client_optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(args.beta1, args.beta2),
                                                 eps=args.eps, weight_decay=args.weight_decay, foreach=True)
        engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config,
                                               optimizer=client_optimizer)
        result["ds_optimizer"] = type(engine.optimizer).__name__ + " / " + type(engine.optimizer.optimizer).__name__

        def step(tokens, targets):
            loss = engine(tokens, targets)
            engine.backward(loss)
            engine.step()
            return loss
    else:
        model = build()
        if args.init:
            load_init(model, args.init)
        if args.optimizer == "deepspeed":
            from deepspeed.ops.adam import DeepSpeedCPUAdam
            opt = DeepSpeedCPUAdam(model.parameters(), lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                                   weight_decay=args.weight_decay, adamw_mode=True)
        else:
            opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                                    weight_decay=args.weight_decay, foreach=True)
        result["optimizer"] = type(opt).__name__
        forward = torch.compile(model) if args.mode == "compile" else model

        def step(tokens, targets):
            opt.zero_grad(set_to_none=True)
            loss = forward(tokens, targets)
            loss.backward()
            opt.step()
            return loss

    data = torch.Generator().manual_seed(args.seed)
    stream = None
    if args.tokens:
        import numpy
        stream = torch.from_numpy(numpy.fromfile(args.tokens, dtype="<u2").astype("int64"))
    window = args.batch * args.seq
    losses, seconds = [], []
    io_before = None
    for index in range(args.warmup + args.steps):
        if stream is not None:
            start = index * window  # llm.c's order, as zinf's token file source reads it
            if start + window + 1 > stream.numel():
                raise ValueError(f"--tokens {args.tokens}: {stream.numel()} tokens, step {index} needs {start + window + 1}")
            rows = stream[start:start + window + 1]
            batch = torch.stack([rows[r * args.seq:r * args.seq + args.seq + 1] for r in range(args.batch)])
        else:
            batch = torch.randint(0, args.vocab, (args.batch, args.seq + 1), generator=data, dtype=torch.int64)
        if index == args.warmup:
            io_before = storage_io_bytes()
        start = time.perf_counter()
        loss = step(batch[:, :-1], batch[:, 1:])
        seconds.append(time.perf_counter() - start)
        losses.append(loss.item())
    timed = seconds[args.warmup:]
    io_after = storage_io_bytes()
    if io_before is not None and io_after is not None:
        result["storage_read_bytes_per_step"] = (io_after[0] - io_before[0]) / args.steps
        result["storage_write_bytes_per_step"] = (io_after[1] - io_before[1]) / args.steps
    result["init"] = args.init or None
    result["tokens"] = args.tokens or None
    result.update({"tokens_per_s": args.batch * args.seq / statistics.median(timed),
                   "step_ms": [s * 1e3 for s in timed], "warmup_step_ms": [s * 1e3 for s in seconds[:args.warmup]],
                   "losses": losses, "peak_rss_bytes": peak_rss_bytes(),
                   "params": sum(p.ds_numel if hasattr(p, "ds_numel") else p.numel()
                                 for p in (engine.module if args.mode.startswith("ds") else model).parameters())})
    return result


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="item", required=True)
    o = sub.add_parser("optimizer")
    o.add_argument("--elements", type=positive_int, required=True)
    o.add_argument("--steps", type=positive_int, default=5)
    o.add_argument("--threads", type=positive_int, required=True)
    i = sub.add_parser("io")
    i.add_argument("--dir", required=True)
    i.add_argument("--bytes", type=positive_int, required=True)
    i.add_argument("--block", type=positive_int, default=1 << 20)
    i.add_argument("--queue-depth", type=positive_int, default=32)
    i.add_argument("--io-threads", type=positive_int, default=1)
    n = sub.add_parser("init")
    for name, default in (("layers", 2), ("hidden", 128), ("heads", 4), ("vocab", 256), ("seq", 64), ("batch", 4),
                          ("batches", 4)):
        n.add_argument(f"--{name}", type=positive_int, default=default)
    n.add_argument("--seed", type=int, default=0)
    n.add_argument("--out", required=True)
    t = sub.add_parser("train")
    t.add_argument("--mode", choices=["eager", "compile", "ds-cpu", "ds-nvme"], required=True)
    for name, default in (("layers", 2), ("hidden", 128), ("heads", 4), ("vocab", 256), ("seq", 64), ("batch", 4),
                          ("steps", 3), ("threads", 2)):
        t.add_argument(f"--{name}", type=positive_int, default=default)
    t.add_argument("--warmup", type=int, default=1)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--lr", type=float, default=3e-4)
    t.add_argument("--beta1", type=float, default=0.9)
    t.add_argument("--beta2", type=float, default=0.999)
    t.add_argument("--eps", type=float, default=1e-8)
    t.add_argument("--weight-decay", type=float, default=0.01)
    t.add_argument("--activation-checkpointing", action="store_true")
    t.add_argument("--optimizer", choices=["default", "torch", "deepspeed"], default="default",
                   help="torch: ds modes with torch's AdamW; deepspeed: eager/compile with DeepSpeedCPUAdam")
    t.add_argument("--nvme-path", default="")
    t.add_argument("--init", default="", help="model.safetensors written by `init`")
    t.add_argument("--tokens", default="", help="tokens.bin written by `init`")
    args = parser.parse_args(argv)
    if args.item == "train" and args.optimizer == "torch" and not args.mode.startswith("ds"):
        parser.error(f"--optimizer torch: only with --mode ds-cpu or ds-nvme (--mode {args.mode} uses it already)")
    if args.item == "train" and args.optimizer == "deepspeed" and args.mode.startswith("ds"):
        parser.error(f"--optimizer deepspeed: only with --mode eager or compile (--mode {args.mode} uses it already)")
    if args.item == "train" and args.mode == "ds-nvme" and not args.nvme_path:
        parser.error("--nvme-path: required with --mode ds-nvme")
    if args.item == "io" and args.bytes % args.block != 0:
        parser.error(f"--bytes: {args.bytes} is not a multiple of --block {args.block}")
    return args


def main(argv=None):
    args = parse_args(argv)
    real_stdout = sys.stdout
    sys.stdout = sys.stderr  # DeepSpeed prints to stdout; only our JSON line goes there
    try:
        result = {"optimizer": run_optimizer, "io": run_io, "init": run_init, "train": run_train}[args.item](args)
        code = 0
    except Exception as e:  # noqa: BLE001 - the exact error is the record's content
        traceback.print_exc()
        result = {"item": args.item, "error": f"{type(e).__name__}: {e}"}
        code = EXIT_PEER_FAILED
    result["versions"] = versions()
    real_stdout.write(json.dumps(result) + "\n")
    real_stdout.flush()
    return code


if __name__ == "__main__":
    sys.exit(main())
