#!/usr/bin/env bash
# Installs every Debian/Ubuntu package that building zinf and running its tests and benchmarks need.
# Idempotent: when all packages are already installed it changes nothing, needs no network and
# returns at once. Runs as root (CI) or through sudo. Does not install the CUDA toolkit: the
# build finds it at /usr/local/cuda (or on PATH) when present and builds without it otherwise.
set -euo pipefail

packages=(
  build-essential     # g++, make, libc headers
  cmake               # >= 3.25 (CMakePresets.json version 6)
  ninja-build         # the presets' generator
  pkg-config
  git                 # the build records the git SHA
  liburing-dev        # NVMe tier: io_uring engine
  libcli11-dev        # CLI option parsing
  libfmt-dev
  nlohmann-json3-dev
  catch2              # unit tests
  libbenchmark-dev    # micro-benchmarks
  libopenblas-dev     # CPU GEMM
  libopenblas-openmp-dev  # its OpenMP build, which shares the kernels' thread pool (kernels/CMakeLists.txt)
  libopenmpi-dev      # MPI launch and CPU collectives (also pulls in mpirun)
  fio                 # NVMe baseline for benchmarks
  clang-format        # scripts/check-format.sh (Debian bookworm: 14), run by .ci/run
  chromium-headless-shell  # tests/cli: zinf report pages rendered and screenshotted headless
  python3             # CLI end-to-end tests
  python3-torch       # PyTorch baselines: scripts/bench/torch_adam.py, scripts/fixtures/make_adam_fixture.py
)

log() { printf 'install-deps: %s\n' "$*"; }
die() { printf 'install-deps: error: %s\n' "$*" >&2; exit 1; }

command -v dpkg-query >/dev/null 2>&1 || die "dpkg-query not found; this script supports Debian/Ubuntu only (install the packages listed in ${BASH_SOURCE[0]} by hand)"

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "installed" ]] || missing+=("$pkg")
done

if ((${#missing[@]} == 0)); then
  log "all ${#packages[@]} packages already installed"
else
  log "installing ${#missing[@]} missing package(s): ${missing[*]}"
  if [[ $(id -u) -eq 0 ]]; then
    as_root=()
  elif command -v sudo >/dev/null 2>&1; then
    as_root=(sudo)
  else
    die "not root and sudo is not available; run as root: apt-get install ${missing[*]}"
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq \
    || die "apt-get update failed (exit $?); check network access and /etc/apt/sources.list"
  "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
    || die "apt-get install failed (exit $?) for: ${missing[*]}"
  log "installed: ${missing[*]}"
fi

nvcc_path=$(command -v nvcc 2>/dev/null || true)
if [[ -z "$nvcc_path" && -x /usr/local/cuda/bin/nvcc ]]; then
  nvcc_path=/usr/local/cuda/bin/nvcc
fi
if [[ -n "$nvcc_path" ]]; then
  nvcc_version=$("$nvcc_path" --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | head -n1)
  log "nvcc found: $nvcc_path (CUDA ${nvcc_version:-unknown version}); ZINF_WITH_CUDA=AUTO turns CUDA on"
else
  log "nvcc not found: ZINF_WITH_CUDA=AUTO builds the CPU backend only"
fi
