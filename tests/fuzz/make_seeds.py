#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/): valid inputs of every kind
zinf reads, and every reproduction from issue 15 (numbers no double holds, deep nesting, duplicate
keys, control characters, tiny bandwidths, hex and over-wide integers, truncated and crafted files).

Run from anywhere: python3 tests/fuzz/make_seeds.py. It rewrites the corpus directories in full, so
the checked-in seeds are exactly what this script makes. Standard library only.
"""
import json
import pathlib
import shutil
import struct

ROOT = pathlib.Path(__file__).resolve().parents[2]
CORPUS = ROOT / "tests" / "fuzz" / "corpus"


def write(target, name, data):
    path = CORPUS / target / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))


def deep(levels, opener="[", closer="]"):
    return opener * levels + closer * levels


# ---- sizes: byte 0 picks the parser (see sizes_fuzz.cpp), the rest is the text -------------------
SIZE_TEXTS = ["1T", "175B", "1.3e12", "7M", " 2 B ", "80GiB", "1.5TB", "512MiB", "4096", "12GB/s", "100Gbps",
              "25GiB/s", "989TFLOPS", "70 TFLOP/s", "312T", "0", "0.5", "-3", "+5", "inf", "nan", "", "1e400",
              "-1e999", "9" * 400, "1e-300", "1e-300GiB", "18446744073709551616", "18446744073709551615",
              "9007199254740993", "0x10", "0b11", "1e3", "16", "4097", "100000", "1..64", "1..64:x2", "1,2,4",
              "params=1B..100T", "nodes=1..64:+8", "seq=512,1024", "micro-batch=1..16", "params=1..1:x1"]


def sizes():
    for parser in range(9):
        for i, text in enumerate(SIZE_TEXTS):
            write("sizes", f"p{parser}-{i:02d}", bytes([parser]) + text.encode())


# ---- scenario ---------------------------------------------------------------------------------
def tiny():
    return {"model": {"layers": 2, "hidden": 32, "heads": 4, "vocab": 64},
            "data": {"source": "markov", "successors": 4, "skew": 1.0}, "batch": 4, "seq": 16, "steps": 8,
            "seed": 3, "threads": 1,
            "optimizer": {"lr": 3e-3, "schedule": {"kind": "cosine", "warmup_steps": 2}},
            "checkpoint": {"dir": "ckpt", "every": 3, "keep_last": 2},
            "output": {"record": "out/record.json", "log_every": 2}, "eval": {"every": 4, "batches": 2}}


def scenario():
    for source in sorted((ROOT / "scenarios").glob("*.json")):
        write("scenario", source.name, source.read_bytes())
    write("scenario", "tiny.json", json.dumps(tiny()))
    params = tiny()
    params["model"] = {"params": "125M", "vocab": 50257}
    params["seq"] = 64
    write("scenario", "params.json", json.dumps(params))
    fp16 = tiny()
    fp16["precision"] = "fp16"
    fp16["loss_scale"] = {"initial": 1024, "growth_interval": 7}
    write("scenario", "fp16.json", json.dumps(fp16))
    text = json.dumps(tiny())
    write("scenario", "repro-batch-1e400.json", text.replace('"batch": 4', '"batch": 1e400'))
    write("scenario", "repro-400-digits.json", text.replace('"seed": 3', '"seed": ' + "9" * 400))
    write("scenario", "repro-deep-name.json", text.replace('"threads": 1', '"name": ' + deep(5000) + ', "threads": 1'))
    write("scenario", "repro-deep-model.json", '{"steps": 3, "model": ' + deep(200, "{\"a\":", "}") + "}")
    write("scenario", "repro-duplicate-key.json", text.replace('"steps": 8', '"steps": 8, "steps": 9'))
    write("scenario", "repro-control-name.json", text.replace('"threads": 1', '"name": "x\\u001b[2J", "threads": 1'))
    write("scenario", "repro-threads-4097.json", text.replace('"threads": 1', '"threads": 4097'))
    write("scenario", "repro-steps-2-41.json", text.replace('"steps": 8', '"steps": 2199023255552'))
    write("scenario", "repro-tiling-512.json", text.replace('"threads": 1', '"tiling": 512, "threads": 1'))
    fp16_text = json.dumps(fp16)
    write("scenario", "repro-loss-scale-1e308.json", fp16_text.replace('"initial": 1024', '"initial": 1e308'))


# ---- hardware profiles --------------------------------------------------------------------------
def hardware_profile():
    profiles = sorted((ROOT / "planner" / "profiles").glob("*.json"))
    for source in profiles:
        write("hardware_profile", source.name, source.read_bytes())
    base = json.loads((ROOT / "planner" / "profiles" / "dgx2-v100.json").read_text())
    text = json.dumps(base)
    write("hardware_profile", "repro-nodes-1e400.json", text.replace('"nodes": 1', '"nodes": 1e400'))
    tiny_links = json.loads(text)
    tiny_links["node"]["links"]["pcie_per_gpu"] = 1e-300
    tiny_links["node"]["gpu"]["achievable_flops"] = 1e-300
    write("hardware_profile", "repro-tiny-figures.json", json.dumps(tiny_links))
    edges = json.loads(text)
    edges["node"]["gpu"].update({"peak_flops": "1e19", "achievable_flops": "1e9"})
    edges["node"]["links"].update({"pcie_per_gpu": "1MB/s", "gpu_to_gpu": "1PB/s", "network": 1e6})
    write("hardware_profile", "edges.json", json.dumps(edges))
    named = json.loads(text)
    named["name"] = "evil\x1b]0;pwned\x07"
    write("hardware_profile", "repro-control-name.json", json.dumps(named))
    write("hardware_profile", "repro-duplicate-key.json", text.replace('"nodes": 1', '"nodes": 1, "nodes": 2'))
    write("hardware_profile", "repro-deep.json", deep(5000))
    write("hardware_profile", "repro-deep-gpu-name.json", text.replace('"gpus": 16', '"gpus": 16, "x": ' + deep(3000)))


# ---- Hugging Face configs ----------------------------------------------------------------------
def hf_config():
    for source in sorted((ROOT / "tests" / "fixtures" / "hf").glob("*.json")):
        write("hf_config", source.name, source.read_bytes())
    llama = (ROOT / "tests" / "fixtures" / "hf" / "Llama-2-7b-hf.json").read_text()
    config = json.loads(llama)
    hidden = config["hidden_size"]
    write("hf_config", "repro-hidden-minus-1e999.json", llama.replace(f'"hidden_size": {hidden}', '"hidden_size": -1e999'))
    write("hf_config", "repro-deep-hidden.json", llama.replace(f'"hidden_size": {hidden}', '"hidden_size": ' + deep(5000)))
    moe = dict(config)
    moe["num_local_experts"] = "8"
    write("hf_config", "repro-experts-string.json", json.dumps(moe))
    moe["num_local_experts"] = 8
    write("hf_config", "moe.json", json.dumps(moe))
    no_type = dict(config)
    del no_type["model_type"]
    write("hf_config", "architectures-only.json", json.dumps(no_type))


# ---- DeepSpeed configs: the published fixtures, the bad ones, and edge values --------------------
def deepspeed_config():
    for source in sorted((ROOT / "tests" / "fixtures" / "deepspeed").glob("*.json")):
        write("deepspeed_config", source.name, source.read_bytes())
    nvme = (ROOT / "tests" / "fixtures" / "deepspeed" / "hf_docs_zero3_nvme.json").read_text()
    write("deepspeed_config", "repro-buffer-1e400.json", nvme.replace('"buffer_size": 1e8', '"buffer_size": 1e400'))
    write("deepspeed_config", "repro-buffer-negative.json", nvme.replace('"buffer_size": 1e8', '"buffer_size": -1'))
    write("deepspeed_config", "repro-deep-stage.json", '{"zero_optimization": {"stage": ' + deep(5000) + '}}')
    write("deepspeed_config", "all-auto.json", json.dumps({
        "train_batch_size": "auto", "train_micro_batch_size_per_gpu": "auto", "gradient_accumulation_steps": "auto",
        "gradient_clipping": "auto", "fp16": {"enabled": "auto"}, "bf16": {"enabled": "auto"},
        "optimizer": {"type": "Adam", "params": {"lr": "auto", "betas": "auto", "eps": "auto",
                                                 "weight_decay": "auto", "adam_w_mode": False}},
        "zero_optimization": {"stage": 3, "reduce_bucket_size": "auto", "stage3_prefetch_bucket_size": "auto",
                              "stage3_param_persistence_threshold": "auto"},
        "activation_checkpointing": {"partition_activations": True, "cpu_checkpointing": True,
                                     "number_checkpoints": 4}}))
    # Found by this target: a duplicate key under a key holding a newline split the one-line error.
    write("deepspeed_config", "repro-newline-key-duplicate.json",
          '{"activation_ch6ckpo\\nting": {"cpu_checkpointing": true, "cpu_checkpointing": true}}')
    write("deepspeed_config", "stage0-cpu-checkpointing.json", json.dumps({
        "activation_checkpointing": {"partition_activations": True, "cpu_checkpointing": True}}))


# ---- token files: bytes 0-1 vocab - 1, byte 2 batch - 1, byte 3 seq - 1, then the file ------------
def le16s(values):
    return b"".join(struct.pack("<H", v) for v in values)


def llmc_header(version, count, magic=20240520):
    return struct.pack("<iii", magic, version, count) + bytes(1024 - 12)


def token_file():
    prefix = struct.pack("<H", 99) + bytes([1, 3])  # vocab 100, batch 2, seq 4
    tokens = [(i * 7 + 3) % 100 for i in range(50)]
    write("token_file", "flat.bin", prefix + le16s(tokens))
    write("token_file", "llmc.bin", prefix + llmc_header(1, 50) + le16s(tokens))
    write("token_file", "llmc-version-2.bin", prefix + llmc_header(2, 50) + le16s(tokens))
    write("token_file", "llmc-truncated.bin", prefix + llmc_header(1, 51) + le16s(tokens))
    write("token_file", "llmc-huge-count.bin", prefix + llmc_header(1, 0x7fffffff) + le16s(tokens))
    write("token_file", "odd.bin", prefix + le16s(tokens) + b"x")
    write("token_file", "id-out-of-vocab.bin", prefix + le16s(tokens[:10] + [60000] + tokens[11:]))
    write("token_file", "too-few.bin", prefix + le16s(tokens[:5]))
    write("token_file", "empty.bin", prefix)
    write("token_file", "vocab-65536.bin", b"\xff\xff" + bytes([7, 63]) + le16s(list(range(0, 65536, 97))))


# ---- checkpoints: byte 0 = fix-up flags (checkpoint_fuzz.cpp), then the file -----------------------
def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def checkpoint_bytes(step=8, arrays=(("m", [0.5, -1.0, 2.0, 3.5]), ("v", [0.25, 1e-3])), extra=None, header_override=None):
    """The format of libengine/train/checkpoint.h, version 1."""
    extra = extra if extra is not None else {"optimizer_step": step, "loss_scale": 1.0, "loss_scale_clean_steps": 0}
    table, blobs, offset = [], [], 0
    for name, values in arrays:
        blob = struct.pack(f"<{len(values)}f", *values)
        table.append({"name": name, "numel": len(values), "offset": offset, "crc32c": crc32c(blob)})
        padded = blob + bytes((-len(blob)) % 64)
        blobs.append(padded)
        offset += len(padded)
    header = {"step": step, "fingerprint": "0123456789abcdef", "extra": extra, "arrays": table}
    if header_override is not None:
        header.update(header_override)
    file_bytes = 0
    while True:
        header["file_bytes"] = file_bytes
        text = json.dumps(header, separators=(",", ":")).encode()
        data_start = (24 + len(text) + 63) // 64 * 64
        needed = data_start + offset
        if needed == file_bytes:
            break
        file_bytes = needed
    head = b"ZINFCKPT" + struct.pack("<IIQ", 1, crc32c(text), len(text)) + text
    head += bytes(data_start - len(head))
    return head + b"".join(blobs)


def checkpoint():
    good = checkpoint_bytes()
    for flags in (0, 1, 3):
        write("checkpoint", f"valid-flags{flags}.bin", bytes([flags]) + good)
    write("checkpoint", "truncated.bin", bytes([0]) + good[:-10])
    write("checkpoint", "prefix-only.bin", bytes([0]) + good[:24])
    write("checkpoint", "not-a-checkpoint.bin", bytes([1]) + b"PK\x03\x04" + bytes(40))
    write("checkpoint", "negative-step.bin", bytes([1]) + checkpoint_bytes(step=-5))
    write("checkpoint", "float-step.bin", bytes([1]) + checkpoint_bytes(header_override={"step": 1e300}))
    write("checkpoint", "float-numel.bin", bytes([3]) + checkpoint_bytes(header_override={"file_bytes": 1e300}))
    write("checkpoint", "deep-extra.bin", bytes([1]) + checkpoint_bytes(extra=json.loads(deep(60))))
    write("checkpoint", "missing-array.bin", bytes([1]) + checkpoint_bytes(arrays=(("m", [1.0, 2.0, 3.0, 4.0]),)))
    write("checkpoint", "wrong-size.bin", bytes([1]) + checkpoint_bytes(arrays=(("m", [1.0] * 5), ("v", [2.0] * 2))))


# ---- the plan command line: one argument per line (cli_plan_fuzz.cpp) -----------------------------
CLI_LINES = [
    ["--params", "1T"], ["--params", "1T", "--hw", "dgx2-v100"], ["--max-params", "--hw", "dgx2-v100", "--nodes", "1"],
    ["--layers", "96", "--hidden", "12288", "--heads", "96", "--hw", "dgx-a100-80g", "--nodes", "8"],
    ["--params", "175B", "--strategy", "zero-offload", "--format", "json"], ["--params", "10T", "--hw", "dgx2-v100"],
    ["--params", "1T", "--place", "params=nvme,optimizer=cpu", "--format", "csv"],
    ["--params", "7B", "--precision", "fp16", "--accounting", "zero", "--format", "md"],
    ["--params", "1T", "--nodes", "1,2,4"], ["--params", "1T", "--target-efficiency", "0.5"],
    ["hw", "dgx-h100"], ["hw", "cpu-only", "--format", "csv"],
    # issue 15 reproductions
    ["--params", "1T", "--gpu-flops", "1e-300"], ["--params", "1T", "--pcie-bw", "1e-300"],
    ["--params", "1T", "--cpu-mem-bw", "1e-300"], ["--params", "1T", "--nvme-read-bw", "1e-300"],
    ["--params", "1T", "--nvme-write-bw", "1e-300"], ["--params", "1T", "--gpu-link-bw", "1e-300"],
    ["--max-params", "--pcie-bw", "1e-300"], ["--params", "1T", "--cpu-mem", "1e-300"],
    ["--params", "1T", "--cpu-mem", "0"], ["--params", "18446744073709551615"], ["--params", "9007199254740993"],
    ["--params", "1T", "--place", "params=gpu,params=nvme"], ["--params", "1T", "--hw", "/dev/zero"],
    ["--params", "1T", "--hw", "/tmp"], ["--params", "1T", "--hw", "evil\x1b[31m"], ["--params", "1T", "--tiling", "512"],
    ["--params", "1T", "--nodes", "0x10"], ["--params", "1e400"], ["--params", "1T", "--gpus-per-node", "100000"],
]


def cli_plan():
    for i, args in enumerate(CLI_LINES):
        write("cli_plan", f"args-{i:02d}", "\n".join(args))


def main():
    for target, make in [("sizes", sizes), ("scenario", scenario), ("hardware_profile", hardware_profile),
                         ("hf_config", hf_config), ("deepspeed_config", deepspeed_config),
                         ("token_file", token_file), ("checkpoint", checkpoint),
                         ("cli_plan", cli_plan)]:
        directory = CORPUS / target
        shutil.rmtree(directory, ignore_errors=True)
        directory.mkdir(parents=True)
        make()
        print(f"{target}: {len(list(directory.iterdir()))} seeds")


if __name__ == "__main__":
    main()
