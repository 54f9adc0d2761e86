#!/usr/bin/env bash
# The GPU kit's rehearsal (issue 28), as CTest runs it: rehearse_test.sh BUILD_DIR WORK_DIR.
# 1. pack.sh --cpu --from BUILD_DIR packs BUILD_DIR/bin/zinf and its ldd closure; the size is printed.
# 2. run.sh --rehearse --inject-faults (under env -i, with the kit's fallback libstdc++, libgcc_s and
#    libgomp forced on: ZINF_KIT_FALLBACK=all): the kit step and the CPU steps pass, the CUDA
#    steps are skipped, the planted failure and timeout are recorded as such and the steps after
#    them still run; $OUT holds exactly summary.md, summary.json, steps.tsv and logs.tar.gz.
# 3. A step whose limit would end past --budget is not started and is recorded as no-time.
# 4. The same kit with libfmt.so.9 taken out: the kit step fails, naming it.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
build=${1:?usage: rehearse_test.sh BUILD_DIR WORK_DIR}
work=${2:?usage: rehearse_test.sh BUILD_DIR WORK_DIR}
rm -rf "$work" && mkdir -p "$work"
fail() { echo "FAIL: $*" >&2; exit 1; }

"$repo/scripts/gpu/pack.sh" --cpu --from "$build" --kit "$work/kit" >"$work/pack.log" 2>&1 ||
  { cat "$work/pack.log"; fail "pack.sh --cpu --from $build"; }
grep -E '^kit: .*: [0-9.]+ MiB \([0-9.]+ MiB unpacked\), limit 60.0 MiB$' "$work/pack.log" || fail "no kit size line"
grep -q 'carry:   \[' "$work/pack.log" || fail "pack.sh printed no device command"

set +e
ZINF_KIT_FALLBACK=all "$repo/scripts/gpu/run.sh" --rehearse --inject-faults --kit "$work/kit" --out "$work/out" \
  --work "$work/run" >"$work/run.log" 2>&1
rc=$?
set -e
cat "$work/run.log"
((rc == 1)) || fail "run.sh --rehearse --inject-faults exited $rc, expected 1 (the planted faults)"
python3 - "$work/out" <<'PY'
import json, sys, tarfile
from pathlib import Path
out = Path(sys.argv[1])
names = sorted(p.name for p in out.iterdir())
assert names == ["logs.tar.gz", "steps.tsv", "summary.json", "summary.md"], names
s = json.loads((out / "summary.json").read_text())
steps = {x["step"]: x for x in s["steps"]}
expect = {"kit": "ok", "gpu-info": "skipped", "suite": "skipped", "cuda-test": "skipped", "bench-train": "ok",
          "torch-eager": "skipped", "kernels-bench": "skipped", "offload-cpu": "ok", "fsdp2": "skipped", "offload-nvme": "ok",
          "fault-exit": "failed", "fault-timeout": "timeout"}
got = {k: v["status"] for k, v in steps.items()}
assert got == expect, got
assert [x["step"] for x in s["steps"]] == list(expect), "step order"
assert steps["fault-exit"]["exit"] == 3, steps["fault-exit"]
assert steps["fault-timeout"]["exit"] == 124 and steps["fault-timeout"]["seconds"] < 5, steps["fault-timeout"]
assert s["ok"] is False
f = s["figures"]
for key in ("offload_cpu", "offload_nvme"):
    assert f[key]["status"] == "completed" and f[key]["tokens_per_s"] > 0, (key, f[key])
assert f["bench_train"]["zinf_tokens_per_s"] > 0, f["bench_train"]
assert f["hbm_copy_gb_per_s"] is None and f["fsdp2"] is None  # not measured, not guessed
with tarfile.open(out / "logs.tar.gz") as t:
    members = set(t.getnames())
for need in ("logs/kit.log", "logs/offload-nvme.log", "logs/fault-exit.log", "results/offload-cpu.json", "steps.tsv"):
    assert need in members, (need, sorted(members))
md = (out / "summary.md").read_text()
assert "| fault-timeout | timeout | 124 |" in md and "not measured" in md, md
print("rehearsal summary checked")
PY

# The budget: kit always runs; fault-exit's 10 s limit does not fit in 5 s.
set +e
"$repo/scripts/gpu/run.sh" --rehearse --inject-faults --only fault-exit --budget 5 --kit "$work/kit" \
  --out "$work/budget/out" --work "$work/budget/run" >"$work/budget.log" 2>&1
rc=$?
set -e
((rc == 1)) || { cat "$work/budget.log"; fail "--budget 5: run.sh exited $rc, expected 1"; }
grep -q '^| kit | ok | 0 |' "$work/budget/out/summary.md" || fail "--budget 5: the kit step did not run"
grep -q '^| fault-exit | no-time | - |' "$work/budget/out/summary.md" || fail "--budget 5: fault-exit was not no-time"

# ZINF_KIT_FALLBACK=all: the kit's own libstdc++ served the programs above.
tar -xzOf "$work/out/logs.tar.gz" logs/kit.log | grep -Eq 'libstdc\+\+\.so\.6 => .*/kit/lib/fallback/libstdc\+\+\.so\.6/' ||
  fail "ZINF_KIT_FALLBACK=all: libstdc++ did not resolve into the kit's fallback"

# A kit without one of its libraries must fail at the kit step, however the machine resolves it.
mkdir -p "$work/broken/kit" "$work/broken/tree"
tar -xzf "$work/kit/kit.tar.gz" -C "$work/broken/tree"
[[ -f "$work/broken/tree/lib/libfmt.so.9" ]] || fail "the kit has no lib/libfmt.so.9 to take out"
rm "$work/broken/tree/lib/libfmt.so.9"
tar -C "$work/broken/tree" -czf "$work/broken/kit/kit.tar.gz" .
set +e
"$repo/scripts/gpu/run.sh" --rehearse --only kit --kit "$work/broken/kit" --out "$work/broken/out" \
  --work "$work/broken/run" >"$work/broken.log" 2>&1
rc=$?
set -e
((rc == 1)) || { cat "$work/broken.log"; fail "a kit without libfmt.so.9: run.sh exited $rc, expected 1"; }
grep -q '^| kit | failed | 1 |' "$work/broken/out/summary.md" || fail "the kit step did not fail"
tar -xzOf "$work/broken/out/logs.tar.gz" logs/kit.log | grep -E 'libfmt\.so\.9' | grep -Eq 'OUTSIDE THE KIT|MISSING' ||
  fail "kit.log does not name libfmt.so.9"
echo "gpu kit rehearsal: ok"
