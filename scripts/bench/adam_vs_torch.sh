#!/usr/bin/env bash
# CPU AdamW, zinf vs PyTorch, in one run on this machine with the same thread count:
#   adam_bench (BM_MemoryBandwidth and BM_AdamW_f32grad at 16M and 64M parameters, 5 repetitions,
#   medians) and scripts/bench/torch_adam.py (torch.optim.AdamW(foreach=True), median of 7 steps),
# then one table: params/s and GB/s of each, the memory-bandwidth bound (a triad on the step's own
# arrays, interleaved with the steps), zinf's fraction of it, and zinf/PyTorch.
#
# Usage: scripts/bench/adam_vs_torch.sh [BUILD_DIR]     (default build/default; needs bench/adam_bench)
# Environment: OMP_NUM_THREADS (default: every CPU), PYTHON (default: the first python3 that imports
# torch, trying python3 then /usr/bin/python3), ZINF_KERNELS_ISA (cap zinf's instruction set).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

build_dir=${1:-build/default}
bench=$build_dir/bench/adam_bench
[[ -x $bench ]] || { echo "adam_vs_torch: $bench not found; build it: cmake --build $build_dir --target adam_bench" >&2; exit 2; }

python=${PYTHON:-}
if [[ -z $python ]]; then
  for candidate in python3 /usr/bin/python3; do
    if command -v "$candidate" >/dev/null 2>&1 && "$candidate" -c 'import torch' >/dev/null 2>&1; then
      python=$candidate
      break
    fi
  done
fi
[[ -n $python ]] || { echo "adam_vs_torch: no python3 with torch found (Debian: apt-get install python3-torch, or set PYTHON)" >&2; exit 2; }

threads=${OMP_NUM_THREADS:-$(nproc)}
export OMP_NUM_THREADS=$threads
sizes="16777216,67108864"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "adam_vs_torch: threads=$threads; running adam_bench (this takes a minute)..." >&2
"$bench" --benchmark_filter='BM_MemoryBandwidth|BM_AdamW_f32grad/params:(16777216|67108864)/copy:0' \
  --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
  --benchmark_format=json --benchmark_out="$work/zinf.json" --benchmark_out_format=json >/dev/null
echo "adam_vs_torch: running scripts/bench/torch_adam.py..." >&2
"$python" scripts/bench/torch_adam.py --sizes "$sizes" --threads "$threads" --json >"$work/torch.json"

"$python" - "$work/zinf.json" "$work/torch.json" <<'PY'
import json, re, sys
zinf = json.load(open(sys.argv[1]))
torch = json.load(open(sys.argv[2]))
medians = [b for b in zinf["benchmarks"] if b.get("aggregate_name") == "median"]
probe = next(b["bytes_per_second"] for b in medians if b["run_name"].startswith("BM_MemoryBandwidth"))
torch_by_size = {r["params"]: r for r in torch["results"]}
ctx = zinf["context"]
print(f"CPU AdamW, fp32 params/m/v/grad, 28 B/param; threads={torch['threads']}; "
      f"{ctx.get('num_cpus', '?')} CPUs; torch {torch['torch_version']} AdamW(foreach=True); medians of 5 (zinf) / 7 (torch)")
print(f"memory-bandwidth probe alone (in-place triad a[i] += s*b[i], 2 x 256 MiB): {probe / 1e9:.2f} GB/s")
print("bound = the same triad run after every zinf step on the step's own arrays")
print(f"{'params':>10} | {'zinf Mparam/s':>13} {'zinf GB/s':>9} {'bound GB/s':>10} {'of bound':>8} | "
      f"{'torch Mparam/s':>14} {'torch GB/s':>10} | {'zinf/torch':>10}")
for b in medians:
    m = re.match(r"BM_AdamW_f32grad/params:(\d+)/copy:0", b["run_name"])
    if not m:
        continue
    n = int(m.group(1))
    t = torch_by_size[n]
    zp = b["params_per_second"]
    print(f"{n:>10} | {zp / 1e6:>13.1f} {b['bytes_per_second'] / 1e9:>9.2f} {b['bound_bytes_per_second'] / 1e9:>10.2f} "
          f"{b['fraction_of_bandwidth']:>8.2f} | {t['params_per_second'] / 1e6:>14.1f} {t['bytes_per_second'] / 1e9:>10.2f} | "
          f"{zp / t['params_per_second']:>10.2f}")
PY
