#!/usr/bin/env bash
# Installs every Debian/Ubuntu package that building zinf and running its tests and benchmarks need,
# then the project venv (.venv at the repository root, git-ignored): the real PyPI torch, transformers,
# accelerate, safetensors and DeepSpeed at the exact versions in scripts/requirements-peers.txt, which
# tests/cli/deepspeed_truth_test.py and the comparisons of issue 25 run. ZINF_PEERS=0 skips the venv.
# Idempotent: when all packages and pins are already installed it changes nothing, needs no network
# and returns at once. Runs as root (CI) or through sudo. Does not install the CUDA toolkit: the
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
  chromium-headless-shell  # Debian's Chromium, headless only: tests/cli report_render_test.py lays out every report kind
  python3             # CLI end-to-end tests
  python3-torch       # PyTorch baselines: scripts/bench/torch_adam.py, scripts/fixtures/make_adam_fixture.py
  python3-venv        # the project venv below
  python3-dev         # Python.h for the DeepSpeed ops the venv JIT-builds (ninja, on first use)
  libaio-dev          # DeepSpeed's async_io op (its NVMe swapping), JIT-built on first use
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

# The project venv. Debian's /usr/bin/python3 makes it (not the first python3 on PATH): it is the
# interpreter this script installs, on every Debian machine, and the one python3-dev's headers match
# for DeepSpeed's JIT-built ops.
[[ "${ZINF_PEERS:-1}" == 0 ]] && { log "ZINF_PEERS=0: project venv skipped"; exit 0; }
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/.venv"
requirements="$root/scripts/requirements-peers.txt"
# Exit 0 when every pin in the requirements file is what the venv holds (package metadata only: no
# import, well under a second).
pins_installed() {
  [[ -x "$venv/bin/python" ]] && "$venv/bin/python" - "$requirements" <<'PY'
import importlib.metadata, re, sys
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    name, version = line.split("==")
    try:
        if importlib.metadata.version(name) != version:
            sys.exit(1)
    except importlib.metadata.PackageNotFoundError:
        sys.exit(1)
PY
}
if pins_installed; then
  log "project venv $venv: all $(grep -c '==' "$requirements") pins installed"
else
  log "project venv $venv: installing scripts/requirements-peers.txt (several GB: torch bundles CUDA)"
  [[ -x "$venv/bin/python" ]] || /usr/bin/python3 -m venv "$venv" || die "/usr/bin/python3 -m venv $venv failed"
  pip=("$venv/bin/python" -m pip install --no-input --disable-pip-version-check)
  "${pip[@]}" -r <(grep -v '^deepspeed==' "$requirements") || die "pip install -r $requirements failed (exit $?)"
  # DeepSpeed's setup.py imports torch, so it builds against the venv's torch (no build isolation).
  # DS_BUILD_OPS=0: no op is compiled now; DeepSpeed JIT-builds each one the first time it is used.
  DS_BUILD_OPS=0 "${pip[@]}" --no-build-isolation --no-deps "$(grep '^deepspeed==' "$requirements")" \
    || die "pip install deepspeed failed (exit $?)"
  pins_installed || die "$venv does not hold the pins of $requirements after installing them"
  log "project venv $venv: installed"
fi

# DeepSpeed JIT-builds its C++ ops the first time a process loads them (minutes each on 2 cores), and
# every other process that wants the op waits silently on the build's lock meanwhile. Build the two the
# peer benches use (cpu_adam: DeepSpeedCPUAdam and its offload engine; async_io: its NVMe handle) here,
# once, so a test or a bench never pays for it. Idempotent: skipped when both are built from THIS venv's
# sources — torch rebuilds an op whose build.ninja names other source paths (another clone's venv).
ext_dir="${TORCH_EXTENSIONS_DIR:-$HOME/.cache/torch_extensions}"
built_here() {  # $1: op name
  local ninja
  for ninja in "$ext_dir"/py*/"$1"/build.ninja; do
    [[ -f "$ninja" && -f "${ninja%/build.ninja}/$1.so" ]] && grep -qF "$venv/lib/" "$ninja" && return 0
  done
  return 1
}
if built_here cpu_adam && built_here async_io; then
  log "DeepSpeed ops cpu_adam and async_io: built ($ext_dir)"
else
  log "DeepSpeed ops cpu_adam and async_io: building into $ext_dir (a few minutes, once)"
  started=$SECONDS
  DS_ACCELERATOR=cpu "$venv/bin/python" -c '
from deepspeed.ops.op_builder import AsyncIOBuilder, CPUAdamBuilder
CPUAdamBuilder().load(verbose=False)
AsyncIOBuilder().load(verbose=False)
' || die "building DeepSpeed's cpu_adam/async_io ops failed (exit $?); ninja, python3-dev and libaio-dev are needed"
  log "DeepSpeed ops built in $((SECONDS - started)) s"
fi
