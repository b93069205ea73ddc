#!/usr/bin/env bash
# One GPU machine call for the Python package: the GPU tests (`pytest -m gpu`: torch ops
# under torch.compile and CUDA-graph capture, Hugging Face models in bfloat16 against
# transformers' own attention) and bench/python_overhead.py on the CPU and CUDA, then the
# CUDA backends' C++ tests as a regression check of the same build (CXX_TESTS=0: not them).
#
#   bench/python_gpu_run.sh STAGE_TAR OUT [PEER_TAR]
#
# STAGE_TAR unpacks to bin/ (attnkit, stack_overhead_bench, attnkit_backends_cuda_tests),
# lib/ (their shared libraries) and py/ (attnkit/_core*.so built for this machine's Python);
# the package's Python files are taken from python/attnkit/ of this checkout. PEER_TAR, if
# given, unpacks to a site folder holding FlashInfer and its Python dependencies. Logs go to
# OUT (8 files at most).
set -u
out=$2
peer_tar=${3:-}
root=$(pwd)
. "$(dirname "$0")/device_step.sh"
work=$(unpack_stage "$1" "$peer_tar")
mkdir -p "$work/site"
cp -r "$root/python/attnkit" "$work/site/"
cp "$work"/py/_core*.so "$work/site/attnkit/"
if [ -n "$peer_tar" ]; then
  export PYTHONPATH="$work/site:$work/peer"
else
  export PYTHONPATH="$work/site"
fi
export LD_LIBRARY_PATH="$work/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
export ATTNKIT_CLI="$work/bin/attnkit" PYTHONUNBUFFERED=1
summary=$out/summary.txt
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv >"$summary"
python3 -c "import sys, torch, transformers; print(sys.version.split()[0], torch.__version__, transformers.__version__)" >>"$summary" 2>&1
lscpu | grep -E "Model name|^CPU\(s\)" >>"$summary"

step "pytest -m gpu" pytest.log 330 python3 -m pytest -m gpu -v -rs -s "$root/tests/python"
grep -E "passed|failed|PASSED|FAILED|SKIPPED|executed backend" "$out/pytest.log" | tee -a "$summary"
step "python_overhead" overhead.log 420 python3 "$root/bench/python_overhead.py" \
  --cxx "$work/bin/stack_overhead_bench" --device cpu cuda \
  --json "$out/python_overhead.json" --markdown "$out/python_overhead.md"
cat "$out/python_overhead.md" >>"$summary" 2>/dev/null
if [ "${CXX_TESTS:-1}" = 1 ]; then
  step "attnkit_backends_cuda_tests" tests.log 150 "$work/bin/attnkit_backends_cuda_tests"
  grep -E "^\[  (PASSED|FAILED)|FAILED  \]|tests ran" "$out/tests.log" | tee -a "$summary"
fi
cat "$summary"
