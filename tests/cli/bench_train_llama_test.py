#!/usr/bin/env python3
"""`zinf bench train --torch` on a tiny Llama-family scenario: the PyTorch side trains Hugging Face
transformers' own model of the scenario's config.json, not the GPT-2 twin. Never asserts on timing.

  bench_train_llama_test.py ZINF VENV_PYTHON

What it checks, from one run of 1 warm-up + 1 timed step, one repetition, one thread:
  - exit 0 and a "bench-train" JSON record with both sides' tokens/s, step times and MFU;
  - the PyTorch side built transformers' LlamaForCausalLM with sdpa attention, and its parameter
    count equals zinf's (the record's "params"): the same architecture, untied head included;
  - the ratio is zinf's median tokens/s over PyTorch's.
Exit 0 pass, 1 fail, 77 skipped (only when VENV_PYTHON, the project venv, is absent).
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77

CONFIG = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_size": 64,
    "intermediate_size": 176,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "head_dim": 16,
    "vocab_size": 128,
    "max_position_embeddings": 64,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000.0,
    "rope_scaling": None,
    "attention_bias": False,
    "mlp_bias": False,
    "tie_word_embeddings": False,
    "hidden_act": "silu",
    "torch_dtype": "float32",
}

SCENARIO = {
    "name": "bench-llama-tiny",
    "model": {"hf_config": "config.json"},
    "data": {"source": "markov", "successors": 4, "skew": 1.0},
    "batch": 2,
    "seq": 32,
    "steps": 2,
    "precision": "fp32",
    "optimizer": {"type": "adamw", "lr": 1e-3, "weight_decay": 0.0, "schedule": {"kind": "constant"}},
    "seed": 3,
    "device": "cpu",
}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def main():
    zinf, venv_python = sys.argv[1], sys.argv[2]
    if not os.path.exists(venv_python):
        print(f"SKIP: no project venv at {venv_python} (scripts/install-deps.sh makes it)")
        return SKIP
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "config.json"), "w") as f:
            json.dump(CONFIG, f)
        scenario = os.path.join(tmp, "scenario.json")
        with open(scenario, "w") as f:
            json.dump(SCENARIO, f)
        out = os.path.join(tmp, "record.json")
        cmd = [zinf, "bench", "train", scenario, "--torch", "--python", venv_python, "--steps", "1", "--warmup", "1",
               "--repeat", "1", "--threads", "1", "--format", "json", "--out", out]
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, HF_HUB_OFFLINE="1"))
        check(run.returncode == 0, f"exit {run.returncode}; stderr {run.stderr[-2000:]!r}")
        with open(out) as f:
            record = json.load(f)
    for side in ("zinf", "torch"):
        check(side in record, f"no {side!r} in the record: {sorted(record)}")
        for field in ("tokens_per_s_median", "step_ms", "mfu"):
            check(field in record[side], f"record[{side!r}] lacks {field!r}: {sorted(record[side])}")
        check(record[side]["tokens_per_s_median"] > 0, f"{side}: tokens/s is not positive")
    info = record["torch"]["info"]
    check(info.get("model") == "LlamaForCausalLM", f"the PyTorch side ran {info.get('model')!r}, not LlamaForCausalLM")
    check(info.get("attn_implementation") == "sdpa", f"attn_implementation {info.get('attn_implementation')!r}")
    # 128*64 embeddings + 2 blocks * (2 norms 64 + q 64*64 + k,v 2*32*64 + o 64*64 + MLP 3*64*176)
    # + final norm 64 + untied head 128*64.
    expected = 128 * 64 + 2 * (2 * 64 + 64 * 64 + 2 * 32 * 64 + 64 * 64 + 3 * 64 * 176) + 64 + 128 * 64
    check(record.get("params") == expected, f"zinf's params {record.get('params')} != {expected}")
    check(info.get("params") == record["params"],
          f"PyTorch's model has {info.get('params')} parameters, zinf's {record['params']}")
    ratio = record["zinf"]["tokens_per_s_median"] / record["torch"]["tokens_per_s_median"]
    check(abs(record["zinf_over_torch"] - ratio) <= 1e-9 * ratio, f"zinf_over_torch {record['zinf_over_torch']}")
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
