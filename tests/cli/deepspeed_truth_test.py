#!/usr/bin/env python3
"""Config truth (issue 25): every DeepSpeed config zinf claims to read, read by the real thing.

  deepspeed_truth_test.py ZINF FIXTURES_DIR VENV_PYTHON

For each file in FIXTURES_DIR/deepspeed (and a few hand-written probes of DeepSpeed's aliases) it
resolves the config twice and compares the two field by field:

  zinf:      `zinf plan --ds-config FILE --format json` on a GPT of hidden 4096 on dgx-h100 (8 GPUs),
             the record's "deepspeed" view;
  DeepSpeed: the pipeline a Hugging Face Trainer run goes through: transformers'
             HfTrainerDeepSpeedConfig fills "auto" from TrainingArguments (trainer_config_process,
             trainer_config_finalize with a GPT2Config of the same hidden size), then DeepSpeed's
             own DeepSpeedConfig parses the result (pydantic DeepSpeedZeroConfig, batch triple,
             fp16/bf16, aio) at a data-parallel world size of 8.

Both sides get the same inputs: world size 8, hidden 4096, the micro-batch (the config's when it
gives one, else 2) and the precision (the config's, fp16 where it says "auto", fp32 where silent).
A config one side refuses must be refused by the other. Every difference must be listed below in
DIFFERENCES (documented: zinf differs on purpose) or ZINF_BUGS (reported, to be fixed in spec/),
and every listed entry must still occur: the lists cannot go stale. Not compared: the offload
nvme_path, pin_memory, buffer_count/buffer_size and max_in_cpu, which zinf's plan record does not carry. Exit 0 pass, 1 fail, 77 skipped
(only when VENV_PYTHON, the project venv scripts/install-deps.sh creates, is absent).

DeepSpeed on a CPU-only machine: DS_ACCELERATOR=cpu, and DeepSpeedConfig reads the world size from
deepspeed.comm, so a one-process gloo group is started and an mpu object reports the data-parallel
size (DeepSpeed's Megatron path). The CPU backend would JIT-compile its shared-memory all-reduce
kernel (minutes) on start; nothing here communicates, so build_shm_op is replaced by "no kernel",
the state DeepSpeed itself takes when the kernel is not available.
"""
import contextlib
import copy
import dataclasses
import glob
import io
import json
import os
import socket
import subprocess
import sys
import tempfile
import types

SKIP = 77
WORLD = 8
HIDDEN = 4096
ZINF_MODEL = ["--layers", "32", "--hidden", str(HIDDEN), "--heads", "32", "--hw", "dgx-h100"]

# (fixture, field) -> (zinf's value, DeepSpeed's value, why zinf differs on purpose).
# "refused" as a value: that side refuses the whole config.
DIFFERENCES = {
    ("hf_docs_zero3_nvme_published.json", "config"): (
        "refused", "refused",
        "both refuse, for different reasons: zinf reads strict JSON and refuses the trailing comma; DeepSpeed "
        "reads files with hjson, which accepts it, and then refuses the aio section nested in zero_optimization"),
    ("deepspeed_tutorial_zero_infinity_cpu.json", "batch"): (
        "--micro-batch", "refused",
        "neither train_batch_size nor train_micro_batch_size_per_gpu: DeepSpeed asserts; zinf plan takes the "
        "micro-batch from --micro-batch (a planner question, not a config one). Compared with the micro-batch "
        "added to DeepSpeed's copy"),
    ("bad_nvme_without_path.json", "batch"): (
        "--micro-batch", "refused", "as deepspeed_tutorial_zero_infinity_cpu.json: no batch size in the config"),
    ("hf_docs_zero3_nvme_aio_top.json", "batch"): (
        "--micro-batch", "refused", "as deepspeed_tutorial_zero_infinity_cpu.json: no batch size in the config"),
    ("hf_zero3_cpu_offload_bucket.json", "batch"): (
        "--micro-batch", "refused", "as deepspeed_tutorial_zero_infinity_cpu.json: no batch size in the config"),
    ("axolotl_zero3_bf16_cpuoffload_params.json", "config"): (
        "refused", "accepted",
        "parameters offloaded while the optimizer stays on the GPU: DeepSpeed runs it; zinf's engine and planner "
        "offload parameters only with the optimizer, and refuse the config naming offload_param.device"),
    ("bad_nvme_without_path.json", "config"): (
        "refused", "accepted",
        "offload_param.device \"nvme\" without nvme_path: DeepSpeed's config classes accept it (nvme_path is "
        "optional, default None) and leave it to the NVMe swapper at run time; zinf refuses it when it reads the "
        "config, naming the key (a config that cannot run is an error as early as possible)"),
}

