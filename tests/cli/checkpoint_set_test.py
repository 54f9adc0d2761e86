#!/usr/bin/env python3
"""Checkpoint sets under mpirun (issue 24): a damaged, foreign, stale or missing shard in the newest set.

A tiny ZeRO-3 CPU-offload run at RANKS ranks saves sets at steps 2, 4 and 6 and stops; then rank 1's
shard of the newest set (step 6) is truncated, has a byte flipped, is replaced by the same shard of a
run with another seed, by the step-4 shard renamed, or is deleted. Resuming at RANKS ranks:
  - checkpoint.strict false: every rank resumes from step 4 together, the losses of steps 4-7 equal
    the uninterrupted run's bit for bit, and the reason (naming the shard) is on stderr and in the
    record; the run's later sets are whole, so the next resume loads them, exit 0;
  - checkpoint.strict true: exit non-zero, no record, and one error line (rank 0's: the ranks agreed on
    it) naming the shard.
`zinf checkpoint verify` says the same of the directory (exit 1, one line naming the shard) and exit 0
for an intact one; `zinf checkpoint ls` lists the sets.
Usage: checkpoint_set_test.py ZINF MPIEXEC RANKS
"""
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile

ZINF, MPIEXEC, RANKS = sys.argv[1], sys.argv[2], int(sys.argv[3])
WORK = tempfile.mkdtemp(prefix="zinf-ckpt-set-")
atexit.register(shutil.rmtree, WORK, ignore_errors=True)
CPU3 = {"stage": 3, "params": "cpu", "optimizer": "cpu", "host_memory": "64MiB", "persistence_threshold": 100}


def scenario(name, seed=7, checkpoint=None):
    s = {
        "name": name,
        "model": {"layers": 2, "hidden": 32, "heads": 2, "vocab": 64, "max_positions": 16},
        "data": {"source": "markov", "successors": 8, "skew": 1.0},
        "batch": 6, "seq": 16, "steps": 8, "precision": "fp32", "seed": seed,
        "optimizer": {"type": "adamw", "lr": 3e-3, "schedule": {"kind": "constant"}},
        "device": "cpu", "device_memory": "64MiB", "zero": CPU3, "output": {"log_every": 1},
    }
    if checkpoint:
        s["checkpoint"] = checkpoint
    path = os.path.join(WORK, name + ".json")
    with open(path, "w") as f:
        json.dump(s, f)
    return path


def run(argv, ranks):
    if ranks > 1:
        argv = [MPIEXEC, "--oversubscribe", "-np", str(ranks)] + argv
    return subprocess.run(argv, capture_output=True, text=True, timeout=300)


def train(path, *extra, expect=0):
    out = os.path.join(WORK, f"record-{os.path.basename(path)}.json")
    if os.path.exists(out):
        os.remove(out)
    done = run([ZINF, "train", path, "--format", "json", "--out", out, "--comm-timeout", "60", *extra], RANKS)
    if (done.returncode == 0) != (expect == 0):
        sys.exit(f"FAIL: train {path} {extra} exited {done.returncode}\n{done.stderr[-3000:]}")
    if expect != 0:
        if os.path.exists(out):
            sys.exit(f"FAIL: a failed resume wrote a record: {out}")
        return done.stderr
    with open(out) as f:
        return json.load(f), done.stderr


def losses(record):
    return {s["step"]: s["loss"] for s in record["steps"]}


def shard(ckpt, step, rank):
    return os.path.join(ckpt, f"step-{step:08d}.rank-{rank:05d}-of-{RANKS:05d}.zckpt")


reference, _ = train(scenario("straight"))
expected = losses(reference)
# A pristine directory with sets at 2, 4 and 6, and the same of a run with another seed.
pristine = os.path.join(WORK, "pristine")
train(scenario("first", checkpoint={"dir": pristine, "every": 2, "keep_last": 3}), "--stop-after", "6")
foreign = os.path.join(WORK, "foreign")
train(scenario("foreign", seed=8, checkpoint={"dir": foreign, "every": 2, "keep_last": 3}), "--stop-after", "6")
names = sorted(os.listdir(pristine))
if f"step-00000006.manifest.json" not in names or len([n for n in names if n.endswith(".manifest.json")]) != 3:
    sys.exit(f"FAIL: expected sets at steps 2, 4 and 6: {names}")

ok = run([ZINF, "checkpoint", "verify", pristine], 1)
if ok.returncode != 0 or "valid" not in ok.stdout:
    sys.exit(f"FAIL: checkpoint verify of an intact directory exited {ok.returncode}\n{ok.stdout}{ok.stderr}")
