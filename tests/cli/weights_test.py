#!/usr/bin/env python3
"""Weights in and out (issue 27): `zinf export`, `"init": {"safetensors"}` and `zinf eval` against transformers.

  weights_test.py ZINF MPIEXEC VENV_PYTHON

A tiny GPT-2 trains 2 steps from a token file (checkpoint at step 2); then:
  - `zinf export` writes model.safetensors + config.json; transformers' GPT2LMHeadModel loads them
    (fp32) and its loss on batch 0 of the token file (llm.c's batching: B rows of T+1 consecutive
    tokens) equals the first-step loss of a zinf run started from those weights to 1e-5 relative;
  - `zinf eval --hf-config` of the exported weights on batches 0..2 equals transformers' mean loss
    on the same batches to 1e-5 relative, and the same tokens as uint32 (llm.c's Llama-3 header, and
    flat with --token-bytes 4) give the same loss exactly;
  - `zinf eval` of weights transformers saved (GPT2LMHeadModel's and GPT2Model's names) equals
    transformers' own loss on the same batches to 1e-5 relative (model from --hf-config and --scenario);
  - export -> init -> export is bit-identical (the exported file's bytes) under ZeRO-0, ZeRO-3 with
    CPU offload, ZeRO-3 on NVMe, a tiled model, and 2 ranks of ZeRO-3 (mpirun, when MPIEXEC runs).
    The init run takes one optimizer step with lr 1e-30, which moves no weight: AdamW's first update
    is lr * g / (|g| + eps), |.| < 1, below half an ulp of every weight larger than 2^-70, and the
    decay factor 1 - lr*wd rounds to 1 in fp32; the checkpoint after it holds the loaded weights;
  - `--dtype bf16 --max-shard-size 20KB`: HF's shards + index, which transformers loads, each tensor
    the bf16 rounding (torch's) of the f32 export, bit for bit;
  - a damaged checkpoint is refused with one line naming the file and nothing is written; an init
    file of another shape is refused with one line naming the tensor.
Exit 0 pass, 1 fail, 77 skipped (only when VENV_PYTHON, the project venv, is absent).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
B, T, VOCAB = 4, 16, 64


def main():
    zinf, mpiexec, venv_python = sys.argv[1], sys.argv[2], sys.argv[3]
    if os.path.realpath(sys.executable) != os.path.realpath(venv_python):
        if not os.path.exists(venv_python):
            print(f"skipped: no project venv at {venv_python}")
            return SKIP
        os.execv(venv_python, [venv_python] + sys.argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from transformers import GPT2LMHeadModel

    failures = []

    def check(ok, what):
        print(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            failures.append(what)

    work = tempfile.mkdtemp(prefix="zinf-weights-")
    try:
        rng = np.random.default_rng(27)
        tokens = rng.integers(0, VOCAB, size=4096, dtype=np.uint16)
        token_path = os.path.join(work, "tokens.bin")
        tokens.tofile(token_path)

        def scenario(name, zero=None, init=None, lr=3e-3, steps=2, tiling=None):
            s = {
                "name": name,
                "model": {"layers": 2, "hidden": 32, "heads": 2, "vocab": VOCAB, "max_positions": T},
                "data": {"source": "file", "path": token_path},
                "batch": B, "seq": T, "steps": steps, "precision": "fp32", "seed": 7,
                "optimizer": {"type": "adamw", "lr": lr, "schedule": {"kind": "constant"}},
                "device": "cpu", "threads": 1,
                "checkpoint": {"dir": os.path.join(work, name + "-ckpt"), "every": steps},
                "output": {"log_every": 1},
            }
            if zero:
                s["zero"] = zero
            if init:
                s["init"] = {"safetensors": init}
            if tiling:
                s["tiling"] = tiling
            path = os.path.join(work, name + ".json")
            with open(path, "w") as f:
                json.dump(s, f)
            return path, s["checkpoint"]["dir"]

        def train(path, ranks=1):
            record = path + ".record.json"
            argv = [zinf, "train", path, "--no-resume", "--quiet", "--format", "json", "--out", record]
            if ranks > 1:
                argv = [mpiexec, "--oversubscribe", "-np", str(ranks)] + argv
            r = subprocess.run(argv, capture_output=True, text=True, timeout=600)
            if r.returncode != 0:
                return r, None
            return r, json.load(open(record))

        def export(ckpt, out, *extra):
            return subprocess.run([zinf, "export", ckpt, "--out", out, *extra], capture_output=True, text=True,
                                  timeout=300)

        # The trained weights, exported.
        path, ckpt = scenario("trained")
        r, _ = train(path)
        if r.returncode != 0:
            print(f"FAIL: the first run exited {r.returncode}: {r.stdout[-2000:]} {r.stderr[-2000:]}")
            return 1
        e1 = os.path.join(work, "e1")
        r = export(ckpt, e1)
        check(r.returncode == 0, f"zinf export: {r.stdout.strip()} {r.stderr.strip()}")
        if r.returncode != 0:
            return 1
        check(sorted(os.listdir(e1)) == ["config.json", "model.safetensors"], f"export files: {os.listdir(e1)}")
        exported = open(os.path.join(e1, "model.safetensors"), "rb").read()

        # GPT-2 truth: transformers' model on the exported weights, batch 0.
        model = GPT2LMHeadModel.from_pretrained(e1, dtype=torch.float32).eval()
        window = torch.tensor(tokens[: B * T + 1].astype(np.int64))
        inputs = torch.stack([window[r * T: r * T + T] for r in range(B)])
        targets = torch.stack([window[r * T + 1: r * T + T + 1] for r in range(B)])
        with torch.no_grad():
            logits = model(inputs).logits
        hf_loss = torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).double(), targets.reshape(-1)).item()

        # zinf eval: the exported weights on batches 0..2, against transformers' loss on the same tokens.
        def hf_batch_loss(k):
            w = torch.tensor(tokens[k * B * T: (k + 1) * B * T + 1].astype(np.int64))
            x = torch.stack([w[r * T: r * T + T] for r in range(B)])
            y = torch.stack([w[r * T + 1: r * T + T + 1] for r in range(B)])
            with torch.no_grad():
                out = model(x).logits
            return torch.nn.functional.cross_entropy(out.reshape(-1, VOCAB).double(), y.reshape(-1)).item()

        hf_eval = sum(hf_batch_loss(k) for k in range(3)) / 3

        def zinf_eval(token_file, *extra, model_args=("--hf-config", os.path.join(e1, "config.json"))):
            r = subprocess.run([zinf, "eval", *model_args, "--weights", e1, "--tokens", token_file, "--seq", str(T),
                                "--batch", str(B), "--batches", "3", "--format", "json", *extra],
                               capture_output=True, text=True, timeout=300)
            if r.returncode != 0:
                return None, r.stderr.strip()
            return json.loads(r.stdout), ""

        got, err = zinf_eval(token_path)
        check(got is not None and abs(got["loss"] - hf_eval) <= 1e-5 * abs(hf_eval),
              f"zinf eval {got and got['loss']!r} vs transformers {hf_eval!r} {err}")
        # The same tokens as uint32: llm.c's Llama-3 header (magic 20240801, version 7) and flat.
        header = np.zeros(256, dtype=np.int32)
        header[0], header[1], header[2] = 20240801, 7, len(tokens)
        llmc32 = os.path.join(work, "tokens32.bin")
        with open(llmc32, "wb") as f:
            f.write(header.tobytes())
            f.write(tokens.astype(np.uint32).tobytes())
        flat32 = os.path.join(work, "flat32.bin")
        tokens.astype(np.uint32).tofile(flat32)
        for label, path, extra in (("llm.c uint32", llmc32, ()), ("flat uint32", flat32, ("--token-bytes", "4"))):
            other, err = zinf_eval(path, *extra)
            check(other is not None and got is not None and other["loss"] == got["loss"],
                  f"zinf eval on {label} tokens gives the uint16 file's loss exactly {err}")

        # Bad eval input: one line naming what is wrong, exit 2.
        bad_tokens = os.path.join(work, "bad.bin")
        np.array([1] * 50 + [VOCAB] + [1] * 49, dtype=np.uint16).tofile(bad_tokens)
        for label, args, expected in (
                ("a token id past the vocabulary", ["--tokens", bad_tokens], "token 50 is 64, not below the model's vocab 64"),
                ("more batches than the file holds", ["--tokens", token_path, "--batches", "64"],
                 "--batches: 64 is more than the 63 batches of 4x16 tokens"),
                ("a llm.c header of the wrong version", ["--tokens", "HEADER"], "needs version 7, found 1")):
            if args[1] == "HEADER":
                wrong = os.path.join(work, "wrong-version.bin")
                h = np.zeros(256, dtype=np.int32)
                h[0], h[1], h[2] = 20240801, 1, len(tokens)
                with open(wrong, "wb") as f:
                    f.write(h.tobytes())
                    f.write(tokens.astype(np.uint32).tobytes())
                args = ["--tokens", wrong]
            argv = [zinf, "eval", "--hf-config", os.path.join(e1, "config.json"), "--weights", e1, "--seq", str(T),
                    "--batch", str(B)]
            r = subprocess.run(argv + args, capture_output=True, text=True, timeout=300)
            line = r.stderr.strip()
            check(r.returncode == 2 and expected in line and "\n" not in line, f"eval refuses {label}: {line!r}")

        # Weights transformers wrote (GPT2LMHeadModel's names, and GPT2Model's without "transformer."), read
        # by zinf eval with the model from --hf-config and from a scenario.
        from transformers import GPT2Config
        torch.manual_seed(27)
        theirs = GPT2LMHeadModel(GPT2Config(vocab_size=VOCAB, n_positions=T, n_embd=32, n_layer=2, n_head=2,
                                            resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)).eval()
        saved_lm, saved_base = os.path.join(work, "hf-lm"), os.path.join(work, "hf-base")
        theirs.save_pretrained(saved_lm)
        theirs.transformer.save_pretrained(saved_base)
        model, mine = theirs, model
        their_loss = sum(hf_batch_loss(k) for k in range(3)) / 3
        model = mine
        trained_scenario, _ = scenario("model-only")
        for label, weights, model_args in (
                ("GPT2LMHeadModel's file", saved_lm, ("--hf-config", os.path.join(saved_lm, "config.json"))),
                ("GPT2Model's file", saved_base, ("--hf-config", os.path.join(saved_lm, "config.json"))),
                ("--scenario", saved_lm, ("--scenario", trained_scenario))):
            r = subprocess.run([zinf, "eval", *model_args, "--weights", weights, "--tokens", token_path, "--seq", str(T),
                                "--batch", str(B), "--batches", "3", "--format", "json"],
                               capture_output=True, text=True, timeout=300)
            loss = json.loads(r.stdout)["loss"] if r.returncode == 0 else None
            check(loss is not None and abs(loss - their_loss) <= 1e-5 * abs(their_loss),
                  f"zinf eval of transformers' weights ({label}): {loss!r} vs {their_loss!r} {r.stderr.strip()}")

        # export -> init -> export under every engine.
        nvme = os.path.join(work, "swap")
        engines = [
            ("zero0", None, 1, None),
            ("zero3-cpu", {"stage": 3, "params": "cpu", "optimizer": "cpu", "host_memory": "64MiB",
                           "persistence_threshold": 100}, 1, None),
            ("zero3-nvme", {"stage": 3, "params": "nvme", "optimizer": "nvme", "nvme_paths": [nvme],
                            "host_memory": "64MiB", "persistence_threshold": 100}, 1, None),
            ("tiled", None, 1, 4),
        ]
        if shutil.which(mpiexec) or os.path.exists(mpiexec):
            engines.append(("zero3-2ranks", {"stage": 3, "params": "cpu", "optimizer": "cpu", "host_memory": "64MiB",
                                             "persistence_threshold": 100}, 2, None))
        else:
            print(f"note: {mpiexec} not found: the 2-rank case is not run")
        for name, zero, ranks, tiling in engines:
            path, ckpt = scenario("init-" + name, zero=zero, init=e1, lr=1e-30, steps=1, tiling=tiling)
            r, record = train(path, ranks)
            check(r.returncode == 0, f"{name}: train from the exported weights: {r.stderr.strip()[-500:]}")
            if r.returncode != 0:
                continue
            loss = record["steps"][0]["loss"]
            check(abs(loss - hf_loss) <= 1e-5 * abs(hf_loss),
                  f"{name}: zinf's first-step loss {loss!r} vs transformers' {hf_loss!r} "
                  f"(rel {abs(loss - hf_loss) / abs(hf_loss):.2e})")
            out = os.path.join(work, "e-" + name)
            r = export(ckpt, out)
            check(r.returncode == 0, f"{name}: export: {r.stderr.strip()}")
            if r.returncode == 0:
                again = open(os.path.join(out, "model.safetensors"), "rb").read()
                check(again == exported, f"{name}: export -> init -> export is bit-identical ({len(again)} bytes)")

        # bf16, sharded: HF's layout, loadable by transformers, torch's rounding bit for bit.
        e2 = os.path.join(work, "e2")
        r = export(os.path.join(work, "trained-ckpt"), e2, "--dtype", "bf16", "--max-shard-size", "20KB")
        check(r.returncode == 0, f"export bf16 sharded: {r.stderr.strip()}")
        if r.returncode == 0:
            files = sorted(os.listdir(e2))
            check("model.safetensors.index.json" in files and any(f.startswith("model-00002-of-") for f in files),
                  f"sharded files: {files}")
            index = json.load(open(os.path.join(e2, "model.safetensors.index.json")))
            f32 = load_file(os.path.join(e1, "model.safetensors"))
            merged = {}
            for f in set(index["weight_map"].values()):
                merged.update(load_file(os.path.join(e2, f)))
            check(merged.keys() == f32.keys(), "bf16 export: the same tensors")
            for n, t in f32.items():
                want = t.to(torch.bfloat16).view(torch.int16)
                check(n in merged and torch.equal(merged[n].view(torch.int16), want), f"bf16 {n}: torch's rounding")
            m2 = GPT2LMHeadModel.from_pretrained(e2, dtype=torch.float32)
            check(torch.equal(m2.transformer.h[1].mlp.c_fc.weight, f32["transformer.h.1.mlp.c_fc.weight"]
                              .to(torch.bfloat16).float()), "transformers loads the bf16 shards")

        # A damaged checkpoint: one line naming the file, nothing written.
        damaged = os.path.join(work, "damaged-ckpt")
        shutil.copytree(os.path.join(work, "trained-ckpt"), damaged)
        victim = [f for f in sorted(os.listdir(damaged)) if f.endswith(".zckpt")][0]
        data = bytearray(open(os.path.join(damaged, victim), "rb").read())
        data[-10] ^= 0x20
        open(os.path.join(damaged, victim), "wb").write(bytes(data))
        out = os.path.join(work, "e-damaged")
        r = export(damaged, out)
        line = r.stderr.strip()
        check(r.returncode != 0 and victim in line and "\n" not in line, f"damaged checkpoint refused: {line!r}")
        check(not os.path.exists(os.path.join(out, "model.safetensors")), "nothing written for a damaged checkpoint")
        r = export(os.path.join(work, "trained-ckpt"), e1)
        check(r.returncode == 2 and "already holds a model" in r.stderr, f"--out with a model refused: {r.stderr!r}")

        # Weights of another shape: one line naming the tensor.
        path, _ = scenario("wrong-shape", init=e1)
        s = json.load(open(path))
        s["model"]["hidden"] = 64
        json.dump(s, open(path, "w"))
        r, _ = train(path)
        line = r.stderr.strip()
        check(r.returncode == 2 and "'transformer.wte.weight' has shape [64, 32]" in line and "\n" not in line,
              f"init of another shape refused: {line!r}")
    finally:
        shutil.rmtree(work, ignore_errors=True)

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("weights: pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
