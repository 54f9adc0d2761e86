#!/usr/bin/env python3
"""Summarises one scripts/gpu/run.sh run: the step table and the key figures of each step's results.

Reads steps.tsv (step, status, exit, seconds, limit_s), the result files the steps wrote (results/:
gpu.csv, suite/suite.json, bench-train.json, torch-eager.json, kernels-bench.json, offload-cpu.json,
offload-nvme.json, fsdp2.json) and the logs (logs/cuda-test.log for the test counts), and writes OUT/summary.json and
OUT/summary.md. A figure whose step did not run or left no result is null ("not measured"), never
estimated. The issue 28 targets are evaluated only from figures measured in this run.
Standard library only (it runs on a bare machine and under `env -i`). Exit status 0, or 2 on bad input.
"""
import argparse
import csv
import json
import re
import sys
from pathlib import Path


def load_json(path):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def get(obj, *keys):
    for key in keys:
        if isinstance(obj, dict) and key in obj:
            obj = obj[key]
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            return None
    return obj


def figure(suite, name):
    for f in get(suite, "figures") or []:
        if f.get("name") == name:
            return get(f, "zinf", "median")
    return None


def ratio(a, b):
    return a / b if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def gpu_info(results):
    try:
        with open(results / "gpu.csv", newline="") as f:
            rows = list(csv.reader(f))
    except OSError:
        return None
    if len(rows) < 2:
        return None
    return {k.strip(): v.strip() for k, v in zip(rows[0], rows[1])}


def cuda_test_counts(log):
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return None
    passed = re.search(r"All tests passed \((\d+) assertions? in (\d+) test cases?\)", text)
    if passed:
        return {"test_cases": int(passed.group(2)), "failed": 0, "assertions": int(passed.group(1))}
    # Catch2's totals line: "test cases: 45 | 44 passed | 1 failed" (a zero count is left out).
    line = re.search(r"^test cases:([^\n]*)$", text, re.MULTILINE)
    if not line:
        return None
    total = re.match(r"\s*(\d+)", line.group(1))
    passed = re.search(r"(\d+) passed", line.group(1))
    failed = re.search(r"(\d+) failed", line.group(1))
    return {"test_cases": int(total.group(1)) if total else None, "passed": int(passed.group(1)) if passed else 0,
            "failed": int(failed.group(1)) if failed else 0}


STEP_LINE = re.compile(r"^step (\d+)/\d+ .* ([0-9.]+) ms/step", re.MULTILINE)


def logged_step_ms(log):
    """The step times zinf train printed (one line per step with log_every 1): what is left of a run
    stopped at its limit before it wrote its record."""
    try:
        text = Path(log).read_text(errors="replace")
    except OSError:
        return []
    return [float(m.group(2)) for m in STEP_LINE.finditer(text)]


def train_figures(record, log):
    if record is None:
        steps = logged_step_ms(log)
        return {"status": "no record", "logged_step_ms": steps} if steps else None
    rows = {r.get("figure"): r for r in get(record, "plan", "rows") or []}
    step = rows.get("step") or {}
    return {
        "status": get(record, "status"),
        "tokens_per_s": get(record, "summary", "tokens_per_s"),
        "step_ms_median": get(record, "summary", "step_ms", "median"),
        "mfu": get(record, "summary", "mfu"),
        "plan_step_ms": step.get("predicted"),
        "measured_over_plan": ratio(step.get("measured"), step.get("predicted")),
        "final_loss": get(record, "summary", "final_loss"),
    }


def kernel_rows(bench):
    out = []
    for b in get(bench, "benchmarks") or []:
        row = {"name": b.get("name"), "real_time": b.get("real_time"), "time_unit": b.get("time_unit")}
        if b.get("error_occurred"):
            row["error"] = b.get("error_message", "error")
        for k, v in b.items():
            if k not in row and isinstance(v, (int, float)) and k not in (
                    "iterations", "threads", "repetitions", "repetition_index", "family_index",
                    "per_family_instance_index", "cpu_time"):
                row[k] = v
        out.append(row)
    return out


def kernel_targets(kernels):
    """(memory-bound kernels >= 0.7 of the measured bandwidth, attention forward >= 0.5 of the GEMM peak):
    each None when no such kernel was measured, else whether every one meets it."""
    memory = [k["fraction_of_bandwidth"] for k in kernels
              if "fraction_of_bandwidth" in k and not k["name"].startswith("BM_MemoryBandwidth")]
    attention = [k["fraction_of_gemm_peak"] for k in kernels
                 if k["name"].startswith("BM_AttentionForward") and "fraction_of_gemm_peak" in k]
    return (min(memory) >= 0.7 if memory else None, min(attention) >= 0.5 if attention else None)