# (fixture, field) -> (zinf's value, DeepSpeed's value, what is wrong in zinf). Reported with issue 25;
# each entry leaves this list when spec/ is fixed (the test then says so). Empty since issue 24: an absent
# gradient_clipping is 1.0, aio nested in zero_optimization and reduce_bucket_size 0 are refused, and
# aio.thread_count is ignored, as DeepSpeed 0.19.8 does.
ZINF_BUGS = {}

FIELDS = ["stage", "offload_param", "offload_optimizer",
          "train_micro_batch_size_per_gpu", "gradient_accumulation_steps", "train_batch_size", "precision",
          "gradient_clipping", "optimizer.lr", "optimizer.betas", "optimizer.eps", "optimizer.weight_decay",
          "stage3_max_live_parameters", "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold",
          "sub_group_size", "reduce_bucket_size", "aio.block_size", "aio.queue_depth", "aio.thread_count"]


class Refused(Exception):
    pass


def reexec_in_venv(venv_python):
    venv = os.path.dirname(os.path.dirname(os.path.abspath(venv_python)))
    if os.path.realpath(sys.prefix) == os.path.realpath(venv):
        return
    if not os.path.exists(venv_python):
        print(f"SKIPPED: {venv_python} is absent; scripts/install-deps.sh creates it (torch, transformers, "
              "deepspeed)")
        sys.exit(SKIP)
    os.execv(venv_python, [venv_python, os.path.abspath(__file__), *sys.argv[1:]])


# ---------------------------------------------------------------------------------------- DeepSpeed
class DataParallelMpu:
    """The mpu interface DeepSpeedConfig asks for its data-parallel world size."""

    def get_data_parallel_world_size(self):
        return WORLD

    def get_data_parallel_rank(self):
        return 0

    def get_model_parallel_world_size(self):
        return 1

    def get_model_parallel_rank(self):
        return 0


def start_deepspeed():
    os.environ["DS_ACCELERATOR"] = "cpu"
    import deepspeed
    import deepspeed.comm.torch as ds_torch_comm
    ds_torch_comm.build_shm_op = lambda: None  # see the module comment
    with socket.socket() as s:  # a free port for the one-process gloo group
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    with contextlib.redirect_stdout(io.StringIO()):
        deepspeed.init_distributed(dist_backend="gloo", auto_mpi_discovery=False, verbose=False)
    import deepspeed.utils.logging
    deepspeed.utils.logging.logger.setLevel("ERROR")
    return deepspeed


def training_arguments(micro, precision, config):
    """The TrainingArguments of a run with this config: the shared inputs, the config's own value
    where it gives one (the Trainer refuses a run whose arguments contradict its config), else
    TrainingArguments' defaults, read from the class."""
    from transformers import TrainingArguments
    d = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
    params = config.get("optimizer", {}).get("params", {})

    def given(value, default):
        return value if isinstance(value, (int, float, list)) and not isinstance(value, bool) else default

    betas = given(params.get("betas"), [d["adam_beta1"], d["adam_beta2"]])
    warmup = config.get("scheduler", {}).get("params", {}).get("warmup_num_steps")
    return types.SimpleNamespace(
        world_size=WORLD, per_device_train_batch_size=micro,
        gradient_accumulation_steps=given(config.get("gradient_accumulation_steps"), d["gradient_accumulation_steps"]),
        max_grad_norm=given(config.get("gradient_clipping"), d["max_grad_norm"]),
        learning_rate=given(params.get("lr"), d["learning_rate"]), adam_beta1=betas[0], adam_beta2=betas[1],
        adam_epsilon=given(params.get("eps"), d["adam_epsilon"]),
        weight_decay=given(params.get("weight_decay"), d["weight_decay"]), save_on_each_node=False,
        fp16=precision == "fp16", bf16=precision == "bf16", fp16_full_eval=False, bf16_full_eval=False,
        # The scheduler is outside zinf: the run is taken to agree with what the config says.
        get_warmup_steps=lambda steps: given(warmup, 0))


