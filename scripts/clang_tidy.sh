#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy's checks) over the library's and the CLI's .cpp files and
# exits non-zero on any finding, or when clang-tidy fails on a file; prints the wall time
# and the slowest files.
#   scripts/clang_tidy.sh [--ci] [REGEX]   (default: every .cpp under src/ and cli/)
#   --ci   what CI runs (.ci/run, make tidy-ci), bounded to fit CI's time: every check but
#          performance-unnecessary-value-param (the costliest: about 40% of a CLI file's
#          time, in the CLI11/fmt/spdlog templates), over every file except the scalar and
#          AVX2 instantiations of the CPU SIMD kernels (*_scalar.cpp, *_avx2.cpp in
#          src/backends/cpu_flash, src/backends/cpu_mla and src/kernels/cpu). Their AVX-512
#          instantiations stay: they compile every path of the kernel templates
#          (flash_kernel_impl.h with and without the bf16 dot path, mla_kernel_impl.h,
#          cache_update_impl.h) and simd_avx512.h, so only simd_scalar.h and simd_avx2.h, and
#          that one check, are left to the full run (make tidy).
# The compile database comes from a CUDA-off configure in build-tidy/ (CUDA sources and the
# tests, benchmarks and fuzz targets are not checked). JOBS=N sets the parallelism
# (default: nproc); TIDY_TIMES=FILE keeps each file's exit status, wall and CPU seconds.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
ci=0
if [ "${1:-}" = "--ci" ]; then
  ci=1
  shift
fi
filter="${1:-^$root/(src|cli)/.*\.cpp$}"
# The instantiations --ci leaves out (the same templates as the *_avx512.cpp ones).
ci_skip="^$root/src/(backends/cpu_flash|backends/cpu_mla|kernels/cpu)/[a-z_]+_(scalar|avx2)\.cpp$"
ci_checks="-performance-unnecessary-value-param"
build=build-tidy
jobs="${JOBS:-$(nproc)}"
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
start=$SECONDS
cmake --preset default -B "$build" -DATTNKIT_ENABLE_CUDA=OFF -DATTNKIT_BUILD_TESTS=OFF \
  -DATTNKIT_BUILD_BENCH=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
mapfile -t files < <(python3 -c 'import json,sys
for e in json.load(open(sys.argv[1])): print(e["file"])' "$build/compile_commands.json" |
  grep -E "$filter" | { if [ "$ci" = 1 ]; then grep -vE "$ci_skip"; else cat; fi; } | sort -u)
if [ "${#files[@]}" -eq 0 ]; then
  echo "clang-tidy: no file matches $filter" >&2
  exit 1
fi
echo "clang-tidy: ${#files[@]} files, $jobs jobs$([ "$ci" = 1 ] && echo ' (CI set)')"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# One log per file (parallel runs never interleave), with its exit status, wall time and
# CPU time. Every warning is an error (a finding fails the file); a file whose run fails
# without a finding (a crash, a missing header) fails too.
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} bash -c '
  log="$3/$(echo "$2" | tr / _)"
  rc=0
  TIMEFORMAT="%R %U %S"
  { time "$0" -p "$1" --quiet --warnings-as-errors="*" ${4:+--checks="$4"} "$2" >"$log.log" \
    2>&1; } 2>"$log.time" || rc=$?
  read -r wall user sys <"$log.time"
  echo "$rc $wall $(echo "$user + $sys" | bc) $2" >"$log.status"' \
  "$tidy" "$build" {} "$logs" "$([ "$ci" = 1 ] && echo "$ci_checks")"
findings=$(cat "$logs"/*.log | grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error):' | sort -u || true)
failed=$(cat "$logs"/*.status | awk '$1 != 0 {print $4}' | sort)
# TIDY_TIMES=FILE keeps every file's "status wall_s cpu_s path".
if [ -n "${TIDY_TIMES:-}" ]; then cat "$logs"/*.status >"$TIDY_TIMES"; fi
elapsed=$((SECONDS - start))
# CPU time is what the run costs on an idle machine (wall time there: about cpu / jobs);
# wall time here also counts waiting for other processes on a busy machine.
cpu=$(cat "$logs"/*.status | awk '{s += $3} END {printf "%d", s}')
echo "slowest files (wall s, cpu s):"
# awk reads all of sort's output (head would exit early and sort die of SIGPIPE under
# pipefail once its output outgrows one write).
sort -k3 -rn "$logs"/*.status |
  awk -v r="$root/" 'NR <= 8 {sub(r, "", $4); printf "  %7.1f %7.1f %s\n", $2, $3, $4}'
echo "clang-tidy: ${elapsed} s wall, ${cpu} s CPU in all (about $((cpu / jobs)) s wall on $jobs idle cores)"
if [ -n "$findings" ] || [ -n "$failed" ]; then
  [ -n "$findings" ] && echo "$findings"
  for f in $failed; do
    if ! grep -qE ':[0-9]+:[0-9]+: (warning|error):' "$logs/$(echo "$f" | tr / _).log"; then
      echo "clang-tidy failed on $f:"
      cat "$logs/$(echo "$f" | tr / _).log"
    fi
  done
  echo "clang-tidy: $(echo "$findings" | grep -c . || true) findings, $(echo "$failed" |
    grep -c . || true) files failing, in ${elapsed} s"
  exit 1
fi
echo "clang-tidy: no findings in ${elapsed} s"
