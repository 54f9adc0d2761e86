#!/usr/bin/env python3
"""zinf's safetensors reader and writer against the `safetensors` package (Hugging Face's own).

  safetensors_test.py SAFETENSORS_COPY VENV_PYTHON

SAFETENSORS_COPY (tests/unit/train/safetensors_copy.cpp) reads a file or directory with zinf's
reader and writes every tensor again with zinf's sharded writer. Checked:
  - a file the package writes (F32, BF16, F16: random values, +-0, +-inf, subnormals, extremes)
    comes back from zinf, read by the package, bit for bit, with the same dtypes and shapes;
  - zinf's sharded output (HF names, model.safetensors.index.json) loads with the package, and
    zinf reads its own shards back bit for bit;
  - damaged files (truncated, a flipped header byte, a shape that disagrees with its offsets, an
    unsupported dtype) are refused with one line naming the file (and the tensor), exit 1.
Exit 0 pass, 1 fail, 77 skipped (only when VENV_PYTHON, the project venv, is absent).
"""
import json
import os
import subprocess
import sys
import tempfile

SKIP = 77


def main():
    tool, venv_python = sys.argv[1], sys.argv[2]
    if os.path.realpath(sys.executable) != os.path.realpath(venv_python):
        if not os.path.exists(venv_python):
            print(f"skipped: no project venv at {venv_python}")
            return SKIP
        os.execv(venv_python, [venv_python] + sys.argv)
    import torch
    from safetensors.torch import load_file, save_file

    failures = []

    def check(ok, what):
        if not ok:
            failures.append(what)
            print("FAIL:", what)

    def same_bits(a, b):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        view = {torch.float32: torch.int32, torch.bfloat16: torch.int16, torch.float16: torch.int16}[a.dtype]
        return torch.equal(a.contiguous().view(view), b.contiguous().view(view))

    def run(src, dst, shard_bytes):
        return subprocess.run([tool, src, dst, str(shard_bytes)], capture_output=True, text=True)

    gen = torch.Generator().manual_seed(27)
    specials = torch.tensor([0.0, -0.0, float("inf"), float("-inf"), 1e-40, -1e-45, 3.0e38, 65504.0, 1e-7])
    tensors = {}
    for dtype, tag in ((torch.float32, "f32"), (torch.bfloat16, "bf16"), (torch.float16, "f16")):
        tensors[f"model.layers.0.{tag}.weight"] = (torch.randn(17, 9, generator=gen) * 3).to(dtype)
        tensors[f"model.{tag}.specials"] = specials.to(dtype)
        tensors[f"model.{tag}.empty"] = torch.zeros(0, 4, dtype=dtype)
        tensors[f"model.{tag}.scalar"] = torch.tensor(1.5, dtype=dtype)

    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "theirs.safetensors")
        save_file(tensors, src, metadata={"format": "pt"})
        # One file out: the package reads zinf's copy bit for bit.
        one = os.path.join(tmp, "one")
        r = run(src, one, 1 << 30)
        check(r.returncode == 0, f"copy of the package's file: {r.stderr.strip()}")
        if r.returncode == 0:
            check(sorted(os.listdir(one)) == ["model.safetensors"], f"one shard: {os.listdir(one)}")
            ours = load_file(os.path.join(one, "model.safetensors"))
            check(ours.keys() == tensors.keys(), "the same tensor names")
            for name, t in tensors.items():
                check(name in ours and same_bits(ours[name], t), f"{name}: bit for bit through zinf")
        # Shards: HF's layout, loadable by the package, and zinf reads its own shards back.
        sharded = os.path.join(tmp, "sharded")
        r = run(src, sharded, 700)
        check(r.returncode == 0, f"sharded copy: {r.stderr.strip()}")
        if r.returncode == 0:
            files = sorted(os.listdir(sharded))
            check("model.safetensors.index.json" in files and "model-00001-of-" in files[0], f"shard names: {files}")
            index = json.load(open(os.path.join(sharded, "model.safetensors.index.json")))
            merged = {}
            for f in sorted(set(index["weight_map"].values())):
                part = load_file(os.path.join(sharded, f))
                for name in part:
                    check(index["weight_map"][name] == f, f"{name} in {f} as the index says")
                merged.update(part)
            total = sum(t.numel() * t.element_size() for t in tensors.values())
            check(index["metadata"]["total_size"] == total, f"total_size {index['metadata']['total_size']} == {total}")
            for name, t in tensors.items():
                check(name in merged and same_bits(merged[name], t), f"{name}: bit for bit through zinf's shards")
            again = os.path.join(tmp, "again")
            r = run(sharded, again, 1 << 30)
            check(r.returncode == 0, f"zinf reading its own shards: {r.stderr.strip()}")
            if r.returncode == 0:
                back = load_file(os.path.join(again, "model.safetensors"))
                for name, t in tensors.items():
                    check(same_bits(back[name], t), f"{name}: bit for bit from zinf's shards")

        # Damage: refused with one line naming the file.
        good = open(src, "rb").read()
        header_len = int.from_bytes(good[:8], "little")
        header = json.loads(good[8:8 + header_len])

        def refused(name, data, *expected):
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(data)
            r = run(path, os.path.join(tmp, "out-" + name), 1 << 30)
            line = r.stderr.strip()
            check(r.returncode == 1, f"{name}: exit {r.returncode}, expected 1 ({line})")
            check("\n" not in line and path in line, f"{name}: one line naming the file: {line!r}")
            for e in expected:
                check(e in line, f"{name}: {e!r} in {line!r}")

        def with_header(h):
            text = json.dumps(h).encode()
            text += b" " * ((8 - len(text) % 8) % 8)
            return len(text).to_bytes(8, "little") + text + good[8 + header_len:]

        refused("truncated.safetensors", good[:-3], "run past the data section", "truncated")
        flipped = bytearray(good)
        flipped[8] ^= 0x20  # '{' -> '['
        refused("flipped.safetensors", bytes(flipped), "not a JSON object")
        h = json.loads(json.dumps(header))
        h["model.f32.specials"]["shape"] = [10]
        refused("shape.safetensors", with_header(h), "'model.f32.specials'", "shape [10] of F32 needs 40 bytes")
        h = json.loads(json.dumps(header))
        h["model.f16.specials"]["dtype"] = "I16"
        refused("dtype.safetensors", with_header(h), "'model.f16.specials'", "dtype 'I16' is not supported")

    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("safetensors interop: pass")
    return 0


if __name__ == "__main__":
    sys.exit(main())
