#!/usr/bin/env python3
"""`zinf bench train --zero0` end to end on a tiny NVMe-offloaded scenario: the record, the text
document and the CSV come from one rendering of the offload bench (apps/zinf/bench_train_offload.cpp).
Never asserts on timing: only on what every run must contain and on relations the numbers must obey.

  bench_train_zero0_test.py ZINF

Checks, from 1 warm-up + 1 timed step, one repetition:
  - exit 0; a zinf.bench-train/1 record with engine, engine_overlap_off and zero0 sides, each with
    a positive median step time and fwd+bwd no larger than the step's maximum;
  - the swap store's sequential rates and the drive's mixed rate: source is "fio" or "swap store",
    the capacity equals the higher of the two medians measured, read_percent in 1..99;
  - every target has value, bound, met (bool) and what; offload_tax is engine / ZeRO-0 step medians;
  - the text output has the Setup, Step time, waits/CPU and Targets sections; the CSV's header is
    target,value,bound,met with one row per target of the record.
Exit 0 pass, 1 fail.
"""
import csv
import io
import json
import os
import subprocess
import sys
import tempfile

SCENARIO = {
    "name": "zero0-tiny",
    "model": {"layers": 1, "hidden": 64, "heads": 2, "vocab": 128, "max_positions": 32},
    "data": {"source": "markov", "successors": 4, "skew": 1.0},
    "batch": 2,
    "seq": 16,
    "steps": 3,
    "precision": "fp32",
    "optimizer": {"type": "adamw", "lr": 1e-3, "schedule": {"kind": "constant"}},
    "seed": 1,
    "device_memory": "256MiB",
    "zero": {"stage": 3, "params": "nvme", "optimizer": "nvme", "nvme_paths": ["swap"], "host_memory": "256MiB"},
}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def run(zinf, cwd, *extra):
    argv = [zinf, "bench", "train", "s.json", "--zero0", "--steps", "1", "--warmup", "1", "--repeat", "1", *extra]
    done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        fail(f"{' '.join(argv[1:])} exited {done.returncode}: {done.stderr.strip()[-400:]}")
    return done.stdout


def main():
    zinf = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        with open(os.path.join(tmp, "s.json"), "w") as f:
            json.dump(SCENARIO, f)
        run(zinf, tmp, "--format", "json", "--out", "record.json")
        with open(os.path.join(tmp, "record.json")) as f:
            record = json.load(f)
        if record.get("schema") != "zinf.bench-train/1":
            fail(f"schema {record.get('schema')!r}")
        for side in ("engine", "engine_overlap_off", "zero0"):
            s = record.get(side)
            if not isinstance(s, dict):
                fail(f"no {side} side")
            if not s["step_ms_median"] > 0:
                fail(f"{side}.step_ms_median {s['step_ms_median']}")
            if s["forward_backward_ms_median"] > s["step_ms_max"]:
                fail(f"{side}: fwd+bwd {s['forward_backward_ms_median']} above the step's max {s['step_ms_max']}")
        seq = record["swap_store_sequential_gbps"]
        if not (seq["read"]["median"] > 0 and seq["write"]["median"] > 0):
            fail(f"swap store sequential rates {seq}")
        mixed = record["drive_mixed_gbps"]
        if not 1 <= mixed["read_percent"] <= 99:
            fail(f"drive_mixed_gbps.read_percent {mixed['read_percent']}")
        measured = {k: mixed[k]["median"] for k in ("fio", "swap_store") if "median" in mixed[k]}
        if not measured:
            fail(f"neither mixed probe measured a rate: {mixed}")
        best = max(measured, key=measured.get)
        source_name = {"fio": "fio", "swap_store": "swap store"}[best]
        if mixed["source"] != source_name or mixed["median"] != measured[best]:
            fail(f"the capacity is not the higher probe: source {mixed['source']}, {mixed['median']} vs {measured}")
        targets = record["targets"]
        for name, t in targets.items():
            for key in ("value", "bound", "met", "what"):
                if key not in t:
                    fail(f"targets.{name} has no {key}")
            if not isinstance(t["met"], bool):
                fail(f"targets.{name}.met is {t['met']!r}")
        tax = record["engine"]["step_ms_median"] / record["zero0"]["step_ms_median"]
        if abs(targets["offload_tax"]["value"] - tax) > 1e-9 * tax:
            fail(f"offload_tax {targets['offload_tax']['value']} is not engine/ZeRO-0 {tax}")

        text = run(zinf, tmp)
        for title in ("Setup", "Step time (ms)", "Forward+backward: waits and CPU", "Targets", "drive, mixed"):
            if title not in text:
                fail(f"the text output has no {title!r}")
        rows = list(csv.reader(io.StringIO(run(zinf, tmp, "--format", "csv"))))
        if rows[0] != ["target", "value", "bound", "met"]:
            fail(f"CSV header {rows[0]}")
        if sorted(r[0] for r in rows[1:]) != sorted(targets):
            fail(f"CSV targets {[r[0] for r in rows[1:]]} vs the record's {sorted(targets)}")
    print("ok: bench train --zero0 record, text and CSV")


if __name__ == "__main__":
    main()
