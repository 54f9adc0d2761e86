#!/usr/bin/env bash
# pack.sh: builds the GPU kit here (a machine without a GPU) for one run on a bare CUDA 13 machine
# (issue 28). The kit is one folder, gpu-kit/ in the repository root (git-ignored), holding
#   kit.tar.gz    bin/ (zinf, cuda_test, cuda_kernels_bench), lib/ (every shared library ldd lists
#                 that the device image is not known to have), lib/fallback/<soname>/ (libstdc++,
#                 libgcc_s, libgomp: used there only when the image's own are missing or too old),
#                 scenarios/ and scripts/ the run needs, manifest.txt
#   manifest.txt  a copy of the manifest, readable without unpacking
# scripts/gpu/run.sh unpacks it on the device (and here, for --rehearse) and runs from it.
#
# The CUDA libraries (libcudart, libcublasLt, libnccl) are NOT packed: they are hundreds of MiB and
# the device image has CUDA 13 (toolkit and PyTorch's nvidia-* wheels); run.sh finds them there.
# libcuda comes from the driver and is never packed. glibc (libc, libm, libpthread, libdl, librt,
# the loader) must match the image's loader, so it is never packed either.
#
# Usage: scripts/gpu/pack.sh [--cpu] [--from BUILD_DIR] [--kit DIR] [--jobs N]
#   (none)         configure + build build/gpu-kit: Release, CUDA sm_90, MPI off, tests and benchmarks
#                  on; build only zinf, cuda_test, cuda_kernels_bench; pack all three.
#   --cpu          the rehearsal flavour: configure + build build/gpu-kit-cpu with ZINF_WITH_CUDA=OFF
#                  (target zinf); the CUDA binaries are left out (run.sh --rehearse skips their steps).
#   --from DIR     no configure/build: take the binaries from an existing build directory (DIR/bin/zinf,
#                  DIR/tests/cuda_test, DIR/bench/cuda_kernels_bench). With --cpu only zinf is needed.
#   --kit DIR      where the kit goes (default: <repo>/gpu-kit). Its contents are replaced.
# Exit status: 0 packed; 1 a build, a missing binary or library, or the kit over 60 MiB; 2 bad usage.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
flavour=cuda
from=""
kit="$repo/gpu-kit"
jobs=2
readonly max_kit_bytes=$((60 * 1024 * 1024))
# What travels to the device is the working tree plus the carried kit, 64 MiB in all.
readonly max_travel_bytes=$((64 * 1024 * 1024))

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --cpu) flavour=cpu ;;
    --from) from=${2:?--from needs a build directory}; shift ;;
    --kit) kit=${2:?--kit needs a directory}; shift ;;
    --jobs) jobs=${2:?--jobs needs a number}; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "pack.sh: unknown argument '$1'; allowed: --cpu, --from DIR, --kit DIR, --jobs N" >&2; exit 2 ;;
  esac
  shift
done