def optimizer_default(key, config):
    """What the optimizer DeepSpeed builds uses for a parameter the config leaves out: with no
    optimizer section the Trainer builds it from TrainingArguments; with one, DeepSpeed's Adam."""
    import inspect
    from transformers import TrainingArguments
    if "optimizer" not in config:
        d = {f.name: f.default for f in dataclasses.fields(TrainingArguments)}
        return {"lr": d["learning_rate"], "betas": [d["adam_beta1"], d["adam_beta2"]], "eps": d["adam_epsilon"],
                "weight_decay": d["weight_decay"]}[key]
    from deepspeed.ops.adam import FusedAdam
    value = inspect.signature(FusedAdam.__init__).parameters[key].default
    return list(value) if isinstance(value, tuple) else value


def deepspeed_resolve(config, micro, precision):
    from deepspeed.runtime.config import DeepSpeedConfig
    from transformers import GPT2Config
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig
    args = training_arguments(micro, precision, config)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            hf = HfTrainerDeepSpeedConfig(copy.deepcopy(config))
            hf.trainer_config_process(args)
            model = types.SimpleNamespace(config=GPT2Config(n_embd=HIDDEN, n_layer=32, n_head=32))
            steps = config.get("scheduler", {}).get("params", {}).get("total_num_steps", 1000)
            hf.trainer_config_finalize(args, model, steps)
            ds = DeepSpeedConfig(hf.config, mpu=DataParallelMpu())
    except Exception as e:  # DeepSpeed refuses with AssertionError, ValueError, pydantic's ValidationError
        raise Refused(f"{type(e).__name__}: {' | '.join(str(e).splitlines()[:3])}") from e
    z = ds.zero_config

    def device(offload):
        return "none" if offload is None else str(getattr(offload.device, "value", offload.device))

    def opt(key):
        value = (ds.optimizer_params or {}).get(key, optimizer_default(key, config))
        return list(value) if isinstance(value, tuple) else value

    return {
        "stage": int(z.stage), "offload_param": device(z.offload_param), "offload_optimizer": device(z.offload_optimizer),
        "train_micro_batch_size_per_gpu": ds.train_micro_batch_size_per_gpu,
        "gradient_accumulation_steps": ds.gradient_accumulation_steps, "train_batch_size": ds.train_batch_size,
        "precision": "fp16" if ds.float16_config.enabled else "bf16" if ds.bfloat16_config.enabled else "fp32",
        "gradient_clipping": ds.gradient_clipping, "optimizer.lr": opt("lr"), "optimizer.betas": opt("betas"),
        "optimizer.eps": opt("eps"), "optimizer.weight_decay": opt("weight_decay"),
        "stage3_max_live_parameters": z.max_live_parameters, "stage3_prefetch_bucket_size": z.prefetch_bucket_size,
        "stage3_param_persistence_threshold": z.param_persistence_threshold, "sub_group_size": z.sub_group_size,
        "reduce_bucket_size": z.reduce_bucket_size, "aio.block_size": ds.aio_config["block_size"],
        "aio.queue_depth": ds.aio_config["queue_depth"], "aio.thread_count": ds.aio_config["intra_op_parallelism"],
    }


