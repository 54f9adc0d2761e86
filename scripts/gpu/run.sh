#!/usr/bin/env bash
# run.sh: the GPU run of issue 28, from the repository root, using only the kit that
# scripts/gpu/pack.sh made (gpu-kit/kit.tar.gz): it unpacks the kit into a work folder, puts the
# kit's libraries (then the CUDA libraries the machine's image has) on the path of the kit's
# programs only, runs each step under its own time limit, keeps going past a failing step, and
# writes into --out (default $OUT): summary.md, summary.json, steps.tsv and logs.tar.gz (every
# step's log and result files).
#
# Steps (device; limits in seconds; --budget, default 540 s, skips a step whose limit no longer
# fits, so the summary is always written):
#   kit           10  the kit's library closure: every library resolves, and every one that is not
#                     glibc, a fallback or a CUDA library the image provides resolves into the kit
#   gpu-info      15  nvidia-smi: the GPU's name, memory, clocks, driver
#   suite         35  zinf bench suite --device cuda: HBM bandwidth (device copy) and the bf16 GEMM peak
#   cuda-test     60  cuda_test: every kernel against its CPU twin, the device, the model vs the CPU backend
#   bench-train   55  zinf bench train gpt-1.3b-cuda.json: tokens/s and MFU of the 1.3B model, bf16
#   torch-eager   50  scripts/bench/torch_train.py, the same model, batch, seq and seed: PyTorch eager
#                     bf16 autocast (a step of its own, not `bench train --torch`: zinf's session keeps
#                     its 72 GiB pool while the PyTorch child runs, and an 80 GB GPU cannot hold both)
#   kernels-bench 35  cuda_kernels_bench: every CUDA kernel's time and bytes/s
#   offload-cpu  150  zinf train gpu-offload-cpu.json: the 1.3B model, ZeRO-3 states in CPU memory
#                     (on the first H200 run, 2026-11-28, page-locking ~20 GiB of host memory and
#                     initialising 1.3B weights took over 55 s before step 1)
#   fsdp2         55  scripts/gpu/fsdp2_offload.py: PyTorch FSDP2 with CPUOffloadPolicy, same model
#   offload-nvme  80+ zinf train gpu-offload-nvme.json: parameters and optimizer states on local disk;
#                     last, its limit is what the budget has left, at most 180 s (the others: 465 s)
#
# --rehearse (here, without a GPU): re-runs itself under `env -i PATH=/usr/bin:/bin HOME=...`, so only
# the kit's libraries are on the path, against any kit (the CUDA kit, or pack.sh --cpu's); the
# CUDA steps are reported as skipped and bench-train / offload-* run tiny CPU scenarios instead
# (scenarios/gpu-kit-rehearse-*.json, 2 layers of hidden 64: their figures prove the bookkeeping only).
# --inject-faults (with --rehearse) adds a step that exits 3 and one that outlives its 1 s limit, to
# prove keep-going and the time limits.
#
# Usage: scripts/gpu/run.sh [--rehearse] [--inject-faults] [--kit DIR] [--out DIR] [--work DIR]
#                           [--only STEP[,STEP...]] [--budget SECONDS]
#   --kit DIR   the kit folder (default gpu-kit)      --out DIR   results (default $OUT)
#   --work DIR  scratch: the unpacked kit, logs, swap files (default runs/gpu-kit on the device,
#               a fresh temporary folder with --rehearse); emptied first
#   --only      run just these steps (kit always runs), e.g. after fixing one
#   --budget    seconds for all the steps (default 540): a step (other than kit) whose limit would
#               end past it is recorded as no-time instead of run
# Environment: ZINF_KIT_FALLBACK=auto|all|none (default auto): which of the kit's fallback libraries
#   (libstdc++, libgcc_s, libgomp) to use; auto uses one only when the machine's own is missing or
#   lacks a symbol version the kit's programs need.
# Exit status: 0 every step that ran passed; 1 a step failed or timed out; 2 bad usage or no kit.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mode=device
faults=0
kit=gpu-kit
out=${OUT:-}
work=""
only=""
budget=540
args=("$@")
usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rehearse) mode=rehearse ;;
    --inject-faults) faults=1 ;;
    --kit) kit=${2:?--kit needs a folder}; shift ;;
    --out) out=${2:?--out needs a folder}; shift ;;
    --work) work=${2:?--work needs a folder}; shift ;;
    --only) only=",${2:?--only needs step names},"; shift ;;
    --budget) budget=${2:?--budget needs seconds}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "run.sh: unknown argument '$1'; allowed: --rehearse, --inject-faults, --kit, --out, --work, --only, --budget" >&2
       exit 2 ;;
  esac
  shift
done
if [[ -z "$out" ]]; then
  echo "run.sh: --out: no output folder (give --out DIR, or set OUT)" >&2
  exit 2
