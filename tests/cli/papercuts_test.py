#!/usr/bin/env python3
"""The first-hour papercuts of issue 29, each against the real binary (exit codes and stderr as a shell sees them).

Usage: papercuts_test.py ZINF SOURCE_DIR CASE
Cases: suffix-case, does-not-fit, warmup-fits, stop-after-needs-checkpoint, wrote-file, format-from-extension,
       ds-config-grads, headroom, oversubscribed, overlap-words, profiles.
"""
import csv
import io
import json
import os
import shutil
import subprocess
import sys
import tempfile

ZINF, SOURCE, CASE = sys.argv[1], sys.argv[2], sys.argv[3]
WORK = tempfile.mkdtemp(prefix="zinf-papercuts-")
EXIT_BAD_INPUT, EXIT_DOES_NOT_FIT = 2, 4


def zinf(*args, expect=0, env=None, prefix=()):
    proc = subprocess.run([*prefix, ZINF, *args], capture_output=True, text=True, cwd=WORK, timeout=600,
                          env=env)
    if proc.returncode != expect:
        sys.exit(f"zinf {' '.join(args)}: exit {proc.returncode}, expected {expect}\nstdout:\n{proc.stdout[-3000:]}\n"
                 f"stderr:\n{proc.stderr[-3000:]}")
    return proc


def check(condition, what):
    if not condition:
        sys.exit("FAILED: " + what)


def path(name):
    return os.path.join(WORK, name)


def write_json(name, document):
    with open(path(name), "w") as f:
        json.dump(document, f)
    return path(name)


def plan_json(*args, expect=0):
    return json.loads(zinf("plan", *args, "--format", "json", expect=expect).stdout)


def tiny_scenario(**extra):
    s = {"name": "tiny", "model": {"layers": 1, "hidden": 32, "heads": 2, "vocab": 64, "max_positions": 16},
         "data": {"source": "markov", "successors": 4, "skew": 1.0}, "batch": 4, "seq": 16, "steps": 6,
         "precision": "fp32", "seed": 3, "device": "cpu",
         "optimizer": {"type": "adamw", "lr": 1e-3, "schedule": {"kind": "constant"}}, "output": {"log_every": 1}}
    s.update(extra)
    return s


def suffix_case():
    # Count suffixes in any case mean the same count; binary byte units in any case the same size.
    for lower, upper in (("7b", "7B"), ("1t", "1T"), ("350m", "350M")):
        a, b = plan_json("--params", lower), plan_json("--params", upper)
        check(a["model"]["parameters"]["total"] == b["model"]["parameters"]["total"], f"--params {lower} == {upper}")
        check(a["input"]["requested_params"] == b["input"]["requested_params"], f"requested {lower}")
    a = plan_json("--params", "7B", "--gpu-mem", "64gib")
    check(a["input"]["hardware"]["node"]["gpu"]["memory"] == 64 * 2**30, "--gpu-mem 64gib is 64 GiB")
    # A decimal unit's lower-case b would be bits: refused with one line naming flag, value and forms.
    err = zinf("plan", "--params", "7B", "--gpu-mem", "80gb", expect=EXIT_BAD_INPUT).stderr.strip()
    check(err.count("\n") == 0 and "--gpu-mem" in err and "'80gb'" in err and "bits" in err and "GiB" in err, err)
    err = zinf("plan", "--params", "7x", expect=EXIT_BAD_INPUT).stderr
    check("'7x'" in err and "any case" in err, err)


def does_not_fit():
    # Pure data parallelism keeps 16-20 bytes per parameter on every GPU: 1T cannot fit, 1B can.
    zinf("plan", "--params", "1B", "--hw", "dgx-a100-80g", "--strategy", "dp")
    record = plan_json("--params", "1T", "--hw", "dgx-a100-80g", "--strategy", "dp", expect=EXIT_DOES_NOT_FIT)
    check(record["feasible"] is False, "the 1T dp plan is infeasible")
    zinf("plan", "--params", "1T", "--hw", "dgx-a100-80g", "--strategy", "dp", "--out", path("p.json"),
         expect=EXIT_DOES_NOT_FIT)
    check(json.load(open(path("p.json")))["feasible"] is False, "the record is written before exit 4")
    # A sweep exits 4 only when no point fits.
    zinf("plan", "--params", "1T", "--hw", "dgx-a100-80g", "--strategy", "dp", "--nodes", "1,2",
         expect=EXIT_DOES_NOT_FIT)
    zinf("plan", "--params", "1B", "--hw", "dgx-a100-80g", "--strategy", "dp", "--nodes", "1,2")
    zinf("plan", "--params", "1T", "--hw", "nope", expect=EXIT_BAD_INPUT)


