#!/usr/bin/env bash
# Times README command 1 (install-deps, configure, build the zinf binary, plan 1T on a DGX-2) on a
# fresh clone with a cold compiler cache (CCACHE_DISABLE=1), once with CUDA off and once with CUDA
# detected (when nvcc is found), and prints two tables: wall seconds per phase, and CPU seconds
# (user + sys of the phase and every process it waited for) per phase with the 2-core wall they
# imply (CPU / 2: what a quiet 2-core machine needs at best), and the load average around each run.
# Wall time only means something on a quiet machine (load < 1.5 before the run, which the output
# says); the CPU seconds hardly depend on the load.
#
# Usage: scripts/measure-command1.sh [--jobs N] [--variants "cpu cuda"] [--keep] [--with-venv] [--per-file]
#   --jobs N        build parallelism (default: nproc, as `cmake --build --preset zinf` uses)
#   --variants L    which runs, any of: cpu (-DZINF_WITH_CUDA=OFF), cuda (CUDA detected: AUTO)
#   --keep          keep the temporary clones (printed) instead of removing them
#   --per-file      also time each compiler process (a compiler launcher that runs GNU time; it
#                   replaces ccache, which the cold measurement disables anyway) and print the ten
#                   largest CPU figures of each run; the full list is per-file.txt beside the logs
#   --with-venv     link this checkout's .venv into each clone, so install-deps checks the project
#                   venv as the README's command runs it; DeepSpeed's ops are then built for the
#                   clone into a temporary TORCH_EXTENSIONS_DIR (timed in the install-deps phase).
#                   Without it, install-deps runs with ZINF_PEERS=0: a fresh clone has no venv, and
#                   installing one (several GB) is not what command 1 is measured for.
# The clone is of this checkout's HEAD (commit it first); nothing outside the temporary directory
# is written. Exit status: 0 when every run finished, 1 when a phase failed (its log is printed).
set -euo pipefail

die() { printf 'measure-command1: %s\n' "$*" >&2; exit 2; }

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
jobs=$(nproc)
variants="cpu cuda"
keep=0
with_venv=0
per_file=0
while (($#)); do
  case "$1" in
    --jobs) [[ "${2:-}" =~ ^[1-9][0-9]*$ ]] || die "--jobs: '${2:-}' is not a positive integer"; jobs=$2; shift 2 ;;
    --variants) variants=${2:-}; shift 2 ;;
    --keep) keep=1; shift ;;
    --with-venv) with_venv=1; shift ;;
    --per-file) per_file=1; shift ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$1' (allowed: --jobs N, --variants \"cpu cuda\", --keep, --with-venv, --per-file)" ;;
  esac
done
for v in $variants; do
  [[ "$v" == cpu || "$v" == cuda ]] || die "--variants: '$v' is not one of: cpu, cuda"
done
[[ -z "$(git -C "$root" status --porcelain --untracked-files=no)" ]] ||
  printf 'measure-command1: note: uncommitted changes in %s are not in the clone (HEAD is measured)\n' "$root" >&2
if ((with_venv)) && [[ ! -x "$root/.venv/bin/python" ]]; then
  die "--with-venv: $root/.venv has no python; run scripts/install-deps.sh first"
fi

nvcc_found=0
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then nvcc_found=1; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/zinf-command1.XXXXXX")
((keep)) || trap 'rm -rf "$work"' EXIT
export CCACHE_DISABLE=1
commit=$(git -C "$root" rev-parse --short=12 HEAD)
loadavg() { cut -d' ' -f1 /proc/loadavg; }
now() { date +%s.%N; }
elapsed() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

rows=()
cpu_rows=()
per_file_tops=()
# run_phase <name> <log> <command...>: runs the command under GNU time; records its wall seconds in
# $phase_s and the user + sys seconds of it and every process it waited for in $phase_cpu.
run_phase() {
  local name=$1 log=$2 t0
  shift 2
  t0=$(now)
  if ! /usr/bin/time -o "$log.cpu" -f '%U %S' "$@" >"$log" 2>&1; then
    printf 'measure-command1: phase %s failed; last lines of %s:\n' "$name" "$log" >&2
    tail -n 30 "$log" >&2
    exit 1
  fi
  phase_s=$(elapsed "$t0" "$(now)")
  phase_cpu=$(awk 'END { printf "%.1f", $1 + $2 }' "$log.cpu")
}
half() { awk -v a="$1" 'BEGIN { printf "%.0f", a / 2 }'; }

for v in $variants; do
  if [[ "$v" == cuda && $nvcc_found == 0 ]]; then
    rows+=("$(printf '%-5s | %s' cuda 'skipped: nvcc not found')")
    continue
  fi
  clone="$work/$v/zinf"
  mkdir -p "$work/$v"
  git clone --quiet --no-hardlinks "$root" "$clone"
  cuda_flag=()
  [[ "$v" == cpu ]] && cuda_flag=(-DZINF_WITH_CUDA=OFF)
  if ((per_file)); then
    # a launcher that appends "user sys wall object" of every compile to $ZINF_PER_FILE_LOG
    cat >"$work/$v/timed-compile.sh" <<'EOF_LAUNCHER'