fi
if ! [[ $budget =~ ^[1-9][0-9]*$ ]]; then
  echo "run.sh: --budget: '$budget' is not a whole number of seconds >= 1" >&2
  exit 2
fi
if [[ $faults == 1 && $mode != rehearse ]]; then
  echo "run.sh: --inject-faults: only with --rehearse" >&2
  exit 2
fi

# The rehearsal proves the kit is self-contained: nothing from this shell's environment may help.
if [[ $mode == rehearse && -z "${ZINF_KIT_CLEAN:-}" ]]; then
  exec env -i PATH=/usr/bin:/bin HOME="${HOME:-/root}" TMPDIR="${TMPDIR:-/tmp}" ZINF_KIT_CLEAN=1 \
    ZINF_KIT_FALLBACK="${ZINF_KIT_FALLBACK:-auto}" bash "${BASH_SOURCE[0]}" "${args[@]}"
fi

cd "$repo" || exit 2
[[ -f "$kit/kit.tar.gz" ]] || { echo "run.sh: --kit: $kit/kit.tar.gz not found; run scripts/gpu/pack.sh first" >&2; exit 2; }
kit=$(cd "$kit" && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
if [[ -z "$work" ]]; then
  if [[ $mode == rehearse ]]; then work=$(mktemp -d "${TMPDIR:-/tmp}/zinf-gpu-rehearsal.XXXXXX"); else work="$repo/runs/gpu-kit"; fi
fi
rm -rf "$work" && mkdir -p "$work/kit" "$work/logs" "$work/results" || exit 2
work=$(cd "$work" && pwd)
tar -xzf "$kit/kit.tar.gz" -C "$work/kit" || { echo "run.sh: cannot unpack $kit/kit.tar.gz" >&2; exit 2; }
K="$work/kit"
R="$work/results"
L="$work/logs"
steps_tsv="$work/steps.tsv"
printf 'step\tstatus\texit\tseconds\tlimit_s\n' >"$steps_tsv"
manifest() { sed -n "s/^$1=//p" "$K/manifest.txt"; }
flavour=$(manifest flavour)
read -r -a image_libs <<<"$(manifest image_libs)"
if [[ $mode == device && $flavour != cuda ]]; then
  echo "run.sh: the kit is the '$flavour' flavour; the device run needs pack.sh's CUDA kit" >&2
  exit 2
fi
python=$(command -v python3 || true)

# --- library path -------------------------------------------------------------------------------
# The CUDA libraries come from the machine: PyTorch's lib folder and nvidia-* wheels, then the
# toolkit. Each one the kit's programs need is looked up by soname; the first folder holding it wins.
cuda_candidates=()
if [[ -n "$python" ]]; then
  while IFS= read -r d; do [[ -n "$d" ]] && cuda_candidates+=("$d"); done < <(
    "$python" - <<'EOF' 2>/dev/null
import glob, importlib.util, os
torch = importlib.util.find_spec("torch")
if torch and torch.submodule_search_locations:
    print(os.path.join(list(torch.submodule_search_locations)[0], "lib"))
nvidia = importlib.util.find_spec("nvidia")
for base in (list(nvidia.submodule_search_locations) if nvidia and nvidia.submodule_search_locations else []):
    for d in sorted(glob.glob(os.path.join(base, "*", "lib")) + glob.glob(os.path.join(base, "*", "*", "lib"))):
        print(d)
EOF
  )
fi
cuda_candidates+=(/usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu)
cuda_dirs=()
declare -A image_found=()
for soname in "${image_libs[@]}"; do
  for d in "${cuda_candidates[@]}"; do
    if [[ -e "$d/$soname" ]]; then
      image_found[$soname]="$d"
      [[ " ${cuda_dirs[*]} " == *" $d "* ]] || cuda_dirs+=("$d")
      break
    fi
  done
done
join() { local IFS=:; echo "$*"; }
base_ldlp=$(join "$K/lib" "${cuda_dirs[@]}")
binaries=()
for b in "$K"/bin/*; do binaries+=("$b"); done
fallback_dirs=()
case "${ZINF_KIT_FALLBACK:-auto}" in
  all) for d in "$K"/lib/fallback/*/; do [[ -d "$d" ]] && fallback_dirs+=("${d%/}"); done ;;
  none) ;;
  auto)
    for d in "$K"/lib/fallback/*/; do
      [[ -d "$d" ]] || continue
      soname=$(basename "$d")
      if LD_LIBRARY_PATH="$base_ldlp" ldd "${binaries[@]}" 2>&1 |
        grep -Eq "^[[:space:]]*${soname//+/\\+} => not found|/${soname//+/\\+}: version .* not found"; then
        fallback_dirs+=("${d%/}")
      fi
    done ;;
  *) echo "run.sh: ZINF_KIT_FALLBACK: '${ZINF_KIT_FALLBACK}' is not one of auto, all, none" >&2; exit 2 ;;
esac
orig_ldlp=${LD_LIBRARY_PATH-}
# The caller's path last: the driver's libcuda.so.1 (which libcudart opens) may be found only through it.
kit_ldlp=$(join "$K/lib" "${fallback_dirs[@]}" "${cuda_dirs[@]}" ${orig_ldlp:+"$orig_ldlp"})

# The Python steps run with the caller's environment, never the kit's library path (an older
# libstdc++ there would break torch); this wrapper pins that, whoever starts it.
pywrap="$work/python3"
{
  echo '#!/bin/sh'
  if [[ -n "$orig_ldlp" ]]; then printf 'export LD_LIBRARY_PATH=%q\n' "$orig_ldlp"; else echo 'unset LD_LIBRARY_PATH'; fi
  printf 'exec %q "$@"\n' "${python:-python3}"
} >"$pywrap"
chmod +x "$pywrap"

# --- steps --------------------------------------------------------------------------------------
failures=0
started=$SECONDS
# run_step NAME LIMIT_S NEEDS(cuda|any) CMD...: runs CMD in $work under `timeout`, its output in
# logs/NAME.log, and appends one row to steps.tsv. A CUDA step is skipped in the rehearsal.
run_step() {
  local name=$1 limit=$2 needs=$3
  shift 3
  if [[ -n "$only" && $name != kit && $only != *",$name,"* ]]; then return 0; fi
  if [[ $mode == rehearse && $needs == cuda ]]; then
    printf '%s\tskipped\t\t0\t%s\n' "$name" "$limit" >>"$steps_tsv"
    echo "run.sh: $name: skipped (needs a GPU)" >&2
    return 0
  fi
  if [[ $name != kit ]] && ((limit < 1 || SECONDS - started + limit > budget)); then
    printf '%s\tno-time\t\t0\t%s\n' "$name" "$limit" >>"$steps_tsv"
    failures=$((failures + 1))
    echo "run.sh: $name: not run: its ${limit} s limit would end past the ${budget} s budget" >&2
    return 0
  fi
  local start end rc status seconds
  start=$(date +%s.%N)
  if declare -F "$1" >/dev/null; then
    # A function of this script: its own bash, given the state it reads.
    local state
    state="$(declare -p K R mode flavour kit_ldlp pywrap image_libs image_found cuda_candidates binaries); $(declare -f)"
    (cd "$work" && timeout --kill-after=5 "$limit" bash -c "$state; \"\$@\"" run_step "$@") >"$L/$name.log" 2>&1 </dev/null
  else
    (cd "$work" && timeout --kill-after=5 "$limit" "$@") >"$L/$name.log" 2>&1 </dev/null
  fi
  rc=$?
  end=$(date +%s.%N)
  seconds=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
  if ((rc == 0)); then status=ok; elif ((rc == 124 || rc == 137)); then status=timeout; else status=failed; fi
  [[ $status == ok ]] || failures=$((failures + 1))
  printf '%s\t%s\t%s\t%s\t%s\n' "$name" "$status" "$rc" "$seconds" "$limit" >>"$steps_tsv"
  echo "run.sh: $name: $status (exit $rc, ${seconds} s of ${limit} s)" >&2
}
# The kit's programs, with the kit's library path (and only they: python3 and the tools do not get it).
mkdir -p "$work/bin"
for b in "${binaries[@]}"; do
  { echo '#!/bin/sh'; printf 'LD_LIBRARY_PATH=%q exec %q "$@"\n' "$kit_ldlp" "$b"; } >"$work/bin/$(basename "$b")"
  chmod +x "$work/bin/$(basename "$b")"
done
zinf="$work/bin/zinf"

# The kit step: where every library of every program resolves, then each program starts.
check_kit() {
  local system_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv)\.so'
  local fallback_re='^lib(stdc\+\+|gcc_s|gomp)\.so'
  local bad=0 b line soname path
  echo "mode=$mode flavour=$flavour commit=$(manifest commit)"
  echo "the kit needs glibc >= $(manifest glibc_needed); this machine: $(ldd --version 2>&1 | head -1)"
  echo "LD_LIBRARY_PATH=$kit_ldlp"
  for soname in "${image_libs[@]}"; do echo "image library $soname: ${image_found[$soname]:-not found in ${cuda_candidates[*]}}"; done
  for b in "${binaries[@]}"; do
    echo "== ldd $(basename "$b")"
    while IFS= read -r line; do
      echo "$line"
      if [[ $line == *"not found"* ]]; then
        echo "MISSING: $line"
        bad=1
        continue
      fi
      [[ $line == *"=>"* ]] || continue
      soname=${line%% =>*}
      soname=${soname//[[:space:]]/}
      path=${line#*=> }
      path=${path% (*}
      [[ $soname =~ $system_re || $soname =~ $fallback_re || $path == "$K/lib/"* ]] && continue
      if [[ " ${image_libs[*]} " == *" $soname "* ]]; then continue; fi
      echo "OUTSIDE THE KIT: $soname => $path (pack.sh should have copied it)"
      bad=1
    done < <(env LD_LIBRARY_PATH="$kit_ldlp" ldd "$b" 2>&1)
  done
  LD_LIBRARY_PATH="$kit_ldlp" "$K/bin/zinf" --version || bad=1
  return $bad
}
gpu_info() {
  nvidia-smi || return 1
  nvidia-smi --query-gpu=name,memory.total,clocks.max.sm,clocks.max.memory,clocks.sm,clocks.mem,driver_version,power.limit \
    --format=csv | tee "$R/gpu.csv"
}
# PyTorch eager on gpt-1.3b-cuda.json's model, batch, seq, seed and lr, as `bench train --torch` runs it.
torch_eager() {
  "$pywrap" "$K/scripts/bench/torch_train.py" --layers 24 --hidden 2048 --heads 16 --vocab 50257 --seq 2048 \
    --batch 8 --steps 5 --warmup 2 --seed 1234 --lr 2e-4 --device cuda --dtype bf16 >"$R/torch-eager.json"
}

S="$K/scenarios"
run_step kit 10 any check_kit
run_step gpu-info 15 cuda gpu_info
run_step suite 35 cuda "$zinf" bench suite --device cuda --repeat 3 --no-fio --out "$R/suite"
run_step cuda-test 60 cuda "$work/bin/cuda_test" --durations yes
if [[ $mode == device ]]; then
  run_step bench-train 55 cuda "$zinf" bench train "$S/gpt-1.3b-cuda.json" --steps 5 --warmup 2 --repeat 2 \
    --format json --out "$R/bench-train.json"
else
  run_step bench-train 30 any "$zinf" bench train "$S/gpu-kit-rehearse-cpu.json" --steps 3 --warmup 1 --repeat 1 \
    --format json --out "$R/bench-train.json"
fi
run_step torch-eager 50 cuda torch_eager
run_step kernels-bench 35 cuda "$work/bin/cuda_kernels_bench" --benchmark_min_time=0.05 \
  --benchmark_out="$R/kernels-bench.json" --benchmark_out_format=json
if [[ $mode == device ]]; then
  run_step offload-cpu 150 cuda "$zinf" train "$S/gpu-offload-cpu.json" --steps 4 --record "$R/offload-cpu.json"
else
  run_step offload-cpu 30 any "$zinf" train "$S/gpu-kit-rehearse-cpu.json" --steps 4 --record "$R/offload-cpu.json"
fi
run_step fsdp2 55 cuda "$pywrap" "$K/scripts/gpu/fsdp2_offload.py" --layers 24 --hidden 2048 --heads 16 \
  --vocab 50257 --seq 2048 --batch 8 --steps 3 --warmup 1 --lr 2e-4 --weight-decay 0.1 --seed 1234 --out "$R/fsdp2.json"
# NVMe last, with what the budget has left (at most 180 s): the disk's speed is the least known.
if [[ $mode == device ]]; then
  rest=$((budget - (SECONDS - started)))
  # Under 30 s left: ask for 30, which the budget then refuses (no-time) rather than run uselessly.
  run_step offload-nvme $((rest > 180 ? 180 : rest < 30 ? 30 : rest)) cuda "$zinf" train "$S/gpu-offload-nvme.json" --steps 3 \
    --record "$R/offload-nvme.json"
else
  run_step offload-nvme 30 any "$zinf" train "$S/gpu-kit-rehearse-nvme.json" --steps 4 --record "$R/offload-nvme.json"
fi
rm -rf "$work/runs"  # the swap files: gigabytes, not results
if [[ $faults == 1 ]]; then
  run_step fault-exit 10 any bash -c 'echo "failing on purpose"; exit 3'
  run_step fault-timeout 1 any sleep 30
fi

# --- results ------------------------------------------------------------------------------------
cp "$steps_tsv" "$out/steps.tsv"
if [[ -z "$python" ]] || ! "$python" "$K/scripts/gpu/summarize.py" --mode "$mode" --manifest "$K/manifest.txt" \
  --steps "$steps_tsv" --results "$R" --out "$out" >"$L/summarize.log" 2>&1; then
  { echo "# zinf GPU run ($mode): summarize.py did not run; the step table"; echo; cat "$steps_tsv"; } >"$out/summary.md"
  cat "$L/summarize.log" >&2 2>/dev/null
  failures=$((failures + 1))
fi
tar -czf "$out/logs.tar.gz" -C "$work" logs results steps.tsv
cat "$out/summary.md"
((failures == 0))