def warmup_fits():
    quickstart = os.path.join(SOURCE, "scenarios", "quickstart.json")
    proc = zinf("train", quickstart, "--steps", "20", "--record", path("q.json"))
    check("warm-up shortened to 0 steps" in proc.stderr and "20 of 500" in proc.stderr, proc.stderr[-2000:])
    record = json.load(open(path("q.json")))
    check(record["scenario"]["optimizer"]["schedule"]["warmup_steps"] == 0, "the record holds the warm-up run")
    check(len(record["steps"]) == 20, "20 steps ran")
    # --steps 100 keeps 4% of the run: 4 warm-up steps; no note when it fits.
    proc = zinf("train", quickstart, "--steps", "100", "--record", path("q100.json"))
    check("warm-up" not in proc.stderr, proc.stderr[-1000:])
    # Both set by the user (the scenario file): still an error naming the field.
    both = write_json("both.json", tiny_scenario(steps=5, optimizer={
        "type": "adamw", "lr": 1e-3, "schedule": {"kind": "cosine", "warmup_steps": 10}}))
    err = zinf("train", both, expect=EXIT_BAD_INPUT).stderr
    check("warmup_steps" in err, err)
    proc = zinf("bench", "train", quickstart, "--steps", "3", "--warmup", "1", "--repeat", "1", "--threads", "1")
    check("warm-up shortened" in proc.stderr, proc.stderr[-2000:])


def stop_after_needs_checkpoint():
    plain = write_json("plain.json", tiny_scenario())
    err = zinf("train", plain, "--stop-after", "3", "--record", path("r.json"), expect=EXIT_BAD_INPUT).stderr.strip()
    check(err.startswith("error: --stop-after: 3") and "checkpoint" in err and err.count("\n") == 0, err)
    check(not os.path.exists(path("r.json")), "nothing ran")
    with_dir = write_json("ckpt.json", tiny_scenario(checkpoint={"dir": path("ck"), "every": 3}))
    zinf("train", with_dir, "--stop-after", "3", "--quiet", "--record", path("r.json"))
    check(os.path.isdir(path("ck")) and os.listdir(path("ck")), "a checkpoint was written")


def wrote_file():
    proc = zinf("plan", "--params", "1T", "--hw", "dgx2-v100", "--out", path("plan.txt"),
                "--emit-ds-config", path("ds.json"))
    check(f"wrote {path('ds.json')}" in proc.stderr and f"wrote {path('plan.txt')}" in proc.stderr, proc.stderr)
    check(proc.stdout == "", "nothing on stdout with --out")
    proc = zinf("hw", "show", "dgx-h100", "--format", "json", "--out", path("h.json"))
    check(f"wrote {path('h.json')}" in proc.stderr, proc.stderr)
    proc = zinf("plan", "--params", "7B", "--out", "-")
    check("wrote" not in proc.stderr, "stdout is not announced")


def format_from_extension():
    zinf("plan", "--params", "7B", "--out", path("p.json"))
    check(json.load(open(path("p.json")))["schema"] == "zinf.plan/1", ".json writes the record")
    zinf("plan", "--params", "7B", "--out", path("p.csv"))
    rows = list(csv.reader(open(path("p.csv"))))
    check(len(rows) > 1 and len(rows[0]) > 1, ".csv writes CSV")
    zinf("plan", "--params", "7B", "--out", path("p.MD"))
    check(open(path("p.MD")).read().startswith("#"), ".MD writes Markdown")
    zinf("plan", "--params", "7B", "--out", path("p.json.txt"))
    check("zinf plan:" in open(path("p.json.txt")).read(), ".txt writes the table")
    # --format wins over the extension.
    zinf("plan", "--params", "7B", "--format", "csv", "--out", path("q.json"))
    check(not open(path("q.json")).read().lstrip().startswith("{"), "--format csv wins")
    err = zinf("plan", "--params", "7B", "--out", path("p.html"), expect=EXIT_BAD_INPUT).stderr
    check("--out" in err and "html" in err, err)
    # hw show/probe --out me.json is a profile that --hw reads back.
    zinf("hw", "show", "dgx-a100-80g", "--out", path("me.json"))
    zinf("plan", "--params", "7B", "--hw", path("me.json"))
    zinf("hw", "probe", "--repeat", "2", "--device", "none", "--no-fio", "--out", path("probe.json"))
    zinf("plan", "--params", "50M", "--hw", path("probe.json"))
    # report defaults to html, and follows .md.
    zinf("report", path("p.json"), "--out", path("r.md"))
    check(open(path("r.md")).read().startswith("#"), "report .md")
    zinf("report", path("p.json"), "--out", path("r.out"))
    check("<html" in open(path("r.out")).read().lower(), "report stays html by default")


def ds_config_grads():
    zinf("plan", "--params", "1T", "--hw", "dgx2-v100", "--emit-ds-config", path("ds.json"))
    record = plan_json("--params", "1T", "--hw", "dgx2-v100", "--ds-config", path("ds.json"))
    tier = record["placement"]["grads"] if "grads" in record.get("placement", {}) else None
    if tier is None:
        tier = next(s["tier"] for s in record["memory"]["states"] if s["kind"] == "grads")
    table = zinf("plan", "--params", "1T", "--hw", "dgx2-v100", "--ds-config", path("ds.json")).stdout
    line = next(l for l in table.splitlines() if "gradients:" in l)
    said = line.split("gradients:")[1].split()[0].strip(",")
    check(said == tier, f"the DeepSpeed section says gradients: {said}, the placement {tier}\n{line}")


