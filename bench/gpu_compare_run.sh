#!/usr/bin/env bash
# One device call that re-proves a change on the GPU and measures it against a baseline
# build in the same call: the CUDA test binaries (conformance against the fp64 oracle, the
# GPU cases), compute-sanitizer memcheck and racecheck on a subset, `attnkit run --verify`
# on the GPU for one model of each family, then the benchmarks of the baseline and of this
# build alternating (base, new, base, new), so that "within noise" is measured in one run.
#
#   bench/gpu_compare_run.sh STAGE OUT
#
# STAGE holds bin/ (this build: attnkit, attnkit_backends_cuda*_tests,
# attnkit_conformance_tests, cuda_attention_bench, mla_cuda_bench), base/ (the baseline's
# cuda_attention_bench and mla_cuda_bench; optional) and lib/ (their shared libraries:
# the device image has no fmt/spdlog/gtest packages). Logs go to OUT (8 files at most).
# PART=proof runs the tests, sanitizers and runs only; PART=bench the benchmarks only
# (default: both), so that each half fits one device call.
set -u
stage=$1
out=$2
export LD_LIBRARY_PATH="$stage/lib:${LD_LIBRARY_PATH:-}"
summary=$out/summary.txt
. "$(dirname "$0")/device_step.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$summary"
part=${PART:-all}
if [ "$part" != bench ]; then
for t in "$stage"/bin/attnkit_backends_cuda*_tests; do
  step "$(basename "$t")" tests.log 150 "$t"
done
step conformance_gpu tests.log 100 "$stage/bin/attnkit_conformance_tests" --gtest_filter='*Gpu*'
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran|SKIPPED \]" "$out/tests.log" | tee -a "$summary"
subset='*DecodeSplitKvSixteenRows*:*MixedBatch*:*Sinks*:*KvFp8E4M3*:*EncoderOnlyContiguous*:*HndLayoutBlock32*:*PrefillCausalD128Bf16*:*SoftCap*:Mla/*DecodeH16Bf16Fp8:Mla/*PrefillH128:Decode/CudaGraphGpuTest.*/FlashB16Padded:Decode/CudaGraphGpuTest.*/PagedB3Q2:Decode/CudaGraphGpuTest.*/MlaB6Padded:NonDefaultStream/*:CudaLimitsGpuTest.*'
for tool in memcheck racecheck; do
  for t in "$stage"/bin/attnkit_backends_cuda*_tests; do
    step "$tool $(basename "$t")" sanitizers.log 90 compute-sanitizer --tool "$tool" \
      --error-exitcode 9 "$t" --gtest_filter="$subset"
  done
done
grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/sanitizers.log" | tee -a "$summary"
for m in gemma-3-1b-it gpt-oss-20b llama-3.1-8b-instruct whisper-tiny deepseek-v2-lite; do
  step "run $m" run.log 90 "$stage/bin/attnkit" run --model "$m" --platform cuda --verify \
    --max-layers-per-kind 4
done
grep -E "^== run|verif|PASS|FAIL" "$out/run.log" | tee -a "$summary"
# attnkit bench on the GPU, and the CUDA backends' declared graph support.
step "bench CUDA_FLASH" run.log 60 "$stage/bin/attnkit" bench --backend CUDA_FLASH --heads 32/8 \
  --head-size 128 --batch 16 --context 4096
step "bench CUDA_PAGED" run.log 60 "$stage/bin/attnkit" bench --backend CUDA_PAGED --heads 32/8 \
  --head-size 128 --batch 16 --context 4096
step "backends" run.log 30 "$stage/bin/attnkit" backends --platform cuda
grep -E "^== bench|^time|^KV read|cuda_graphs" "$out/run.log" | tee -a "$summary"
fi
[ "$part" = proof ] && { cat "$summary"; exit 0; }
for round in 1 2; do
  for build in base bin; do
    [ -x "$stage/$build/cuda_attention_bench" ] || continue
    step "cuda_attention_bench $build round $round" "bench_$build.log" 120 \
      "$stage/$build/cuda_attention_bench"
    step "mla_cuda_bench $build round $round" "bench_$build.log" 90 "$stage/$build/mla_cuda_bench"
    # This build's sm_80 MLA tiles on the same card, by option (MLA_SM80_ROWS=0: not them;
    # a baseline from before the option measures them inside mla_cuda_bench).
    if [ "$build" = bin ] && [ "${MLA_SM80_ROWS:-1}" = 1 ]; then
      step "mla_cuda_bench $build sm80 tiles round $round" "bench_$build.log" 60 \
        env ATTNKIT_CUDA_MLA_SM90_TILES=0 "$stage/$build/mla_cuda_bench" --large-rows-only
    fi
  done
done
cat "$summary"