def target(value, op, bound):
    if value is None:
        return None
    return value >= bound if op == ">=" else value <= bound


def fmt(value, spec="{:.3g}"):
    if value is None:
        return "not measured"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return spec.format(value) if isinstance(value, (int, float)) else str(value)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mode", required=True, choices=["device", "rehearse"])
    parser.add_argument("--manifest", required=True)
    parser.add_argument("--steps", required=True)
    parser.add_argument("--results", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    results = Path(args.results)
    logs = results.parent / "logs"
    try:
        with open(args.steps, newline="") as f:
            steps = list(csv.DictReader(f, delimiter="\t"))
        manifest = dict(line.split("=", 1) for line in Path(args.manifest).read_text().splitlines() if "=" in line)
    except OSError as e:
        print(f"summarize.py: {e}", file=sys.stderr)
        return 2
    for s in steps:
        s["exit"] = int(s["exit"]) if s["exit"] else None
        s["seconds"] = float(s["seconds"])
        s["limit_s"] = int(s["limit_s"])

    suite = load_json(results / "suite" / "suite.json")
    bench = load_json(results / "bench-train.json")
    torch_eager = load_json(results / "torch-eager.json")
    fsdp2 = load_json(results / "fsdp2.json")
    offload_cpu = train_figures(load_json(results / "offload-cpu.json"), logs / "offload-cpu.log")
    offload_nvme = train_figures(load_json(results / "offload-nvme.json"), logs / "offload-nvme.log")
    figures = {
        "gpu": gpu_info(results),
        "hbm_copy_gb_per_s": figure(suite, "device memory bandwidth (copy)"),
        "bf16_gemm_peak_gflop_per_s": figure(suite, "device bf16 matmul peak"),
        "cuda_test": cuda_test_counts(logs / "cuda-test.log"),
        "bench_train": None if bench is None else {
            "zinf_tokens_per_s": get(bench, "zinf", "tokens_per_s_median"),
            "zinf_mfu": get(bench, "zinf", "mfu"),
            "matmul_peak_flops_per_s": get(bench, "compute_peak_flops_per_s"),
            "flops_per_step": get(bench, "flops_per_step"),
        },
        "torch_eager": None if torch_eager is None else {
            "tokens_per_s": torch_eager.get("tokens_per_s_median"),
            "step_ms": torch_eager.get("step_ms"),
            "torch_version": torch_eager.get("torch_version"),
        },
        "kernels": kernel_rows(load_json(results / "kernels-bench.json")),
        "offload_cpu": offload_cpu,
        "offload_nvme": offload_nvme,
        "fsdp2": None if fsdp2 is None else {
            "tokens_per_s": fsdp2.get("tokens_per_s_median"),
            "step_ms": fsdp2.get("step_ms"),
            "torch_version": fsdp2.get("torch_version"),
        },
    }
    # PyTorch eager against zinf's step: its MFU from zinf's FLOP count and matmul peak of this run.
    torch_tps = get(figures, "torch_eager", "tokens_per_s")
    zinf_tps = get(figures, "bench_train", "zinf_tokens_per_s")
    tokens_per_step = get(torch_eager, "config", "batch")
    if tokens_per_step is not None and get(torch_eager, "config", "seq") is not None:
        tokens_per_step *= get(torch_eager, "config", "seq")
    flops = get(figures, "bench_train", "flops_per_step")
    peak = get(figures, "bench_train", "matmul_peak_flops_per_s")
    if figures["torch_eager"] is not None:
        figures["torch_eager"]["mfu"] = (None if None in (torch_tps, tokens_per_step, flops, peak) or not peak
                                         else flops * torch_tps / tokens_per_step / peak)
    figures["zinf_over_torch_eager"] = ratio(zinf_tps, torch_tps)
    fsdp2_tps = get(figures, "fsdp2", "tokens_per_s")
    offload_over_fsdp2 = ratio(get(offload_cpu, "tokens_per_s"), fsdp2_tps)
    figures["offload_cpu_over_fsdp2"] = offload_over_fsdp2
    device = args.mode == "device"
    cases = figures["cuda_test"]
    memory_bound_ok, attention_ok = kernel_targets(figures["kernels"])
    targets = [
        ("cuda_test: every case passes", None if cases is None else cases.get("failed") == 0),
        ("1.3B bf16 MFU >= 0.45", target(get(figures, "bench_train", "zinf_mfu"), ">=", 0.45) if device else None),
        ("1.3B tokens/s >= 1.0x PyTorch eager",
         target(figures["zinf_over_torch_eager"], ">=", 1.0) if device else None),
        ("ZeRO-3 CPU offload >= 1.5x FSDP2 CPUOffloadPolicy",
         target(offload_over_fsdp2, ">=", 1.5) if device else None),
        ("NVMe step within 1.2x of its plan",
         target(get(offload_nvme, "measured_over_plan"), "<=", 1.2) if device else None),
        ("every memory-bound kernel >= 0.7x measured HBM bandwidth", memory_bound_ok),
        ("attention forward >= 0.5x the GEMM peak", attention_ok),
    ]
    summary = {
        "mode": args.mode,
        "kit": manifest,
        "steps": steps,
        "figures": figures,
        "targets": [{"target": t, "met": met} for t, met in targets],
        "ok": all(s["status"] in ("ok", "skipped") for s in steps),
    }
    out = Path(args.out)
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")

    md = [f"# zinf GPU run ({args.mode})", "",
          f"kit: {manifest.get('flavour')} flavour, commit {manifest.get('commit')}, packed {manifest.get('packed')}",
          ""]
    if not device:
        md += ["Rehearsal: no GPU; the CUDA steps are skipped and the CPU steps ran tiny scenarios "
               "(scenarios/gpu-kit-rehearse-*.json), so their figures prove the bookkeeping, not performance.", ""]
    gpu = figures["gpu"]
    if gpu:
        md += ["GPU: " + ", ".join(f"{k} {v}" for k, v in gpu.items()), ""]
    md += ["| step | status | exit | seconds | limit s |", "| --- | --- | --- | --- | --- |"]
    md += [f"| {s['step']} | {s['status']} | {fmt(s['exit'], '{}') if s['exit'] is not None else '-'} | "
           f"{s['seconds']:.1f} | {s['limit_s']} |" for s in steps]
    bt = figures["bench_train"] or {}
    rows = [
        ("HBM bandwidth, device copy (GB/s)", figures["hbm_copy_gb_per_s"]),
        ("bf16 GEMM peak (TFLOP/s)", None if figures["bf16_gemm_peak_gflop_per_s"] is None
         else figures["bf16_gemm_peak_gflop_per_s"] / 1e3),
        ("cuda_test cases / failed", None if cases is None
         else f"{cases.get('test_cases')} / {cases.get('failed')}"),
        ("bench-train: zinf tokens/s", bt.get("zinf_tokens_per_s")),
        ("bench-train: zinf MFU", bt.get("zinf_mfu")),
        ("torch-eager: PyTorch eager bf16 tokens/s", torch_tps),
        ("torch-eager: MFU (zinf's FLOP count and peak)", get(figures, "torch_eager", "mfu")),
        ("bench-train / torch-eager tokens/s", figures["zinf_over_torch_eager"]),
        ("offload-cpu: ZeRO-3 CPU tokens/s", get(offload_cpu, "tokens_per_s")),
        ("offload-cpu: planned step ms", get(offload_cpu, "plan_step_ms")),
        ("offload-nvme: ZeRO-3 NVMe tokens/s", get(offload_nvme, "tokens_per_s")),
        ("offload-nvme: measured / planned step", get(offload_nvme, "measured_over_plan")),
        ("offload-cpu: step ms printed before its limit (no record)", get(offload_cpu, "logged_step_ms")),
        ("offload-nvme: step ms printed before its limit (no record)", get(offload_nvme, "logged_step_ms")),
        ("fsdp2: FSDP2 CPUOffloadPolicy tokens/s", fsdp2_tps),
        ("offload-cpu / fsdp2 tokens/s", offload_over_fsdp2),
    ]
    md += ["", "| figure | value |", "| --- | --- |"] + [f"| {name} | {fmt(v)} |" for name, v in rows]
    if figures["kernels"]:
        md += ["", "| kernel | time | bytes/s | of HBM bandwidth | of GEMM peak |", "| --- | --- | --- | --- | --- |"]
        md += [f"| {k['name']} | {k['error'] if 'error' in k else fmt(k['real_time']) + ' ' + str(k['time_unit'])} | "
               f"{fmt(k.get('bytes_per_second'))} | {fmt(k.get('fraction_of_bandwidth'))} | "
               f"{fmt(k.get('fraction_of_gemm_peak'))} |" for k in figures["kernels"]]
    md += ["", "| target (issue 28) | met |", "| --- | --- |"] + [f"| {t} | {fmt(m)} |" for t, m in targets]
    md += ["", "all steps ok" if summary["ok"] else "SOME STEPS FAILED OR TIMED OUT (see logs.tar.gz)"]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
