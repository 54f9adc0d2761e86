#!/usr/bin/env bash
# watch-train.sh: runs one `zinf train` of the GPU kit under a time limit and shows where it spends
# its time when it makes no progress: every output line time-stamped, and at the given offsets
# a per-thread CPU snapshot (top -H), the process's memory, and every thread's stack (cuda-gdb
# attached for a moment; the image has no gdb). Run after scripts/gpu/run.sh has unpacked the kit
# into runs/gpu-kit (e.g. with --only cuda-test).
#
# Usage: scripts/gpu/watch-train.sh SCENARIO LIMIT_S "OFFSET_S..." OUT_DIR [zinf train args...]
#   The zinf binary is gpu-kit/zinf-unstripped.gz when present (symbols for the stacks), else the kit's.
set -uo pipefail
scenario=$1 limit=$2 offsets=$3 out=$4
shift 4
work=runs/gpu-kit
ldlp=$(sed -n 's/^LD_LIBRARY_PATH=\(.*\) exec .*/\1/p' "$work/bin/zinf")
zinf="$work/kit/bin/zinf"
if [[ -f gpu-kit/zinf-unstripped.gz ]]; then
  gunzip -c gpu-kit/zinf-unstripped.gz >"$work/zinf-unstripped" && chmod +x "$work/zinf-unstripped" && zinf="$work/zinf-unstripped"
fi
name=$(basename "$scenario" .json)
mkdir -p "$out"
log="$out/$name.log"
SECONDS=0
start=${EPOCHREALTIME/,/.}
# Each line with the seconds since the start (bash's clock: the image may lack bc).
stamp() { while IFS= read -r line; do printf '%s %s\n' "$(awk -v a="$start" -v b="${EPOCHREALTIME/,/.}" 'BEGIN { printf "%7.1f", b - a }')" "$line"; done; }
LD_LIBRARY_PATH=$ldlp "$zinf" train "$scenario" "$@" > >(stamp >"$log") 2>&1 &
pid=$!
for t in $offsets; do
  while ((SECONDS < t)); do
    kill -0 "$pid" 2>/dev/null || break 2
    sleep 0.5
  done
  kill -0 "$pid" 2>/dev/null || break
  snap="$out/$name-at-$t.txt"
  {
    echo "== t=$t s"; grep -E 'VmRSS|VmHWM|Threads' "/proc/$pid/status"; grep -E 'MemFree|MemAvailable|Dirty|Writeback' /proc/meminfo
    top -b -H -n 1 -p "$pid" | head -30
    nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv
    timeout 40 cuda-gdb -p "$pid" -batch -ex 'set pagination off' -ex 'thread apply all bt 12' 2>&1 | grep -v '^\[New\|^$' | head -300
  } >"$snap" 2>&1
done
while kill -0 "$pid" 2>/dev/null; do
  ((SECONDS < limit)) || { kill "$pid"; sleep 2; kill -9 "$pid" 2>/dev/null; echo "stopped at the ${limit} s limit" >>"$out/$name.status"; break; }
  sleep 0.5
done
wait "$pid"; echo "exit $?" >>"$out/$name.status"
sleep 0.5
tail -5 "$log"
