#!/usr/bin/env bash
# One device call of issue 8's proof on a GPU machine: conformance, compute-sanitizer
# (memcheck + racecheck on a representative subset), the benchmark and the torch peers.
# Binaries come prebuilt (the device image has no gtest/benchmark/fmt packages):
#
#   bench/cuda_device_run.sh STAGE OUT
#
# STAGE holds bin/attnkit_backends_cuda_tests, bin/cuda_attention_bench, lib/ (their
# shared libraries) and bench/torch_sdpa_peer.py; every log goes to OUT. Each step has
# its own time limit so that one slow step cannot take the others' output with it.
set -u
stage=$1
out=$2
export LD_LIBRARY_PATH="$stage/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
subset='*FlashMixedBatch:*PagedMixedBatch:*FlashSinks:*PagedKvFp8E4M3:*FlashEncoderOnlyContiguous:*FlashHndLayoutBlock32:*FlashPrefillCausalD128Bf16:*FlashDecodeSplitKvD256Bf16:*FlashSoftCap'
step() {  # name limit command...
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" >"$out/$name.log" 2>&1
  echo "== $name: exit $? in $((SECONDS - t0)) s" | tee -a "$out/summary.txt"
}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/summary.txt"
step conformance 100 "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter="All/*"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$out/conformance.log" | tee -a "$out/summary.txt"
step bench 70 "$stage/bin/cuda_attention_bench" --json "$out/cuda_bench.json"
step peer 60 python3 "$stage/bench/torch_sdpa_peer.py" --ours "$out/cuda_bench.json" \
  --markdown "$out/peer.md"
step memcheck 45 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter="$subset"
step racecheck 45 compute-sanitizer --tool racecheck --error-exitcode 9 \
  "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter="$subset"
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/memcheck.log" "$out/racecheck.log" \
  | tee -a "$out/summary.txt"
sed -n '/^shape/,$p' "$out/bench.log"
cat "$out/summary.txt"