if [[ -z "$from" ]]; then
  if [[ $flavour == cuda ]]; then
    from="$repo/build/gpu-kit"
    cuda_flags=(-DZINF_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
    targets=(zinf cuda_test cuda_kernels_bench)
  else
    from="$repo/build/gpu-kit-cpu"
    cuda_flags=(-DZINF_WITH_CUDA=OFF)
    targets=(zinf)
  fi
  echo "pack.sh: configuring $from ($flavour)" >&2
  cmake -S "$repo" -B "$from" -G Ninja -DCMAKE_BUILD_TYPE=Release -DZINF_WITH_MPI=OFF \
    -DZINF_BUILD_TESTS=ON -DZINF_BUILD_BENCHMARKS=ON -DCMAKE_CXX_COMPILER_LAUNCHER=ccache "${cuda_flags[@]}" >&2
  echo "pack.sh: building ${targets[*]}" >&2
  nice -n 10 cmake --build "$from" -j "$jobs" --target "${targets[@]}" >&2
fi
from=$(cd "$from" && pwd)

binaries=("$from/bin/zinf")
if [[ $flavour == cuda ]]; then
  binaries+=("$from/tests/cuda_test" "$from/bench/cuda_kernels_bench")
fi
for b in "${binaries[@]}"; do
  [[ -x "$b" ]] || { echo "pack.sh: $b is missing; build it first (or drop --from)" >&2; exit 1; }
done

stage=$(mktemp -d "${TMPDIR:-/tmp}/zinf-kit.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root="$stage/kit"
mkdir -p "$root/bin" "$root/lib/fallback" "$root/scenarios" "$root/scripts/bench" "$root/scripts/gpu"
for b in "${binaries[@]}"; do
  strip --strip-unneeded -o "$root/bin/$(basename "$b")" "$b"
done

# Classify every library of the closure (ldd lists it transitively). The patterns are sonames.
system_re='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libpthread|libdl|librt|libutil|libresolv)\.so'
image_re='^lib(cuda|cudart|cublas|cublasLt|nccl|nvrtc|nvJitLink|nvidia-[a-z-]+)\.so'
fallback_re='^lib(stdc\+\+|gcc_s|gomp)\.so'
image_libs=()
declare -A seen=()
for b in "${binaries[@]}"; do
  while read -r line; do
    [[ $line == *"=>"* ]] || continue
    soname=${line%% =>*}
    path=${line#*=> }
    path=${path% (*}
    [[ -n "${seen[$soname]:-}" ]] && continue
    seen[$soname]=1
    if [[ $path == "not found" ]]; then
      echo "pack.sh: $(basename "$b") needs $soname, which ldd does not find here" >&2
      exit 1
    elif [[ $soname =~ $system_re ]]; then
      continue
    elif [[ $soname =~ $image_re ]]; then
      image_libs+=("$soname")
    elif [[ $soname =~ $fallback_re ]]; then
      mkdir -p "$root/lib/fallback/$soname"
      cp -L "$path" "$root/lib/fallback/$soname/$soname"
    else
      cp -L "$path" "$root/lib/$soname"
    fi
  done < <(ldd "$b")
done

for s in gpt-1.3b-cuda gpu-offload-cpu gpu-offload-nvme gpu-kit-rehearse-cpu gpu-kit-rehearse-nvme; do
  cp "$repo/scenarios/$s.json" "$root/scenarios/"
done
cp "$repo/scripts/torch_gpt.py" "$root/scripts/"
cp "$repo/scripts/bench/torch_train.py" "$root/scripts/bench/"
cp "$repo/scripts/gpu/fsdp2_offload.py" "$repo/scripts/gpu/summarize.py" "$root/scripts/gpu/"

commit=$(git -C "$repo" rev-parse HEAD 2>/dev/null || echo unknown)
if [[ -n "$(git -C "$repo" status --porcelain --untracked-files=no 2>/dev/null)" ]]; then commit="$commit+dirty"; fi
{
  echo "flavour=$flavour"
  echo "commit=$commit"
  echo "packed=$(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "build_dir=$from"
  echo "binaries=$(cd "$root/bin" && echo *)"
  echo "image_libs=${image_libs[*]:-}"
  echo "cuda=$( (nvcc --version 2>/dev/null || true) | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
  # The newest glibc symbol version anything in the kit needs: the device image's glibc must have it.
  echo "glibc_needed=$(find "$root/bin" "$root/lib" -type f -exec objdump -T {} + 2>/dev/null |
    grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -V | tail -1)"
} >"$root/manifest.txt"
(cd "$root" && find . -type f | sort | xargs -d '\n' du -b) >"$stage/files.txt"
mv "$stage/files.txt" "$root/files.txt"

unpacked=$(du -sb "$root" | cut -f1)
rm -rf "$kit"
mkdir -p "$kit"
tar -C "$root" -czf "$kit/kit.tar.gz" .
cp "$root/manifest.txt" "$kit/manifest.txt"
size=$(du -sb "$kit" | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "kit: $kit ($flavour): $(mib "$size") ($(mib "$unpacked") unpacked), limit $(mib $max_kit_bytes)"
cat "$root/files.txt"
if ((size > max_kit_bytes)); then
  echo "pack.sh: the kit is $(mib "$size"), over the $(mib $max_kit_bytes) limit" >&2
  exit 1
fi
tree=$(git -C "$repo" ls-files -z 2>/dev/null | (cd "$repo" && xargs -0 du -cb 2>/dev/null) | tail -1 | cut -f1)
if ((${tree:-0} + size > max_travel_bytes)); then
  echo "pack.sh: the tracked tree ($(mib "${tree:-0}")) and the kit together are over the device's $(mib $max_travel_bytes)" >&2
  exit 1
fi
rel=${kit#"$repo"/}
if [[ $rel == /* ]]; then
  echo "note: $kit is outside the repository; the device run carries only paths inside it (use the default --kit)"
fi
cat <<EOF
device run (the run tool, from the repository root; nothing to install there):
  command: bash scripts/gpu/run.sh --kit $rel --out "\$OUT"
  carry:   ["$rel"]
  timeout_s: 590
rehearsal here: scripts/gpu/run.sh --rehearse --kit $rel --out /tmp/gpu-rehearsal
EOF