# --------------------------------------------------------------------------------------------- zinf
def zinf_resolve(zinf, path, micro, precision):
    cmd = [zinf, "plan", *ZINF_MODEL, "--micro-batch", str(micro), "--ds-config", path, "--format", "json"]
    if precision != "fp32":
        cmd += ["--precision", precision]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if done.returncode == 2:
        raise Refused(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "exit 2")
    # 4: the plan was printed and the model does not fit; the config's resolution is still there.
    if done.returncode not in (0, 4):
        sys.exit(f"FAIL: {' '.join(cmd)}: exit {done.returncode} (a crash is never a refusal)\n{done.stderr}")
    record = json.loads(done.stdout)
    d = record["deepspeed"]
    return {
        "stage": d["stage"], "offload_param": d["offload_param"], "offload_optimizer": d["offload_optimizer"],
        "train_micro_batch_size_per_gpu": d["train_micro_batch_size_per_gpu"],
        "gradient_accumulation_steps": d["gradient_accumulation_steps"], "train_batch_size": d["train_batch_size"],
        "precision": d["precision"], "gradient_clipping": d["gradient_clipping"], "optimizer.lr": d["optimizer"]["lr"],
        "optimizer.betas": d["optimizer"]["betas"], "optimizer.eps": d["optimizer"]["eps"],
        "optimizer.weight_decay": d["optimizer"]["weight_decay"],
        "stage3_max_live_parameters": d["stage3_max_live_parameters"],
        "stage3_prefetch_bucket_size": d["stage3_prefetch_bucket_size"],
        "stage3_param_persistence_threshold": d["stage3_param_persistence_threshold"],
        "sub_group_size": d["sub_group_size"], "reduce_bucket_size": d["reduce_bucket_size"],
        "aio.block_size": d["aio"]["block_size"], "aio.queue_depth": d["aio"]["queue_depth"],
        "aio.thread_count": d["aio"]["thread_count"],
    }


# --------------------------------------------------------------------------------------------- main
def inputs(config):
    """The micro-batch and precision both sides are given."""
    micro = config.get("train_micro_batch_size_per_gpu")
    micro = micro if isinstance(micro, int) else 2
    precision = "fp32"
    for name in ("fp16", "bf16"):
        enabled = config.get(name, {}).get("enabled")
        if enabled is True:
            precision = name
        elif enabled == "auto" and precision == "fp32":
            precision = "fp16"
    return micro, precision


