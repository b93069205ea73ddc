#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time,
# as many at once as there are cores.
#   scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 30)
# Seeds: fuzz/corpus/<target>/ and fuzz/regressions/<target>/. A find is written to
# build-fuzz/finds/<target>/crash-*; add it to fuzz/regressions/<target>/ with its fix.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-30}"
build=build-fuzz
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DATTNKIT_ENABLE_CUDA=OFF -DATTNKIT_BUILD_TESTS=OFF -DATTNKIT_BUILD_BENCH=OFF \
  -DATTNKIT_BUILD_FUZZERS=ON \
  -DCMAKE_CXX_FLAGS="-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined" \
  >/dev/null
# Only the fuzz targets (and the library they link), not the CLI.
targets=()
for source in fuzz/*_fuzzer.cpp; do targets+=("$(basename "$source" .cpp)"); done
cmake --build "$build" -j"$(nproc)" --target "${targets[@]}"
# Inputs as long as the JSON targets need to reach what they guard against: a value nested
# 100000 deep is 200 kB (libFuzzer's default cap is the longest seed, a few hundred bytes).
max_len_of() {
  case "$1" in
    attention_config | model_config) echo 262144 ;;
    *) echo 4096 ;;
  esac
}
# One target per core at a time (each single-threaded, for the whole SECONDS): the same
# fuzzing per target in less wall time. Each writes its log and exit status to its folder;
# the results are printed in target order once all have ended.
fuzz_one() {
  local fuzzer=$1 target=$2 work=$3 rc=0
  "$fuzzer" -max_total_time="$seconds" -max_len="$(max_len_of "$target")" \
    -print_final_stats=1 -artifact_prefix="$work/" \
    "$work/corpus" "fuzz/corpus/$target" "fuzz/regressions/$target" 2>"$work/log" || rc=$?
  echo "$rc" >"$work/status"
}
slots=$(nproc)
targets=()
for fuzzer in "$build"/fuzz/*_fuzzer; do
  target=$(basename "$fuzzer" _fuzzer)
  work="$build/finds/$target"
  mkdir -p "$work/corpus"
  rm -f "$work/status"
  while [ "$(jobs -rp | wc -l)" -ge "$slots" ]; do wait -n || true; done
  echo "== fuzzing $target for ${seconds}s"
  fuzz_one "$fuzzer" "$target" "$work" &
  targets+=("$target")
done
wait
status=0
for target in "${targets[@]}"; do
  work="$build/finds/$target"
  if [ "$(cat "$work/status" 2>/dev/null)" != 0 ]; then
    echo "!! $target found a failure; see $work/log and $work/crash-*"
    tail -30 "$work/log"
    status=1
  else
    echo "$target: $(grep -E "stat::number_of_executed_units" "$work/log" | tail -1)"
  fi
done
exit $status
