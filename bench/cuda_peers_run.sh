#!/usr/bin/env bash
# One device call: the CUDA proof of a kernel change (the CUDA backends' tests with their
# fp64-oracle conformance cases, the generated GPU conformance suite, compute-sanitizer on a
# subset, `attnkit run --verify` over fp8 and 16-bit caches), then the benchmark and its
# peers in the same call, timed the same way (bench/cuda_attention_bench: eager and graph
# replay, read and copy ceilings; bench/cuda_peers.py: cuDNN, torch FLASH and FlashInfer by
# graph replay). FlashInfer compiles its kernels (JIT) in the background while the tests
# run, so that no timing shares the GPU or the CPUs with the compiler.
#
#   bench/cuda_peers_run.sh STAGE_TAR OUT [PEER_TAR]
#
# STAGE_TAR unpacks to bin/ (attnkit, attnkit_backends_cuda_tests, attnkit_conformance_tests,
# cuda_attention_bench) and lib/ (their shared libraries: the device image has no
# fmt/spdlog packages); PEER_TAR, if given, to a site folder holding FlashInfer and its Python
# dependencies. bench/cuda_peers.py comes from this checkout. Logs go to OUT, 8 files:
# summary.txt, tests.log, run.log, bench.log, ours.json, peers.log, peers.json, peers.md.
# PEER_TAR is made by bench/flashinfer_site.py (FlashInfer 0.7.4 from pinned PyPI wheels).
set -u
out=$2
mkdir -p "$out"
peer_tar=${3:-}
root=$(pwd)
summary=$out/summary.txt
. "$(dirname "$0")/device_step.sh"
work=$(unpack_stage "$1" "$peer_tar")
export LD_LIBRARY_PATH="$work/lib:${LD_LIBRARY_PATH:-}"
export PYTHONUNBUFFERED=1
# The site folder's bin/ holds a ninja for FlashInfer's JIT, used where the image has none.
[ -n "$peer_tar" ] && export PYTHONPATH="$work/peer" PATH="$PATH:$work/peer/bin"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$summary"
python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" >>"$summary" 2>&1
peers="$root/bench/cuda_peers.py"
jit_pids=()
if [ -n "$peer_tar" ]; then
  for k in 0 1 2 3; do
    timeout 280 python3 "$peers" --jit-only "$k/4" >>"$out/peers.log" 2>&1 &
    jit_pids+=($!)
  done
fi

# TEST_FILTER: a gtest filter for the backends' cases (default all), e.g. a change that
# touches one backend's kernels only.
step attnkit_backends_cuda_tests tests.log 300 "$work/bin/attnkit_backends_cuda_tests" \
  --gtest_filter="${TEST_FILTER:-*}"
step conformance_gpu tests.log 120 "$work/bin/attnkit_conformance_tests" --gtest_filter='*Gpu*'
grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran|SKIPPED \]" "$out/tests.log" | tee -a "$summary"
grep -E "rel_l2 .*(Fp8|fp8)" "$out/tests.log" | head -40 >>"$summary"
subset='*FlashKvFp8E4M3:*QueriesPastFp16Range:*Fp8E4M3SubnormalBf16:*FlashKvFp8E5M2HndD64WindowSinks:*FlashPrefillGqaManyTilesD128KvFp8E4M3:*FlashKvFp8E5M2D256SoftCapFp16:*FlashMixedBatch:*PagedKvFp8E4M3:*PagedKvFp8E5M2HndD48WindowSinks:*PagedDecodeSplitKvD80Bf16:*PagedDecodeSplitKvD256Fp16:*PagedOddBlockSize5:*PagedSinks:*PagedKvFp8E4M3D16:*PagedD32OddBlockBf16:*PagedTileEdges*:*PagedRowsAcrossTokens*'
# SANITIZE_EXTRA: further cases (a gtest filter) for the sanitizers, e.g. a changed kernel's.
[ -n "${SANITIZE_EXTRA:-}" ] && subset="$subset:$SANITIZE_EXTRA"
# SKIP_SANITIZERS=1: a measurement of kernels already proved under the sanitizers (no kernel
# changed since), to leave the call's time to the benchmark and its peers.
if [ -z "${SKIP_SANITIZERS:-}" ]; then
  for tool in memcheck racecheck; do
    step "$tool" tests.log 120 compute-sanitizer --tool "$tool" --error-exitcode 9 \
      "$work/bin/attnkit_backends_cuda_tests" --gtest_filter="$subset"
  done
  grep -h -E "ERROR SUMMARY|RACECHECK SUMMARY" "$out/tests.log" | tee -a "$summary"
fi
for kv in fp8_e4m3 fp8_e5m2 auto; do
  step "run llama-3.1-8b-instruct $kv" run.log 90 "$work/bin/attnkit" run \
    --model llama-3.1-8b-instruct --platform cuda --kv-cache-dtype "$kv" --verify \
    --max-layers-per-kind 4
done
step "explain fp8" run.log 30 "$work/bin/attnkit" explain --model llama-3.1-8b-instruct \
  --platform cuda --kv-cache-dtype fp8_e4m3
grep -E "^== run|verif|PASS|FAIL|executed|CUDA_" "$out/run.log" | head -40 | tee -a "$summary"

for pid in "${jit_pids[@]}"; do wait "$pid"; done
[ -n "$peer_tar" ] && grep -c compiled "$out/peers.log" | sed 's/^/FlashInfer JIT parts compiled: /' >>"$summary"
step cuda_attention_bench bench.log 200 "$work/bin/cuda_attention_bench" --json "$out/ours.json"
tail -n 40 "$out/bench.log" >>"$summary"
# Alternative builds of the library (variants/NAME/libattnkit.so.0.1 in the stage), timed
# against this one on the shapes whose name contains $VARIANT_ONLY, alternating, 2 rounds.
if [ -d "$work/variants" ]; then
  for round in 1 2; do
    for v in "$work"/variants/* this; do
      lib=$work/lib
      [ "$v" != this ] && lib=$v:$work/lib
      step "bench $(basename "$v") round $round" variant.log 60 env LD_LIBRARY_PATH="$lib" \
        "$work/bin/cuda_attention_bench" --only "${VARIANT_ONLY:-fp8}"
      grep -E "^(decode|prefill) .*(CUDA_FLASH|CUDA_PAGED)" "$out/variant.log" |
        sed "s/^/$(basename "$v") r$round: /" >>"$summary"
      cat "$out/variant.log" >>"$out/bench.log"
      rm "$out/variant.log"
    done
  done
fi
# SKIP_PEERS=1: no peers (a change whose shapes the last call's peers already timed).
if [ -n "${SKIP_PEERS:-}" ]; then
  echo "== cuda_peers: skipped (SKIP_PEERS)" >>"$summary"
elif [ -n "$peer_tar" ]; then
  step cuda_peers peers.log 240 python3 "$peers" --ours "$out/ours.json" --json "$out/peers.json" \
    --markdown "$out/peers.md"
else
  step cuda_peers peers.log 240 python3 "$peers" --no-flashinfer --ours "$out/ours.json" \
    --json "$out/peers.json" --markdown "$out/peers.md"
fi
# SASS=REGEX: the machine code of the library's kernels whose mangled name matches REGEX
# (cuobjdump, which the device image has), for reading the inner loops offline.
if [ -n "${SASS:-}" ] && command -v cuobjdump >/dev/null; then
  cuobjdump -sass "$work/lib/libattnkit.so.0.1.0" |
    awk -v re="$SASS" '/Function : /{keep = ($0 ~ re)} keep' | xz -T2 >"$out/sass.txt.xz"
fi
cat "$summary"
