#!/bin/bash
# CUDA_MLA run on the H200: conformance, bench, attnkit run --verify (bf16, fp8), sanitizers.
# Expects, beside it, bin/ = attnkit_backends_cuda_mla_tests, attnkit, mla_cuda_bench (built
# with -DCMAKE_CUDA_ARCHITECTURES=90) and lib/ = their shared libraries (fmt, spdlog,
# libgomp, cudart): the device image has no gtest/fmt development packages. Logs go to $OUT.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
T=bin/attnkit_backends_cuda_mla_tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader > $OUT/gpu.txt 2>&1
s=$SECONDS; $T > $OUT/tests.log 2>&1; echo "tests rc $? $((SECONDS-s))s"
s=$SECONDS; timeout 80 bin/mla_cuda_bench > $OUT/bench.log 2>&1; echo "bench rc $? $((SECONDS-s))s"
# The large-row shapes again on the tiles sm_80 runs (same card, same call).
s=$SECONDS; ATTNKIT_CUDA_MLA_SM90_TILES=0 timeout 40 bin/mla_cuda_bench --large-rows-only >> $OUT/bench.log 2>&1; echo "bench sm80 tiles rc $? $((SECONDS-s))s"
s=$SECONDS
bin/attnkit run --model deepseek-v2-lite --platform cuda --verify --quiet > $OUT/run.log 2>&1; echo "run bf16 rc $?"
bin/attnkit run --model deepseek-v2-lite --platform cuda --verify --quiet --kv-cache-dtype fp8_e4m3 >> $OUT/run.log 2>&1; echo "run fp8 rc $? $((SECONDS-s))s"
s=$SECONDS; timeout ${MC:-100} compute-sanitizer --tool memcheck --error-exitcode 9 $T --gtest_filter='Mla/*:CudaMlaGpuSm80Config.*' > $OUT/sanitizers.log 2>&1; echo "memcheck rc $? $((SECONDS-s))s"
s=$SECONDS; timeout ${RC:-60} compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='Mla/*MixedH128Fp16Fp8:Mla/*DecodeH16Bf16Fp8:Mla/*OneHeadH1:Mla/*PrefillH128' >> $OUT/sanitizers.log 2>&1; echo "racecheck A rc $? $((SECONDS-s))s"
s=$SECONDS; timeout ${RC:-60} compute-sanitizer --tool racecheck --error-exitcode 9 $T --gtest_filter='Mla/*SlidingWindowPrefillH128:Mla/*SlidingWindowDecodeH16Fp8:CudaMlaGpuSm80Config.*' >> $OUT/sanitizers.log 2>&1; echo "racecheck B rc $? $((SECONDS-s))s"
grep -E "PASSED|FAILED|tests ran" $OUT/tests.log; cat $OUT/bench.log; cat $OUT/run.log | tail -8; grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" $OUT/sanitizers.log