def headroom():
    # Pin everything to the GPU (dp), read the GPU tier's use, then give the GPU 97% and 90% of room.
    base = plan_json("--params", "1B", "--hw", "dgx-a100-80g", "--strategy", "dp")
    gpu = next(t for t in base["memory"]["tiers"] if t["tier"] == "gpu")
    used = gpu["used_bytes"]
    tight = zinf("plan", "--params", "1B", "--hw", "dgx-a100-80g", "--strategy", "dp", "--gpu-mem",
                 str(int(used / 0.97)), "--format", "json")
    record = json.loads(tight.stdout)
    check(record["feasible"] and len(record["warnings"]) == 1 and record["warnings"][0].startswith("gpu:"),
          json.dumps(record.get("warnings")))
    check("warning: gpu:" in tight.stderr and "headroom" in tight.stderr, tight.stderr)
    roomy = zinf("plan", "--params", "1B", "--hw", "dgx-a100-80g", "--strategy", "dp", "--gpu-mem",
                 str(int(used / 0.90)), "--format", "json")
    check(json.loads(roomy.stdout)["warnings"] == [] and "warning" not in roomy.stderr, roomy.stderr)
    table = zinf("plan", "--params", "1B", "--hw", "dgx-a100-80g", "--strategy", "dp", "--gpu-mem",
                 str(int(used / 0.97))).stdout
    check("little headroom" in table, "the verdict says it")


def oversubscribed():
    if shutil.which("taskset") is None:
        print("taskset missing: skipped")
        return
    scenario = write_json("o.json", tiny_scenario())
    proc = zinf("train", scenario, "--threads", "2", "--record", path("o-record.json"), prefix=("taskset", "-c", "0"))
    lines = [l for l in proc.stderr.splitlines() if l.startswith("step ")]
    check(lines and all("oversubscribed (2 threads on 1 core)" in l for l in lines), proc.stderr)


def overlap_words():
    # Clipping makes the step wait for the global norm: the optimizer steps after the backward pass, and
    # the engine line must not call it "overlapped" beside 0% stepped during the backward pass.
    cpu3 = {"stage": 3, "params": "cpu", "optimizer": "cpu", "host_memory": "64MiB", "persistence_threshold": 100}
    clipped = write_json("clip.json", tiny_scenario(zero=cpu3, device_memory="64MiB", optimizer={
        "type": "adamw", "lr": 1e-3, "grad_clip": 1.0, "schedule": {"kind": "constant"}}))
    zinf("train", clipped, "--quiet", "--record", path("clip-record.json"))
    record = json.load(open(path("clip-record.json")))
    overlap = record["engine"]["optimizer_overlap"]
    check(overlap["stepped_during_backward_fraction"] == 0, "clipping: nothing stepped during the backward pass")
    check("optimizer overlapped" not in record["engine"]["description"] and
          "after the backward pass" in record["engine"]["description"], record["engine"]["description"])
    free = write_json("free.json", tiny_scenario(zero=cpu3, device_memory="64MiB", optimizer={
        "type": "adamw", "lr": 1e-3, "grad_clip": 0.0, "schedule": {"kind": "constant"}}))
    zinf("train", free, "--quiet", "--record", path("free-record.json"))
    record = json.load(open(path("free-record.json")))
    check("optimizer overlapped" in record["engine"]["description"], record["engine"]["description"])


def profiles():
    listed = zinf("hw", "list").stdout
    # datasheet dense peaks per math mode (the sparsity figures halved), as the profiles' provenance says
    expected = {"dgx-h200": {"fp32": 67e12, "bf16": 989.4e12}, "dgx-b200": {"fp32": 75e12, "bf16": 2250e12},
                "gh200": {"fp32": 67e12, "bf16": 989.4e12}, "mi300x": {"fp32": 163.4e12, "bf16": 1307.4e12}}
    for name, peaks in expected.items():
        check(name in listed, f"{name} listed")
        shown = json.loads(zinf("hw", "show", name, "--format", "json").stdout)
        check("datasheet" in shown["provenance"]["node.gpu.peak_flops"], f"{name}: peaks labelled datasheet")
        check(all(k.startswith("node.") for k in shown["provenance"]), name)
        for precision, peak in peaks.items():
            record = json.loads(zinf("plan", "--params", "7B", "--hw", name, "--precision", precision,
                                     "--format", "json").stdout)
            got = record["compute_rate"]["peak_flops"]
            check(abs(got - peak) <= 1e-9 * peak, f"{name} {precision}: peak {got}, datasheet {peak}")


CASES = {"suffix-case": suffix_case, "does-not-fit": does_not_fit, "warmup-fits": warmup_fits,
         "stop-after-needs-checkpoint": stop_after_needs_checkpoint, "wrote-file": wrote_file,
         "format-from-extension": format_from_extension, "ds-config-grads": ds_config_grads, "headroom": headroom,
         "oversubscribed": oversubscribed, "overlap-words": overlap_words, "profiles": profiles}
try:
    CASES[CASE]()
finally:
    shutil.rmtree(WORK, ignore_errors=True)
print("ok")
