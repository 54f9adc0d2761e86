#!/usr/bin/env bash
# Runs zinf's fuzz targets (tests/fuzz) for as long as asked, with AddressSanitizer and UBSan.
#
#   scripts/fuzz.sh [--runs N | --seconds S] [--build DIR] [target ...]
#
# With Clang (Debian: clang, libclang-rt-dev or clang's own compiler-rt) the targets are built with
# libFuzzer (coverage-guided, ZINF_FUZZ_ENGINE=libfuzzer) in build/fuzz; without it, with the
# deterministic mutation driver (tests/fuzz/fuzz_driver.cpp) in build/fuzz-driver. Each target
# starts from its checked-in seeds (tests/fuzz/corpus/<target>) and keeps what it finds in
# <build>/work/<target>, never in the seeds. A crash or broken invariant stops that target and
# leaves its input in <build>/work (libFuzzer: crash-*; driver: fuzz-crash-<target>).
# Default: 1,000,000 inputs per target. Targets: sizes scenario hardware_profile hf_config
# token_file checkpoint cli_plan (default: all).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

runs=1000000
seconds=""
build=""
targets=()
while (($#)); do
  case "$1" in
    --runs) runs="$2"; shift 2 ;;
    --seconds) seconds="$2"; shift 2 ;;
    --build) build="$2"; shift 2 ;;
    -h|--help) sed -n '2,14p' "$0"; exit 0 ;;
    -*) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) targets+=("$1"); shift ;;
  esac
done
((${#targets[@]})) || targets=(sizes scenario hardware_profile hf_config token_file checkpoint cli_plan)

engine=driver
if command -v clang++ >/dev/null 2>&1 && echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' |
    clang++ -x c++ -fsanitize=fuzzer - -o /dev/null >/dev/null 2>&1; then
  engine=libfuzzer
fi
if [[ -z "$build" ]]; then
  build=build/fuzz
  [[ "$engine" == driver ]] && build=build/fuzz-driver
fi

configure=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DZINF_FUZZ_ENGINE="$engine"
           -DZINF_SANITIZE=address,undefined -DZINF_WITH_CUDA=OFF -DZINF_WITH_MPI=OFF -DZINF_BUILD_BENCHMARKS=OFF)
if [[ "$engine" == libfuzzer ]]; then
  # Clang sees warnings GCC does not; the fuzz build is not where they are fixed.
  configure+=(-DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ -DZINF_WARNINGS_AS_ERRORS=OFF)
fi
echo "fuzz.sh: engine $engine, build $build"
cmake "${configure[@]}" >/dev/null
cmake --build "$build" --target zinf_fuzzers

export ASAN_OPTIONS="${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}"
root=$(pwd)
[[ "$build" = /* ]] || build="$root/$build"
status=0
for target in "${targets[@]}"; do
  work="$build/work/$target"
  mkdir -p "$work"
  if [[ "$engine" == libfuzzer ]]; then
    limit=(-runs="$runs")
    [[ -n "$seconds" ]] && limit=(-max_total_time="$seconds")
    args=("${limit[@]}" -max_len=65536 -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$work/")
  else
    args=(-runs="$runs" -seed="${FUZZ_SEED:-1}" -max_len=65536)
  fi
  echo "fuzz.sh: $target ${args[*]}"
  # In the work directory: the driver leaves a failing input there as fuzz-crash-<target>.
  if ! (cd "$work" && "$build/fuzz/${target}_fuzz" "${args[@]}" "$work" "$root/tests/fuzz/corpus/$target"); then
    echo "fuzz.sh: $target FAILED (input kept in $work)" >&2
    status=1
  fi
done
exit $status