#!/usr/bin/env bash
out=?; prev=
for a in "$@"; do [[ $prev == -o ]] && out=$a; prev=$a; done
exec /usr/bin/time -a -o "$ZINF_PER_FILE_LOG" -f "%U %S %e $out" "$@"
EOF_LAUNCHER
    export ZINF_PER_FILE_LOG="$work/$v/per-file.log"
    chmod +x "$work/$v/timed-compile.sh"
    cuda_flag+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$work/$v/timed-compile.sh"
      -DCMAKE_CUDA_COMPILER_LAUNCHER="$work/$v/timed-compile.sh")
  fi
  load0=$(loadavg)
  if ((with_venv)); then
    ln -s "$root/.venv" "$clone/.venv"
    run_phase install-deps "$work/$v/install.log" env TORCH_EXTENSIONS_DIR="$work/$v/torch_extensions" \
      "$clone/scripts/install-deps.sh"
  else
    run_phase install-deps "$work/$v/install.log" env ZINF_PEERS=0 "$clone/scripts/install-deps.sh"
  fi
  t_install=$phase_s
  c_install=$phase_cpu
  cd "$clone"
  run_phase configure "$work/$v/configure.log" cmake --preset default "${cuda_flag[@]}"
  t_configure=$phase_s
  c_configure=$phase_cpu
  # GNU time reports the user and sys seconds of cmake and every compiler it waited for.
  run_phase build "$work/$v/build.log" cmake --build --preset zinf -j "$jobs"
  t_build=$phase_s
  c_build=$phase_cpu
  run_phase plan "$work/$v/plan.log" build/default/bin/zinf plan --params 1T --hw dgx2-v100
  t_plan=$phase_s
  c_plan=$phase_cpu
  cd "$root"
  steps=$(grep -c '^\[[0-9]*/[0-9]*\]' "$work/$v/build.log" || true)
  total=$(awk -v a="$t_install" -v b="$t_configure" -v c="$t_build" -v d="$t_plan" 'BEGIN { printf "%.1f", a + b + c + d }')
  rows+=("$(printf '%-5s | %12s | %9s | %7s | %5s | %7s | %5s | %s -> %s' "$v" "$t_install" "$t_configure" \
    "$t_build" "$t_plan" "$total" "$steps" "$load0" "$(loadavg)")")
  c_total=$(awk -v a="$c_install" -v b="$c_configure" -v c="$c_build" -v d="$c_plan" 'BEGIN { printf "%.1f", a + b + c + d }')
  cpu_rows+=("$(printf '%-5s | %12s | %9s | %7s | %5s | %7s | %s' "$v" "$c_install" "$c_configure" "$c_build" "$c_plan" \
    "$c_total" "$(half "$c_total")")")
  if ((per_file)); then
    awk '$1 ~ /^[0-9.]+$/ && $4 !~ /cmTC_/ { printf "%7.1f  %s\n", $1 + $2, $4 }' "$work/$v/per-file.log" | sort -rn >"$work/$v/per-file.txt"
    per_file_tops+=("$v: the ten largest compiles, CPU s (all: $work/$v/per-file.txt; kept with --keep)")
    while IFS= read -r line; do per_file_tops+=("  $line"); done < <(head -n 10 "$work/$v/per-file.txt")
    # the same compiles summed per target (its CMakeFiles/<target>.dir), the figures docs/build.md tabulates
    per_file_tops+=("$v: CPU s per target (compiles, sum)")
    while IFS= read -r line; do per_file_tops+=("  $line"); done < <(awk '{
        t = $2; sub(/\.dir\/.*/, "", t); sub(/.*CMakeFiles\//, "", t); n[t]++; c[t] += $1; all += $1
      } END {
        for (t in c) printf "%7.1f  %-28s %3d\n", c[t], t, n[t]
        printf "%7.1f  %-28s %3d\n", all, "(all)", NR
      }' "$work/$v/per-file.txt" | sort -rn)
  fi
done

printf '\nREADME command 1 on a fresh clone of %s, cold cache (CCACHE_DISABLE=1), -j %s\n' "$commit" "$jobs"
printf 'machine: %s cores (%s), %s; ISA: %s\n' "$(nproc)" \
  "$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n1)" \
  "$(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo)" \
  "$(grep -o 'avx512[a-z]*\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
printf '\nwall seconds (meaningful only when the load before the run is below 1.5)\n'
printf '%-5s | %12s | %9s | %7s | %5s | %7s | %5s | %s\n' variant 'install-deps' configure build plan 'total s' \
  steps 'load before -> after'
printf '%s\n' "${rows[@]}"
if ((${#cpu_rows[@]})); then
  printf '\nCPU seconds (user + sys) and the 2-core wall they imply (CPU / 2)\n'
  printf '%-5s | %12s | %9s | %7s | %5s | %7s | %s\n' variant 'install-deps' configure build plan 'total' 'total / 2'
  printf '%s\n' "${cpu_rows[@]}"
fi
((per_file)) && printf '\n' && printf '%s\n' "${per_file_tops[@]}"
((keep)) && printf 'clones and logs kept in %s\n' "$work"
exit 0
