#!/usr/bin/env bash
# One device call of issue 8's proof on a GPU machine: conformance, compute-sanitizer
# (memcheck + racecheck on a representative subset), the benchmark and the torch peers.
# Binaries come prebuilt (the device image has no gtest/benchmark/fmt packages):
#
#   bench/cuda_device_run.sh STAGE OUT
#
# STAGE holds bin/attnkit_backends_cuda_tests, bin/cuda_attention_bench (plus optional
# bin/cuda_attention_bench_alt*: the same bench built with other head-size-128 tile
# configurations) and lib/ (their shared libraries); the peers come from this checkout's
# bench/cuda_peers.py (cuDNN and torch FLASH by graph replay; FlashInfer when it imports); every log
# goes to OUT (8 files at most come back). Each step has its own time limit so that one
# slow step cannot take the others' output with it. Last: ncu counters for one decode and
# one prefill launch (NCU_DECODE / NCU_SECOND: other `--only` shapes for the two launches;
# NCU_SECOND_BIN=NAME takes the second from bin/NAME, e.g. an alternative build).
# QUICK=1 leaves out the torch peers and ncu (a short call), PEERS=0 the peers alone; ALT_ONLY sets the `--only`
# shapes of the alternative benches (default d128), ALT_CASES their conformance filter;
# bin/attnkit_backends_cuda_mla_tests, when staged, runs too (it shares the cache update
# and the split-KV planning). On a Hopper GPU CUDA_FLASH's prefill runs on the sm_90a
# kernels; SM80_COMPARE=1 also runs the CUDA_FLASH conformance cases and the prefill shapes
# with ATTNKIT_CUDA_FLASH_WGMMA=0 (the sm_80 kernels on the same card, same call).
# LAUNCH_COMPARE=1 also runs the decode shapes four more times, alternating processes
# with ATTNKIT_CUDA_DEPENDENT_LAUNCH=0 and with the default (programmatic launches).
set -u
stage=$1
out=$2
export LD_LIBRARY_PATH="$stage/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
subset='*FlashDecodeSplitKvSixteenRows:*FlashMixedBatch:*PagedMixedBatch:*FlashSinks:*PagedKvFp8E4M3:*FlashEncoderOnlyContiguous:*FlashHndLayoutBlock32:*FlashPrefillCausalD128Bf16:*FlashDecodeSplitKvD256Bf16:*FlashSoftCap'
. "$(dirname "$0")/device_step.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv >"$out/summary.txt"
step conformance conformance.log 100 "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter="All/*"
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$out/conformance.log" | tee -a "$out/summary.txt"
if [ -x "$stage/bin/attnkit_backends_cuda_mla_tests" ]; then
  step mla_conformance conformance_mla.log 60 "$stage/bin/attnkit_backends_cuda_mla_tests"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$out/conformance_mla.log" | tee -a "$out/summary.txt"
fi
# The alternative builds' conformance on the cases that run head size 128 through CUDA_FLASH.
alt_cases='*FlashDecodeSplitKvD128*:*FlashPrefillCausalD128*:*FlashPrefillGqaManyTilesD128:*FlashMixedBatch:*FlashSlidingWindow:*FlashChunkedLocal:*FlashHndLayoutBlock32:*FlashOddBlockSize5:*FlashMultiQuery:*FlashExplicitKvDtypeEqualToCompute'
for alt in "$stage"/bin/attnkit_backends_cuda_tests_alt*; do
  [ -x "$alt" ] && step "$(basename "$alt")" conformance.log 40 "$alt" --gtest_filter="${ALT_CASES:-$alt_cases}"
done
grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$out/conformance.log" | tee -a "$out/summary.txt"
if [ "${SM80_COMPARE:-0}" = 1 ]; then
  ATTNKIT_CUDA_FLASH_WGMMA=0 step sm80_conformance conformance.log 60 \
    "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter='All/*Flash*'
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]" "$out/conformance.log" | tail -3 | tee -a "$out/summary.txt"
fi
step bench bench.log 70 "$stage/bin/cuda_attention_bench" --json "$out/cuda_bench.json"
if [ "${SM80_COMPARE:-0}" = 1 ]; then
  ATTNKIT_CUDA_FLASH_WGMMA=0 step sm80_bench bench_alt.log 60 "$stage/bin/cuda_attention_bench" \
    --only prefill
fi
if [ "${LAUNCH_COMPARE:-0}" = 1 ]; then
  for setting in 0 1 0 1; do
    ATTNKIT_CUDA_DEPENDENT_LAUNCH=$setting step "dependent_launch=$setting" bench_alt.log 40 \
      "$stage/bin/cuda_attention_bench" --only decode
  done
fi
# Variants of the head-size-128 tile configurations (same code, other FlashConfig), if staged.
for alt in "$stage"/bin/cuda_attention_bench_alt*; do
  [ -x "$alt" ] && step "$(basename "$alt")" bench_alt.log 70 "$alt" --only "${ALT_ONLY:-d128}"
done
[ "${QUICK:-0}" = 1 ] || [ "${PEERS:-1}" = 0 ] || step peer peer.log 240 python3 "$(dirname "$0")/cuda_peers.py" --ours "$out/cuda_bench.json"
step memcheck sanitizers.log 45 compute-sanitizer --tool memcheck --error-exitcode 9 \
  "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter="$subset"
step racecheck sanitizers.log 45 compute-sanitizer --tool racecheck --error-exitcode 9 \
  "$stage/bin/attnkit_backends_cuda_tests" --gtest_filter="$subset"
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/sanitizers.log" | tee -a "$out/summary.txt"
# Hardware counters for one decode and one prefill launch (what limits each).
ncu=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
if [ -n "$ncu" ] && [ "${QUICK:-0}" != 1 ]; then
  step ncu_decode ncu.log 60 "$ncu" --clock-control none --kernel-name regex:flash_attention_kernel \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section LaunchStats --section WarpStateStats \
    "$stage/bin/cuda_attention_bench" --only "${NCU_DECODE:-decode b64 s2048}"
  step ncu_prefill ncu.log 60 "$ncu" --clock-control none --kernel-name 'regex:flash_(attention|wgmma)_kernel' \
    --launch-skip 3 --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section Occupancy --section WarpStateStats --section SchedulerStats \
    --metrics 'regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio' \
    "$stage/bin/${NCU_SECOND_BIN:-cuda_attention_bench}" --only "${NCU_SECOND:-prefill b2 s8192 h16/16}"
fi
sed -n '/^shape/,$p' "$out/bench.log"
grep -E "^(==|decode|prefill) " "$out/bench_alt.log" 2>/dev/null
cat "$out/summary.txt"
