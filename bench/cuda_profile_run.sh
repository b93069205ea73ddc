#!/usr/bin/env bash
# One device call: Nsight Compute (ncu) sections of the kernels behind the decode and prefill
# shapes that miss their targets, one launch each, taken well into the benchmark's timed
# loop (warm caches, steady clocks; `--clock-control none` leaves the clocks as they are).
#
#   bench/cuda_profile_run.sh STAGE_TAR OUT [SHAPE:BACKEND:KERNEL_REGEX]...
#
# STAGE_TAR as for bench/cuda_peers_run.sh (bin/cuda_attention_bench and lib/). Each
# argument names a `--shape` of cuda_attention_bench, its backend and the kernel to profile;
# without arguments, the default list below. Everything goes to OUT/profile.txt.
set -u
stage=$1
out=$2
shift 2
. "$(dirname "$0")/device_step.sh"
work=$(unpack_stage "$stage")
export LD_LIBRARY_PATH="$work/lib:${LD_LIBRARY_PATH:-}"
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(
    "decode,64,2048,32,8,128,fp8:CUDA_FLASH:flash_attention_kernel"
    "decode,64,2048,32,8,128:CUDA_FLASH:flash_attention_kernel"
    "decode,64,4096,64,8,64,sinks:CUDA_PAGED:paged_attention_kernel"
    "decode,16,4096,32,8,128:CUDA_PAGED:paged_attention_kernel"
    "prefill,8,2048,16,16,128:CUDA_FLASH:flash_wgmma_kernel"
  )
fi
for t in "${targets[@]}"; do
  IFS=: read -r shape backend kernel <<<"$t"
  step "ncu $shape $backend" profile.txt 240 ncu --clock-control none --set full \
    --kernel-name "regex:$kernel" --launch-skip 40 --launch-count 1 --print-units base \
    "$work/bin/cuda_attention_bench" --shape "$shape" --backend "$backend"
done
