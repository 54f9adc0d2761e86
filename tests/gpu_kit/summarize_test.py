#!/usr/bin/env python3
"""scripts/gpu/summarize.py on a device run's result files, without a GPU.

The inputs are SYNTHETIC (made up here, in the formats the steps write: zinf's records, Google
Benchmark's JSON, torch_train.py's and fsdp2_offload.py's JSON lines, Catch2's last line), chosen so
that every ratio, MFU and issue-28 target has a value worked out by hand below. They are not
measurements. Usage: summarize_test.py REPO WORK_DIR
"""
import json
import math
import shutil
import subprocess
import sys
from pathlib import Path


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def main():
    repo, work = Path(sys.argv[1]), Path(sys.argv[2])
    shutil.rmtree(work, ignore_errors=True)
    results, logs, out = work / "results", work / "logs", work / "out"
    out.mkdir(parents=True)
    write(work / "manifest.txt", "flavour=cuda\ncommit=abc\npacked=then\n")
    steps = ["kit", "gpu-info", "suite", "cuda-test", "bench-train", "torch-eager", "kernels-bench", "offload-cpu",
             "offload-nvme", "fsdp2"]
    write(work / "steps.tsv", "step\tstatus\texit\tseconds\tlimit_s\n" +
          "".join(f"{s}\tok\t0\t1.5\t10\n" for s in steps[:-1]) + "fsdp2\ttimeout\t124\t55.0\t55\n")
    write(results / "gpu.csv", "name, memory.total [MiB]\nSynthetic GPU, 1000 MiB\n")
    write(results / "suite" / "suite.json", json.dumps({"figures": [
        {"name": "device memory bandwidth (copy)", "zinf": {"median": 2000.0}},
        {"name": "device bf16 matmul peak", "zinf": {"median": 500000.0}}]}))
    write(logs / "cuda-test.log", "...\nAll tests passed (123 assertions in 45 test cases)\n")
    write(results / "bench-train.json", json.dumps({
        "zinf": {"tokens_per_s_median": 1000.0, "mfu": 0.5}, "compute_peak_flops_per_s": 5e14,
        "flops_per_step": 4e12}))
    write(results / "torch-eager.json", json.dumps({
        "tokens_per_s_median": 800.0, "step_ms": [10.0], "torch_version": "x", "config": {"batch": 2, "seq": 4}}))
    write(results / "kernels-bench.json", json.dumps({"benchmarks": [
        {"name": "BM_MemoryBandwidth/manual_time", "real_time": 1.0, "time_unit": "us", "fraction_of_bandwidth": 0.1},
        {"name": "BM_GeluForward/manual_time", "real_time": 2.0, "time_unit": "us", "fraction_of_bandwidth": 0.8},
        {"name": "BM_LayerNormForward/manual_time", "real_time": 3.0, "time_unit": "us",
         "fraction_of_bandwidth": 0.6},
        {"name": "BM_AttentionForward/B:8/manual_time", "real_time": 4.0, "time_unit": "us",
         "fraction_of_gemm_peak": 0.55},
        {"name": "BM_AdamStep/manual_time", "error_occurred": True, "error_message": "bound: no"}]}))

    def record(tps, predicted, measured):
        return json.dumps({"status": "completed", "summary": {"tokens_per_s": tps, "step_ms": {"median": measured},
                                                             "mfu": 0.1, "final_loss": 5.0},
                           "plan": {"rows": [{"figure": "step", "predicted": predicted, "measured": measured}]}})
    write(results / "offload-cpu.json", record(300.0, 80.0, 100.0))
    write(results / "offload-nvme.json", record(30.0, 100.0, 110.0))
    # offload-cpu's record exists, so the lines of its log are not read.
    write(logs / "offload-cpu.log", "step 1/4 loss 1 lr 1 grad_norm 1 100 tok/s 999.0 ms/step\n")
    def summarize():
        subprocess.run([sys.executable, str(repo / "scripts/gpu/summarize.py"), "--mode", "device", "--manifest",
                        str(work / "manifest.txt"), "--steps", str(work / "steps.tsv"), "--results", str(results),
                        "--out", str(out)], check=True)

    # fsdp2 timed out: no fsdp2.json, so its figure and the ratio must read "not measured".
    summarize()
    s = json.loads((out / "summary.json").read_text())
    f = s["figures"]
    assert f["gpu"] == {"name": "Synthetic GPU", "memory.total [MiB]": "1000 MiB"}, f["gpu"]
    assert f["hbm_copy_gb_per_s"] == 2000.0 and f["bf16_gemm_peak_gflop_per_s"] == 500000.0
    assert f["cuda_test"] == {"test_cases": 45, "failed": 0, "assertions": 123}, f["cuda_test"]
    assert math.isclose(f["zinf_over_torch_eager"], 1000.0 / 800.0)
    assert math.isclose(f["torch_eager"]["mfu"], 4e12 * 800.0 / (2 * 4) / 5e14)  # 0.8
    assert math.isclose(f["offload_cpu"]["measured_over_plan"], 100.0 / 80.0)
    assert math.isclose(f["offload_nvme"]["measured_over_plan"], 110.0 / 100.0)
    assert f["fsdp2"] is None and f["offload_cpu_over_fsdp2"] is None
    assert f["kernels"][-1]["error"] == "bound: no"
    met = {t["target"]: t["met"] for t in s["targets"]}
    assert met == {
        "cuda_test: every case passes": True,
        "1.3B bf16 MFU >= 0.45": True,                     # 0.5
        "1.3B tokens/s >= 1.0x PyTorch eager": True,       # 1.25
        "ZeRO-3 CPU offload >= 1.5x FSDP2 CPUOffloadPolicy": None,  # fsdp2 not measured
        "NVMe step within 1.2x of its plan": True,         # 1.1
        "every memory-bound kernel >= 0.7x measured HBM bandwidth": False,  # layer norm 0.6
        "attention forward >= 0.5x the GEMM peak": True,   # 0.55
    }, met
    assert s["ok"] is False  # fsdp2 timed out
    md = (out / "summary.md").read_text()
    assert "| fsdp2: FSDP2 CPUOffloadPolicy tokens/s | not measured |" in md, md
    assert "| bench-train / torch-eager tokens/s | 1.25 |" in md, md
    assert "| fsdp2 | timeout | 124 | 55.0 | 55 |" in md, md
    assert "logged_step_ms" not in f["offload_cpu"], f["offload_cpu"]
    # A train step stopped at its limit leaves no record: its printed step times are kept instead.
    (results / "offload-nvme.json").unlink()
    write(logs / "offload-nvme.log", "training ...\nstep 1/3 loss 10.9 lr 2.00e-04 grad_norm 3.4 330 tok/s 49612.5 ms/step "
          "nvme 1.20 GB/s\nstep 2/3 loss 10.1 lr 2.00e-04 grad_norm 2.1 410 tok/s 39950.0 ms/step nvme 1.50 GB/s\n")
    summarize()
    s = json.loads((out / "summary.json").read_text())
    assert s["figures"]["offload_nvme"] == {"status": "no record", "logged_step_ms": [49612.5, 39950.0]}, s
    assert {t["target"]: t["met"] for t in s["targets"]}["NVMe step within 1.2x of its plan"] is None

    # A failing cuda_test: Catch2's totals line, with and without passes.
    for line, want in (("test cases: 45 | 44 passed | 1 failed", {"test_cases": 45, "passed": 44, "failed": 1}),
                       ("test cases: 3 | 3 failed", {"test_cases": 3, "passed": 0, "failed": 3})):
        write(logs / "cuda-test.log", f"...\n{line}\nassertions: 9 | 1 failed\n")
        summarize()
        s = json.loads((out / "summary.json").read_text())
        assert s["figures"]["cuda_test"] == want, s["figures"]["cuda_test"]
        assert s["targets"][0] == {"target": "cuda_test: every case passes", "met": False}, s["targets"][0]
    print("summarize.py: device summary checked")
    return 0


if __name__ == "__main__":
    sys.exit(main())