listed = run([ZINF, "checkpoint", "ls", pristine, "--format", "json"], 1)
sets = json.loads(listed.stdout)["checkpoints"]
if listed.returncode != 0 or [s["step"] for s in sets] != [6, 4, 2] or any(s["world_size"] != RANKS for s in sets):
    sys.exit(f"FAIL: checkpoint ls: {listed.stdout}{listed.stderr}")
usage = run([ZINF, "checkpoint", "verify", pristine, "--step", "5"], 1)
if usage.returncode != 2 or "--step" not in usage.stderr:
    sys.exit(f"FAIL: verify --step 5 (no such step) exited {usage.returncode}: {usage.stderr}")


def damage(kind, ckpt):
    target = shard(ckpt, 6, 1)
    if kind == "truncated":
        with open(target, "r+b") as f:
            f.truncate(os.path.getsize(target) - 100)
    elif kind == "flipped":
        # A bit of the last element of the last non-empty array (not the padding after it).
        with open(target, "r+b") as f:
            header_bytes = int.from_bytes(f.read(24)[16:24], "little")
            header = json.loads(f.read(header_bytes))
            data_start = (24 + header_bytes + 63) // 64 * 64
            at = max(data_start + a["offset"] + a["numel"] * 4 - 2 for a in header["arrays"] if a["numel"] > 0)
            f.seek(at)
            byte = f.read(1)[0]
            f.seek(at)
            f.write(bytes([byte ^ 0x40]))
    elif kind == "foreign":
        shutil.copyfile(shard(foreign, 6, 1), target)
    elif kind == "stale":
        shutil.copyfile(shard(ckpt, 4, 1), target)
    elif kind == "missing":
        os.remove(target)
    return os.path.basename(target)


for kind in ("truncated", "flipped", "foreign", "stale", "missing"):
    for strict in (False, True):
        what = f"{kind} rank-1 shard, strict {strict}, {RANKS} ranks"
        ckpt = os.path.join(WORK, f"ckpt-{kind}-{strict}")
        shutil.copytree(pristine, ckpt)
        bad = damage(kind, ckpt)
        checked = run([ZINF, "checkpoint", "verify", ckpt, "--step", "6"], 1)
        if checked.returncode != 1 or bad not in checked.stdout:
            sys.exit(f"FAIL: {what}: checkpoint verify exited {checked.returncode}\n{checked.stdout}{checked.stderr}")
        path = scenario(f"resume-{kind}-{strict}",
                        checkpoint={"dir": ckpt, "every": 2, "keep_last": 3, "strict": strict})
        if strict:
            err = train(path, expect=1)
            # Every rank stops on the same agreed error, which rank 0 alone prints: one error line,
            # naming the damaged shard, and no other rank's different story (a lost peer, a timeout).
            errors = [line for line in err.splitlines() if line.startswith("error:")]
            if len(errors) != 1 or bad not in errors[0] or "collective" in err or "lost rank" in err:
                sys.exit(f"FAIL: {what}: expected one error line naming {bad}, got:\n{err[-3000:]}")
            print(f"{what}: every rank stopped, one line: {errors[0][:160]}")
            continue
        # Steps 4-6 (sets at 6 and 7), then the next resume runs step 7.
        record, err = train(path, "--stop-after", "7")
        if record["summary"]["first_step"] != 4:
            sys.exit(f"FAIL: {what}: resumed at step {record['summary']['first_step']}, not 4\n{err[-3000:]}")
        got = losses(record)
        if sorted(got) != [4, 5, 6] or any(got[s] != expected[s] for s in got):
            sys.exit(f"FAIL: {what}: losses {got} are not the uninterrupted run's {expected}")
        warnings = record["checkpoint"]["resume_warnings"]
        if not warnings or bad not in warnings[0] or bad not in err:
            sys.exit(f"FAIL: {what}: the reason naming {bad} is missing: record {warnings}\n{err[-3000:]}")
        # The run went on to save whole sets at 6 and 7 (over the damaged one): the next resume is clean.
        after = run([ZINF, "checkpoint", "verify", ckpt], 1)
        if after.returncode != 0:
            sys.exit(f"FAIL: {what}: the sets written after the fallback do not verify:\n{after.stdout}")
        again = train(path)[0]
        if again["summary"]["first_step"] != 7 or again["checkpoint"]["resume_warnings"]:
            sys.exit(f"FAIL: {what}: the next resume did not load step 7 cleanly: {again['checkpoint']}")
        if losses(again) != {7: expected[7]}:
            sys.exit(f"FAIL: {what}: step 7 after the next resume: {losses(again)} vs {expected[7]}")
        print(f"{what}: every rank resumed at step 4, losses bit for bit; {warnings[0][:160]}")
