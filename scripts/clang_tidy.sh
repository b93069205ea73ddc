#!/usr/bin/env bash
# Runs clang-tidy (.clang-tidy's checks) over the library's and the CLI's .cpp files and
# exits non-zero on any finding; prints the wall time.
#   scripts/clang_tidy.sh [REGEX]   (default: every .cpp under src/ and cli/)
# The compile database comes from a CUDA-off configure in build-tidy/ (CUDA sources and the
# tests, benchmarks and fuzz targets are not checked). JOBS=N sets the parallelism
# (default: nproc).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
filter="${1:-^$root/(src|cli)/.*\.cpp$}"
build=build-tidy
jobs="${JOBS:-$(nproc)}"
tidy=$(command -v clang-tidy-14 || command -v clang-tidy)
start=$SECONDS
cmake --preset default -B "$build" -DATTNKIT_ENABLE_CUDA=OFF -DATTNKIT_BUILD_TESTS=OFF \
  -DATTNKIT_BUILD_BENCH=OFF -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
mapfile -t files < <(python3 -c 'import json,sys
for e in json.load(open(sys.argv[1])): print(e["file"])' "$build/compile_commands.json" |
  grep -E "$filter" | sort -u)
echo "clang-tidy: ${#files[@]} files, $jobs jobs"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
# One log per file (parallel runs never interleave); clang-tidy's own exit status is not
# used: the findings are what its logs say.
printf '%s\n' "${files[@]}" | xargs -P "$jobs" -I{} sh -c \
  '"$0" -p "$1" --quiet "$2" >"$3/$(echo "$2" | tr / _).log" 2>&1 || true' \
  "$tidy" "$build" {} "$logs"
findings=$(cat "$logs"/*.log | grep -E '^[^ ].*:[0-9]+:[0-9]+: (warning|error):' | sort -u || true)
elapsed=$((SECONDS - start))
if [ -n "$findings" ]; then
  echo "$findings"
  echo "clang-tidy: $(echo "$findings" | wc -l) findings in ${elapsed} s"
  exit 1
fi
echo "clang-tidy: no findings in ${elapsed} s"
