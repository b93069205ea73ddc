#!/usr/bin/env bash
# One device call that times builds of CUDA_FLASH's kernels (bench/cuda_variant_build.sh)
# against the default on the head-size-128 decode shapes, then checks the builds that
# carry their tests:
#
#   bench/cuda_variant_run.sh STAGE VARIANTS OUT
#
# STAGE: a tarball of bin/ (cuda_attention_bench, attnkit, attnkit_backends_cuda_tests and,
# optionally, attnkit_backends_cuda_mla_tests) and lib/ (the default libattnkit and its
# non-system shared libraries); VARIANTS: a tarball of
# folders NAME/lib (libattnkit of that build) and, optionally, NAME/bin/
# attnkit_backends_cuda_tests (the tests against that build's objects). Nothing is built
# here: the device image has the CUDA runtime, no compiler, gtest or fmt packages. Made on
# the build machine, e.g. from build-cuda (Release, -DCMAKE_CUDA_ARCHITECTURES=90):
#   TESTS=1 bench/cuda_variant_build.sh build-cuda bench/variants/c3.h .stage/v/c3   # and so on
#   tar -C .stage/v -cJf .stage/variants.tar.xz --exclude='*/obj' --exclude='*.sh' \
#     --exclude='*.txt' c3 ...
#
# Smoke first: every library on the first shape of SHAPES (SMOKE_LIMIT seconds, default
# 20); one that fails or hangs there is left out of every later step.
# 0. With TEST_DEFAULT=1, first the default build's own proof: every case of
#    bin/attnkit_backends_cuda_tests, bin/attnkit_backends_cuda_mla_tests when staged, and
#    `attnkit run --verify` on CUDA_FLASH with fp8_e4m3, fp8_e5m2 and bf16 (auto) caches.
#    Its steps leave the timing rounds their time (RESERVE seconds, default 15 per run); the
#    tests step's own limit is TEST_LIMIT seconds (default 240: 146 cases took 141 s on an
#    H100).
# 1. cuda_attention_bench (one binary) on CUDA_FLASH over SHAPES (--shape specs, default the
#    decode shapes with head size 128), once per library per round, the library swapped with
#    LD_LIBRARY_PATH; ROUNDS (default 2) rounds, every other one in reverse order. After
#    each round summary.txt gets a table per shape: graph ms per library and round, the
#    median and its ratio to the default's.
# 2. For each variant with tests: its CUDA_FLASH and fp8 GPU cases (TEST_FILTER), and
#    `attnkit run --verify` on CUDA_FLASH with an fp8 (e4m3) and a bf16 (auto) cache.
# 3. compute-sanitizer memcheck on the builds named in SANITIZE (space-separated; `default`
#    is the stage's own tests, a variant's needs its bin/attnkit_backends_cuda_tests) over a
#    short subset (SANITIZE_FILTER), then racecheck on the same subset while at least 60 s
#    are left.
# BENCH_ARGS: further arguments of every cuda_attention_bench run (smoke and timing), e.g.
# "--block-size 128".
# Each step has its own time limit (device_step.sh), cut to what is left of BUDGET seconds
# (default 480: 8 minutes of a 10-minute device command) less 30 for the packing; a step
# with less than 10 s left is skipped. OUT gets summary.txt, written as the steps end, and
# variant_results.tar.xz (every log and JSON) at the end.
set -u
if [ $# -ne 3 ]; then
  echo "usage: $0 STAGE VARIANTS OUT" >&2
  exit 2
fi
out=$3
mkdir -p "$out"
. "$(dirname "$0")/device_step.sh"
work=$(unpack_stage "$1")
mkdir -p "$work/variants"
tar -C "$work/variants" -xJf "$2"
raw=$work/raw
mkdir -p "$raw"
summary=$out/summary.txt
rounds=${ROUNDS:-2}
shapes=${SHAPES:-"decode,1,16384,32,8,128 decode,16,4096,32,8,128 decode,64,2048,32,8,128 \
decode,128,1024,32,8,128 decode,64,2048,32,8,128,fp8 decode,64,2048,32,8,128,fp8_e5m2 \
decode,16,4096,32,8,128,fp8"}
test_filter=${TEST_FILTER:-'All/*Flash*:All/*Fp8*:Decode/*'}
sanitize_filter=${SANITIZE_FILTER:-'*FlashDecodeSplitKvD128*:*FlashKvFp8E4M3:*FlashKvFp8E5M2:*FlashMixedBatch:*FlashKvFp8E4M3QueriesPastFp16Range'}
variants=()
for dir in "$work"/variants/*/; do
  [ -e "$dir/lib" ] && variants+=("$(basename "$dir")")
done

{
  nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv
  echo "variants: ${variants[*]}"
  echo "shapes: $shapes"
  echo "benchmark arguments: ${BENCH_ARGS:-none}"
  echo "default proof: ${TEST_DEFAULT:-0}; sanitized: ${SANITIZE:-none}"
} >"$summary" 2>&1

# budget_step NAME LOG LIMIT COMMAND...: device_step.sh's step under min(LIMIT, what is left
# less the seconds held back for later steps in $reserve).
budget=${BUDGET:-480}
reserve=0
budget_step() {
  local name=$1 log=$2 limit=$3 left=$((budget - 30 - reserve - SECONDS))
  shift 3
  if [ "$left" -lt 10 ]; then
    echo "== $name: skipped ($SECONDS s of the ${budget} s budget spent)" | tee -a "$summary"
    return
  fi
  step "$name" "$log" "$((limit < left ? limit : left))" "$@"
}

# The library folder a name runs with (the default's is the stage's own).
lib_path() {
  if [ "$1" = default ]; then echo "$work/lib"; else echo "$work/variants/$1/lib:$work/lib"; fi
}

# The graph ms of every shape in one run's JSON, as "shape<TAB>ms" lines (no JSON tool
# needed: cuda_attention_bench writes one field per line).
graph_ms_of() {
  awk -F'[:,]' '
    function val(s) { gsub(/[ "]/, "", s); return s }
    /"kind"/ { kind = val($2) } /"batch"/ { b = val($2) } /"context"/ { s = val($2) }
    /"heads"/ { h = val($2) } /"kv_heads"/ { kvh = val($2) } /"head_size"/ { d = val($2) }
    /"kv_cache"/ { kv = val($2) }
    /"graph_ms"/ { printf "%s b%s s%s h%s/%s d%s %s\t%s\n", kind, b, s, h, kvh, d, kv, val($2) }
  ' "$1"
}

# Appends a table per shape to summary.txt from records.tsv (name, round, shape, ms).
tables() {
  echo "== graph ms per library after round $1 (median over rounds, ratio to default)" >>"$summary"
  awk -F'\t' -v names="default ${variants[*]}" -v rounds="$1" '
    function median(list, n,    i, j, t, a) {
      n = split(list, a, " ")
      for (i = 1; i <= n; ++i) for (j = i + 1; j <= n; ++j) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
      return n == 0 ? 0 : (n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2)
    }
    { ms[$3, $1, $2] = $4; all[$3, $1] = all[$3, $1] " " $4; if (!($3 in seen)) { seen[$3] = 1; order[++count] = $3 } }
    END {
      n = split(names, name, " ")
      for (k = 1; k <= count; ++k) {
        shape = order[k]
        printf "%s\n  %-8s", shape, "library"
        for (r = 1; r <= rounds; ++r) printf " %9s", "r" r
        printf " %9s %7s\n", "median", "ratio"
        base = median(all[shape, "default"])
        for (i = 1; i <= n; ++i) {
          printf "  %-8s", name[i]
          for (r = 1; r <= rounds; ++r) {
            cell = "-"
            if ((shape SUBSEP name[i] SUBSEP r) in ms) cell = sprintf("%.4f", ms[shape, name[i], r])
            printf " %9s", cell
          }
          m = median(all[shape, name[i]])
          cell = "-"; ratio = "-"
          if (m > 0) cell = sprintf("%.4f", m)
          if (m > 0 && base > 0) ratio = sprintf("x%.3f", m / base)
          printf " %9s %7s\n", cell, ratio
        }
      }
    }' "$raw/records.tsv" >>"$summary"
}

# The tests binary a name's sanitizer runs use (the default's is the stage's own).
tests_of() {
  if [ "$1" = default ]; then
    echo "$work/bin/attnkit_backends_cuda_tests"
  else
    echo "$work/variants/$1/bin/attnkit_backends_cuda_tests"
  fi
}

# attnkit run --verify on CUDA_FLASH with NAME's library and cache dtype KV, into LOG.
verify_run() {
  local name=$1 kv=$2 log=$3
  budget_step "verify $name $kv" "$log" 60 env LD_LIBRARY_PATH="$(lib_path "$name")" \
    "$work/bin/attnkit" run --model llama-3.1-8b-instruct --platform cuda \
    --attention-config '{"backend": "CUDA_FLASH"}' --kv-cache-dtype "$kv" --verify \
    --max-layers-per-kind 4
}

# Smoke: every library on the first shape of SHAPES under SMOKE_LIMIT seconds (default
# 20). A library that fails or hangs there is left out of every later step, where a hang
# would cost each step its whole limit (run 63); the summary says which. A hang can then
# be located with bench/variants/watchdog.h.
read -r first_shape _ <<<"$shapes"
failed_smoke=()
smoke_failed() { [[ " ${failed_smoke[*]} " == *" $1 "* ]]; }
for name in default "${variants[@]}"; do
  t0=$SECONDS
  # shellcheck disable=SC2086
  timeout "${SMOKE_LIMIT:-20}" env LD_LIBRARY_PATH="$(lib_path "$name")" \
    "$work/bin/cuda_attention_bench" --backend CUDA_FLASH --shape "$first_shape" \
    ${BENCH_ARGS:-} >>"$raw/smoke_$name.log" 2>&1
  rc=$?
  echo "== smoke $name ($first_shape): exit $rc in $((SECONDS - t0)) s" | tee -a "$summary"
  [ "$rc" = 0 ] || failed_smoke+=("$name")
done
if [ ${#failed_smoke[@]} -gt 0 ]; then
  echo "left out after the smoke step: ${failed_smoke[*]}" | tee -a "$summary"
  kept=()
  for name in "${variants[@]}"; do
    smoke_failed "$name" || kept+=("$name")
  done
  variants=("${kept[@]}")
fi
default_ok=1
if smoke_failed default; then
  default_ok=0
  [ "${TEST_DEFAULT:-0}" = 1 ] && echo "== tests default: left out (failed the smoke step)" |
    tee -a "$summary"
fi

# 0. The default build's proof: all of its tests and a model run per cache dtype.
if [ "${TEST_DEFAULT:-0}" = 1 ] && [ "$default_ok" = 1 ]; then
  reserve=${RESERVE:-$((15 * rounds * (1 + ${#variants[@]})))}
  budget_step "tests default" tests_default.log "${TEST_LIMIT:-240}" env LD_LIBRARY_PATH="$work/lib" \
    "$work/bin/attnkit_backends_cuda_tests"
  grep -s -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$out/tests_default.log" |
    sed "s/^/default: /" | tee -a "$summary"
  if [ -x "$work/bin/attnkit_backends_cuda_mla_tests" ]; then
    budget_step "mla tests default" tests_default_mla.log 60 env LD_LIBRARY_PATH="$work/lib" \
      "$work/bin/attnkit_backends_cuda_mla_tests"
    grep -s -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$out/tests_default_mla.log" |
      sed "s/^/default mla: /" | tee -a "$summary"
    [ -f "$out/tests_default_mla.log" ] && mv "$out/tests_default_mla.log" "$raw/"
  fi
  for kv in fp8_e4m3 fp8_e5m2 auto; do
    verify_run default "$kv" "verify_default_$kv.log"
    grep -s -E "verif|PASS|FAIL|rror" "$out/verify_default_$kv.log" | grep -v -E "^(\[|== )" |
      head -4 | sed "s/^/default $kv: /" >>"$summary"
    [ -f "$out/verify_default_$kv.log" ] && mv "$out/verify_default_$kv.log" "$raw/"
  done
  [ -f "$out/tests_default.log" ] && mv "$out/tests_default.log" "$raw/"
  reserve=0
fi

# 1. The timing rounds: default first on odd rounds, last on even ones.
shape_args=()
for s in $shapes; do shape_args+=(--shape "$s"); done
: >"$raw/records.tsv"
for round in $(seq 1 "$rounds"); do
  order=("${variants[@]}")
  [ "$default_ok" = 1 ] && order=(default "${variants[@]}")
  if [ $((round % 2)) = 0 ]; then
    reversed=()
    for ((i = ${#order[@]} - 1; i >= 0; --i)); do reversed+=("${order[i]}"); done
    order=("${reversed[@]}")
  fi
  for name in "${order[@]}"; do
    json=$raw/bench_${name}_r$round.json
    {
      echo "== $name round $round: libattnkit resolved to"
      LD_LIBRARY_PATH=$(lib_path "$name") ldd "$work/bin/cuda_attention_bench" | grep attnkit
    } >>"$out/bench.log" 2>&1
    # shellcheck disable=SC2086
    budget_step "bench $name r$round" bench.log 90 env LD_LIBRARY_PATH="$(lib_path "$name")" \
      "$work/bin/cuda_attention_bench" --backend CUDA_FLASH "${shape_args[@]}" ${BENCH_ARGS:-} \
      --json "$json"
    [ -f "$json" ] && graph_ms_of "$json" | sed "s/^/$name\t$round\t/" >>"$raw/records.tsv"
  done
  [ -f "$out/bench.log" ] && mv "$out/bench.log" "$raw/bench_r$round.log"
  tables "$round"
done
# The last round's rows, %stepread included (how close each library comes to one bare read
# of the step's own bytes), labelled with their library.
awk '/^== bench / { name = $3 } /^shape / && !header { print "library  " $0; header = 1 }
     /^decode / { printf "%-8s %s\n", name, $0 }' "$raw/bench_r$rounds.log" >>"$summary" 2>/dev/null

# 2. The variants' own tests and a model run each, on CUDA_FLASH.
for name in "${variants[@]}"; do
  tests=$work/variants/$name/bin/attnkit_backends_cuda_tests
  [ -x "$tests" ] || continue
  budget_step "tests $name" "tests_$name.log" 150 env LD_LIBRARY_PATH="$work/lib" "$tests" \
    --gtest_filter="$test_filter"
  grep -s -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$out/tests_$name.log" |
    sed "s/^/$name: /" | tee -a "$summary"
  for kv in fp8_e4m3 auto; do
    verify_run "$name" "$kv" "tests_$name.log"
  done
  grep -s -E "verif|PASS|FAIL|rror" "$out/tests_$name.log" | grep -v -E "^(\[|== )" | head -8 |
    sed "s/^/$name: /" >>"$summary"
  [ -f "$out/tests_$name.log" ] && mv "$out/tests_$name.log" "$raw/"
done

# 3. memcheck on the builds named in SANITIZE, then racecheck while time is left.
sanitized=()
for name in ${SANITIZE:-}; do
  if smoke_failed "$name"; then
    echo "== memcheck $name: left out (failed the smoke step)" | tee -a "$summary"
    continue
  fi
  tests=$(tests_of "$name")
  if [ ! -x "$tests" ]; then
    echo "== memcheck $name: no bin/attnkit_backends_cuda_tests for $name" | tee -a "$summary"
    continue
  fi
  sanitized+=("$name")
  budget_step "memcheck $name" "memcheck_$name.log" 150 env LD_LIBRARY_PATH="$work/lib" \
    compute-sanitizer --tool memcheck --error-exitcode 9 "$tests" --gtest_filter="$sanitize_filter"
  grep -s -h -E "ERROR SUMMARY|^\[  (PASSED|FAILED)" "$out/memcheck_$name.log" | sed "s/^/$name: /" |
    tee -a "$summary"
  [ -f "$out/memcheck_$name.log" ] && mv "$out/memcheck_$name.log" "$raw/"
done
for name in "${sanitized[@]}"; do
  if [ $((budget - 30 - SECONDS)) -lt 60 ]; then
    echo "== racecheck $name: skipped ($SECONDS s of the ${budget} s budget spent)" | tee -a "$summary"
    continue
  fi
  budget_step "racecheck $name" "racecheck_$name.log" 150 env LD_LIBRARY_PATH="$work/lib" \
    compute-sanitizer --tool racecheck --error-exitcode 9 "$(tests_of "$name")" \
    --gtest_filter="$sanitize_filter"
  grep -s -h -E "RACECHECK SUMMARY|ERROR SUMMARY|^\[  (PASSED|FAILED)" "$out/racecheck_$name.log" |
    sed "s/^/$name: /" | tee -a "$summary"
  [ -f "$out/racecheck_$name.log" ] && mv "$out/racecheck_$name.log" "$raw/"
done

cp "$summary" "$raw/"
tar -C "$work" -cJf "$out/variant_results.tar.xz" raw
cat "$summary"
