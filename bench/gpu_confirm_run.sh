#!/bin/bash
# One device call that re-proves the merged CUDA code: CUDA_FLASH/CUDA_PAGED conformance,
# sanitizers, benchmark and torch peers (bench/cuda_device_run.sh without its ncu section),
# the CUDA_MLA proof (bench/mla_cuda_device_run.sh) and `attnkit run --verify` on the GPU
# for one model of each family. Run from a staging folder that holds, beside this script:
#   bin/  attnkit, attnkit_backends_cuda_tests, attnkit_backends_cuda_mla_tests,
#         cuda_attention_bench, mla_cuda_bench (Release, -DCMAKE_CUDA_ARCHITECTURES=90)
#   lib/  their shared libraries (libfmt, libspdlog, libgomp, libcudart)
#   bench/cuda_peers.py, mla_cuda_device_run.sh, and
#   cuda_device_run.sh = sed '/^# Hardware counters/,/^fi$/d' bench/cuda_device_run.sh
# Every log goes into $OUT/logs.tgz.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD/lib
R=$OUT; T=$(mktemp -d); mkdir -p $T/flash $T/mla
s=$SECONDS; bash cuda_device_run.sh $PWD $T/flash > $T/flash.out 2>&1; echo "flash script $((SECONDS-s)) s"
tail -45 $T/flash.out
s=$SECONDS; OUT=$T/mla bash mla_cuda_device_run.sh > $T/mla.out 2>&1; echo "mla script $((SECONDS-s)) s"
cat $T/mla.out
for m in gemma-3-1b-it gpt-oss-20b llama-3.1-8b-instruct whisper-tiny deepseek-v2-lite; do
  s=$SECONDS; timeout 60 bin/attnkit run --model $m --platform cuda --verify --max-layers-per-kind 4 > $T/run_$m.log 2>&1
  echo "run $m rc $? $((SECONDS-s)) s"; grep -i -E "verif|executed|backend|error" $T/run_$m.log | head -12
done
tar czf $R/logs.tgz -C $T .
