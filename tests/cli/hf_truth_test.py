#!/usr/bin/env python3
"""zinf against transformers' own Llama, Mistral and Qwen2 classes (issue 27).

  hf_truth_test.py ZINF VENV_PYTHON

For three tiny configs — Llama (MHA, untied, llama3 rope scaling), Mistral (GQA 4/2, explicit
head_dim 12 != hidden/heads, untied, sliding_window null) and Qwen2 (MQA 4/1, q/k/v biases, tied) —
transformers builds the model from its config (fp32, every parameter set to random values: the
norms and biases are not left at HF's 1 and 0, so a swapped or dropped one shows) and saves it with
save_pretrained (safetensors). Then:
  - init: a zinf scenario `"model": {"hf_config"}, "init": {"safetensors"}` of those files; its
    first-step loss equals transformers' (fp64 forward of the same weights) on the same batch
    (llm.c's batching of a uint16 token file, docs/weights.md) to 1e-5 relative. The run takes one
    step with lr 1e-30 (moves no weight, see weights_test.py) and its export holds exactly the
    tensors of HF's file; transformers loads that export (the config.json zinf wrote; Mistral is
    written as model_type llama: the same computation) with no missing or unexpected key;
  - gradients: one AdamW step with eps = 1e8 and lr = K * eps (K = 1e4, no decay, no clipping) moves
    every weight by -K * g / (1 + |g|/eps), i.e. by -K*g to 1e-8 relative, so zinf's gradient is
    (w0 - w1) / K from the exported weights. Each tensor's gradient matches transformers' fp64
    autograd gradient to 1e-5 of that tensor's largest gradient element;
  - 20 AdamW steps (lr 1e-3, betas 0.9/0.95, eps 1e-8, weight decay 0.1 on matrices — zinf decays
    weight matrices and embeddings, not biases and norm weights — constant schedule) track
    torch.optim.AdamW on the HF model, fed batches 0..19, to 1e-4 relative per step;
  - `zinf eval --hf-config` of the step-20 export on batches 0..2 equals transformers' mean loss of
    the same export on the same tokens to 1e-5 relative;
  - export -> init -> export is bit-identical (model.safetensors and config.json).
Prints the largest relative errors per family. Exit 0 pass, 1 fail, 77 skipped (only when
VENV_PYTHON, the project venv, is absent).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

SKIP = 77
B, T, VOCAB = 4, 16, 96
K, EPS_PROBE = 1e4, 1e8
STEPS = 20

FAMILIES = {
    "llama": dict(model_type="llama", hidden_size=32, intermediate_size=52, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=64, rms_norm_eps=1e-6,
                  rope_theta=10000.0, tie_word_embeddings=False,
                  rope_scaling={"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                "high_freq_factor": 4.0, "original_max_position_embeddings": 16}),
    "mistral": dict(model_type="mistral", hidden_size=32, intermediate_size=40, num_hidden_layers=2,
                    num_attention_heads=4, num_key_value_heads=2, head_dim=12, max_position_embeddings=64,
                    rms_norm_eps=1e-5, rope_theta=1e6, sliding_window=None, tie_word_embeddings=False),
    "qwen2": dict(model_type="qwen2", hidden_size=32, intermediate_size=44, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=1, max_position_embeddings=64, rms_norm_eps=1e-6,
                  rope_theta=1e6, use_sliding_window=False, tie_word_embeddings=True),
}


def main():
    zinf, venv_python = sys.argv[1], sys.argv[2]
    if os.path.realpath(sys.executable) != os.path.realpath(venv_python):
        if not os.path.exists(venv_python):
            print(f"skipped: no project venv at {venv_python}")
            return SKIP
        os.execv(venv_python, [venv_python] + sys.argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import numpy as np
    import torch
    from safetensors.torch import load_file
    from transformers import AutoConfig, AutoModelForCausalLM

    torch.set_num_threads(1)
    failures = []

    def check(ok, what):
        print(("ok:   " if ok else "FAIL: ") + what)
        if not ok:
            failures.append(what)

    work = tempfile.mkdtemp(prefix="zinf-hftruth-")
    keep = os.environ.get("ZINF_KEEP_WORK") == "1"  # debugging: leave the files
    try:
        rng = np.random.default_rng(2027)
        # A learnable stream (each token is 5 * the previous + 0..2, mod VOCAB), so 20 steps lower the loss.
        steps_noise = rng.integers(0, 3, size=(STEPS + 1) * B * T + 1)
        tokens = np.zeros(len(steps_noise), dtype=np.uint16)
        for i in range(1, len(tokens)):
            tokens[i] = (5 * int(tokens[i - 1]) + int(steps_noise[i])) % VOCAB
        token_path = os.path.join(work, "tokens.bin")
        tokens.tofile(token_path)

        def batch(k):
            w = torch.tensor(tokens[k * B * T: (k + 1) * B * T + 1].astype(np.int64))
            x = torch.stack([w[r * T: r * T + T] for r in range(B)])
            y = torch.stack([w[r * T + 1: r * T + T + 1] for r in range(B)])
            return x, y

        def hf_loss(model, k):
            x, y = batch(k)
            logits = model(x).logits
            return torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB).double(), y.reshape(-1))

        def run(name, family_dir, hf_dir, init, steps, lr, optimizer):
            s = {
                "name": name,
                "model": {"hf_config": os.path.join(hf_dir, "config.json")},
                "init": {"safetensors": init},
                "data": {"source": "file", "path": token_path},
                "batch": B, "seq": T, "steps": steps, "precision": "fp32", "seed": 7,
                "optimizer": dict({"type": "adamw", "lr": lr, "schedule": {"kind": "constant"}}, **optimizer),
                "device": "cpu", "threads": 1,
                "checkpoint": {"dir": os.path.join(family_dir, name + "-ckpt"), "every": steps},
                "output": {"log_every": 1},
            }
            path = os.path.join(family_dir, name + ".json")
            with open(path, "w") as f:
                json.dump(s, f)
            record = path + ".record.json"
            r = subprocess.run([zinf, "train", path, "--no-resume", "--quiet", "--format", "json", "--out", record],
                               capture_output=True, text=True, timeout=600)
            check(r.returncode == 0, f"{name}: zinf train exited {r.returncode} {r.stderr.strip()[-800:]}")
            if r.returncode != 0:
                return None, None
            out = os.path.join(family_dir, name + "-export")
            e = subprocess.run([zinf, "export", s["checkpoint"]["dir"], "--out", out], capture_output=True, text=True,
                               timeout=300)
            check(e.returncode == 0, f"{name}: zinf export {e.stderr.strip()}")
            return json.load(open(record)), (out if e.returncode == 0 else None)

        summary = {}
        for family, fields in FAMILIES.items():
            print(f"== {family}")
            family_dir = os.path.join(work, family)
            os.makedirs(family_dir)
            fields = dict(fields)
            model_type = fields.pop("model_type")
            config = AutoConfig.for_model(model_type, vocab_size=VOCAB, attention_dropout=0.0, **fields)
            torch.manual_seed(27)
            model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
            with torch.no_grad():
                for n, p in model.named_parameters():
                    if n.endswith("norm.weight"):
                        p.copy_(1.0 + 0.2 * torch.randn_like(p))
                    elif n.endswith(".bias"):
                        p.copy_(0.1 * torch.randn_like(p))
                    else:
                        p.copy_(0.05 * torch.randn_like(p))
            hf_dir = os.path.join(family_dir, "hf")
            model.save_pretrained(hf_dir, safe_serialization=True)
            saved = load_file(os.path.join(hf_dir, "model.safetensors"))
            ref = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float64).eval()
            ref_loss = hf_loss(ref, 0)
            ref.zero_grad()
            ref_loss.backward()
            ref_grads = {n: p.grad.detach().clone() for n, p in ref.named_parameters()}
            ref_loss = ref_loss.item()
            stats = {}

            # Init from HF's own file: loss, the export holds HF's tensors, transformers loads it.
            record, e0 = run("init", family_dir, hf_dir, hf_dir, 1, 1e-30, {})
            if record is None or e0 is None:
                continue
            loss = record["steps"][0]["loss"]
            stats["first-step loss"] = abs(loss - ref_loss) / abs(ref_loss)
            check(stats["first-step loss"] <= 1e-5,
                  f"{family}: zinf's first-step loss {loss!r} vs transformers' fp64 {ref_loss!r} "
                  f"(rel {stats['first-step loss']:.2e})")
            exported = load_file(os.path.join(e0, "model.safetensors"))
            check(sorted(exported) == sorted(saved), f"{family}: the export names HF's tensors {sorted(exported)}")
            check(all(n in exported and torch.equal(exported[n], t) for n, t in saved.items()),
                  f"{family}: init -> export holds exactly HF's saved tensors")
            back, info = AutoModelForCausalLM.from_pretrained(e0, dtype=torch.float64, output_loading_info=True)
            written_type = json.load(open(os.path.join(e0, "config.json")))["model_type"]
            check(not info["missing_keys"] and not info["unexpected_keys"],
                  f"{family}: transformers loads zinf's export (model_type {written_type}) with no missing or "
                  f"unexpected key {info}")
            with torch.no_grad():
                same = hf_loss(back.eval(), 0).item()
            check(abs(same - ref_loss) <= 1e-12 * abs(ref_loss),
                  f"{family}: transformers' loss of zinf's export (its config.json) {same!r} == {ref_loss!r}")

            # Round trip: export -> init -> export, bit-identical.
            _, e0b = run("roundtrip", family_dir, hf_dir, e0, 1, 1e-30, {})
            if e0b is not None:
                for f in ("model.safetensors", "config.json"):
                    a = open(os.path.join(e0, f), "rb").read()
                    b = open(os.path.join(e0b, f), "rb").read()
                    check(a == b, f"{family}: export -> init -> export {f} bit-identical ({len(a)} bytes)")

            # Every gradient, through one eps-dominated AdamW step.
            _, eg = run("grad", family_dir, hf_dir, hf_dir, 1, K * EPS_PROBE,
                        {"eps": EPS_PROBE, "weight_decay": 0.0, "grad_clip": 0.0})
            if eg is not None:
                moved = load_file(os.path.join(eg, "model.safetensors"))
                worst, worst_name = 0.0, ""
                for n, g in ref_grads.items():
                    name = n if n in moved else None
                    if name is None:  # the tied head: its gradient is in embed_tokens'
                        check(family == "qwen2" and n == "lm_head.weight", f"{family}: {n} is in the export")
                        continue
                    gz = (saved[name].double() - moved[name].double()) / K
                    gz = gz / (1 - gz.abs() / EPS_PROBE)  # the exact step, g / (1 + |g|/eps), inverted
                    rel = ((gz - g).abs().max() / g.abs().max()).item()
                    if rel > worst:
                        worst, worst_name = rel, name
                stats["gradient"] = worst
                check(worst <= 1e-5, f"{family}: every gradient vs transformers' fp64 autograd: max rel {worst:.2e} "
                                     f"({worst_name})")

            # 20 AdamW steps against torch.optim.AdamW.
            adam = {"beta1": 0.9, "beta2": 0.95, "eps": 1e-8, "weight_decay": 0.1, "grad_clip": 0.0}
            record, e20 = run("adamw", family_dir, hf_dir, hf_dir, STEPS, 1e-3, adam)
            if record is not None:
                torch.manual_seed(0)
                m = AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32).train()
                params = [p for p in m.parameters()]  # a tied head is one parameter here
                decay = [p for p in params if p.dim() >= 2]
                other = [p for p in params if p.dim() < 2]
                opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                                         {"params": other, "weight_decay": 0.0}], lr=1e-3, betas=(0.9, 0.95),
                                        eps=1e-8)
                torch_losses = []
                for k in range(STEPS):
                    opt.zero_grad()
                    l = hf_loss(m, k)
                    l.backward()
                    opt.step()
                    torch_losses.append(l.item())
                zinf_losses = [s["loss"] for s in record["steps"]]
                rels = [abs(a - b) / abs(b) for a, b in zip(zinf_losses, torch_losses)]
                stats["20-step curve"] = max(rels) if rels else float("inf")
                check(len(zinf_losses) == STEPS and stats["20-step curve"] <= 1e-4,
                      f"{family}: 20 AdamW steps: zinf {zinf_losses[0]:.6f} -> {zinf_losses[-1]:.6f}, torch "
                      f"{torch_losses[0]:.6f} -> {torch_losses[-1]:.6f}, max rel {stats['20-step curve']:.2e}")
                check(zinf_losses[-1] < zinf_losses[0], f"{family}: the loss falls")

            # zinf eval of the step-20 export against transformers on the same export.
            if e20 is not None:
                r = subprocess.run([zinf, "eval", "--hf-config", os.path.join(e20, "config.json"), "--weights", e20,
                                    "--tokens", token_path, "--seq", str(T), "--batch", str(B), "--batches", "3",
                                    "--format", "json"], capture_output=True, text=True, timeout=300)
                check(r.returncode == 0, f"{family}: zinf eval {r.stderr.strip()}")
                if r.returncode == 0:
                    got = json.loads(r.stdout)["loss"]
                    m20 = AutoModelForCausalLM.from_pretrained(e20, dtype=torch.float32).eval()
                    with torch.no_grad():
                        want = sum(hf_loss(m20, k).item() for k in range(3)) / 3
                    stats["eval"] = abs(got - want) / abs(want)
                    check(stats["eval"] <= 1e-5,
                          f"{family}: zinf eval {got!r} vs transformers {want!r} (rel {stats['eval']:.2e})")
            summary[family] = stats
        print("max relative errors: " + json.dumps({f: {k: float(f"{v:.3g}") for k, v in s.items()}
                                                     for f, s in summary.items()}))
    finally:
        if keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("hf truth: pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