def same(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        return abs(a - b) <= 1e-12 * max(abs(a), abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    return a == b


def compare(name, path, zinf):
    """Returns {field: (zinf, deepspeed)} for every field that differs."""
    text = open(path).read()
    try:
        config = json.loads(text)
    except json.JSONDecodeError:
        import hjson  # what DeepSpeed reads a config file with
        config = json.loads(json.dumps(hjson.loads(text)))
    micro, precision = inputs(config)
    diffs = {}
    try:
        theirs = deepspeed_resolve(config, micro, precision)
    except Refused as refusal:
        theirs = refusal
        if "Either train_batch_size or train_micro_batch_size_per_gpu" in str(refusal):
            diffs["batch"] = ("--micro-batch", "refused")
            try:
                theirs = deepspeed_resolve({**config, "train_micro_batch_size_per_gpu": micro}, micro, precision)
            except Refused as again:
                theirs = again
    try:
        ours = zinf_resolve(zinf, path, micro, precision)
    except Refused as refusal:
        ours = refusal
    if isinstance(ours, Refused) or isinstance(theirs, Refused):
        if isinstance(ours, Refused) != isinstance(theirs, Refused):
            diffs["config"] = ("refused" if isinstance(ours, Refused) else "accepted",
                               "refused" if isinstance(theirs, Refused) else "accepted")
        elif (name, "config") in DIFFERENCES or (name, "config") in ZINF_BUGS:
            diffs["config"] = ("refused", "refused")
        return diffs, ours, theirs
    for field in FIELDS:
        if not same(ours[field], theirs[field]):
            diffs[field] = (ours[field], theirs[field])
    return diffs, ours, theirs


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    zinf, fixtures, venv_python = sys.argv[1:]
    reexec_in_venv(venv_python)
    import deepspeed
    import transformers
    start_deepspeed()
    print(f"DeepSpeed {deepspeed.__version__}, transformers {transformers.__version__}, world size {WORLD}, "
          f"hidden {HIDDEN}")
    files = sorted(glob.glob(os.path.join(fixtures, "deepspeed", "*.json")))
    if not files:
        sys.exit(f"FAIL: no DeepSpeed configs in {fixtures}/deepspeed")
    failures, seen = [], set()
    with tempfile.TemporaryDirectory() as probes:
        for name, config in PROBES.items():
            files.append(os.path.join(probes, name))
            with open(files[-1], "w") as f:
                json.dump(config, f)
        for path in files:
            name = os.path.basename(path)
            diffs, ours, theirs = compare(name, path, zinf)
            lines = []
            for field, (z, d) in diffs.items():
                seen.add((name, field))
                listed = DIFFERENCES.get((name, field)) or ZINF_BUGS.get((name, field))
                kind = "documented" if (name, field) in DIFFERENCES else "zinf bug" if listed else "UNLISTED"
                if not listed or not (same(listed[0], z) and same(listed[1], d)):
                    failures.append(f"{name}: {field}: zinf {z!r}, DeepSpeed {d!r}"
                                    + (f" (listed as zinf {listed[0]!r}, DeepSpeed {listed[1]!r})" if listed else ""))
                    kind = "UNLISTED" if not listed else "CHANGED"
                lines.append(f"    {field}: zinf {z!r}, DeepSpeed {d!r} [{kind}]")
            both = "refused by both" if isinstance(ours, Refused) and isinstance(theirs, Refused) else \
                f"{len(FIELDS) - len(set(diffs) & set(FIELDS))} of {len(FIELDS)} fields agree" if not isinstance(ours, Refused) and \
                not isinstance(theirs, Refused) else "refused by one"
            print(f"{name}: {'agree' if not diffs else 'differ'} ({both})")
            for line in lines:
                print(line)
            for side, result in (("zinf", ours), ("DeepSpeed", theirs)):
                if isinstance(result, Refused):
                    print(f"    {side} refuses: {result}")
    for key in list(DIFFERENCES) + list(ZINF_BUGS):
        if key not in seen:
            failures.append(f"{key[0]}: {key[1]}: listed as a difference but both sides now agree: remove it")
    if failures:
        print("FAIL:\n  " + "\n  ".join(failures))
        return 1
    print(f"PASS: {len(files)} configs")
    return 0


# Hand-written configs for what the fixtures do not cover: DeepSpeed's aliases and spellings. Each gives
# gradient_clipping, so that only the fixture above carries the default's difference.
PROBES = {
    "probe_aio_top_level.json": {
        "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0, "aio": {"block_size": 262144, "queue_depth": 16, "intra_op_parallelism": 2},
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "nvme", "nvme_path": "/local_nvme"},
                              "offload_param": {"device": "nvme", "nvme_path": "/local_nvme"}}},
    "probe_aio_thread_count.json": {
        "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0, "aio": {"block_size": 262144, "queue_depth": 16, "thread_count": 2},
        "zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"}, "offload_param": {"device": "cpu"}}},
    "probe_batch_from_train.json": {"train_batch_size": 32, "gradient_clipping": 1.0, "gradient_accumulation_steps": 2,
                                    "zero_optimization": {"stage": 1}},
    "probe_batch_train_only.json": {"train_batch_size": 16, "gradient_clipping": 1.0, "zero_optimization": {"stage": 2}},
    "probe_pydantic_names.json": {
        "train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
        "zero_optimization": {"stage": 3, "max_live_parameters": 1000, "prefetch_bucket_size": 2000,
                              "param_persistence_threshold": 3000}},
    "probe_cpu_offload_legacy.json": {"train_micro_batch_size_per_gpu": 1, "gradient_clipping": 1.0,
                                      "zero_optimization": {"stage": 2, "cpu_offload": True}},
    "probe_fp16_bf16_off.json": {"train_micro_batch_size_per_gpu": 2, "gradient_clipping": 0.5, "fp16": {"enabled": False},
                                 "bf16": {"enabled": False}, "zero_optimization": {"stage": 0}},
}

if __name__ == "__main__":
    sys.exit(main())
