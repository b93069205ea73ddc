"""What Python adds to one attention forward call: attnkit's Python paths against the same
call made directly from C++ (bench/stack_overhead_bench, run by this script in the same run),
and, on CUDA, against FlashInfer's Python run() on the same decode shape when FlashInfer
imports.

    python3 bench/python_overhead.py --cxx build/bench/stack_overhead_bench \
        [--device cpu cuda] [--calls 100] [--samples 50] [--json F] [--markdown F]

Every path is timed the same way, the way stack_overhead_bench times C++: one sample is
--calls back-to-back calls on the same planned decode step, by the host's wall clock, and the
device is synchronised after each sample outside the timed region (timeit's setup). On the CPU
a call is the whole attention; on CUDA it is the host's cost of launching it (the launches of
one sample fit in the launch queue, so no call waits on the GPU). The figure is the median over
the samples, per call, and the best sample; "added" is each minus the C++ figure of the same
shape. The CPU rows run one OpenMP thread (OMP_NUM_THREADS=1 unless set).

The shape is llama-3.1-8b-instruct's layer 0 (32 query heads, 8 KV heads, head size 128):
--batch requests with --context tokens in the cache (written by a prefill of random rows),
one new token each. FlashInfer gets the same shape in its own paged cache (page size = the
stack's block size) and is timed for run() alone and for append_paged_kv_cache() + run(),
which is what one attnkit forward does (write the step's key/value, then attend).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import timeit
from pathlib import Path

MODEL = "llama-3.1-8b-instruct"
LAYER = 0


def cxx_per_call_us(binary: str, case: "Case", calls: int,
                    samples: int) -> tuple[float, float, str]:
    """stack_overhead_bench's median and best per-call time (µs) and the backend it ran."""
    command = [binary, f"--device={case.device}", f"--dtype={case.dtype}",
               f"--batch={case.batch}", f"--context={case.context}", f"--calls={calls}",
               f"--kv-cache-bytes={case.kv_cache_bytes}", f"--model={MODEL}",
               f"--layer={LAYER}", "--benchmark_format=json",
               f"--benchmark_repetitions={samples}", "--benchmark_min_time=0.02"]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} exited {result.returncode}: {result.stderr}")
    report = json.loads(result.stdout)
    runs = [b for b in report["benchmarks"] if b.get("run_type") == "iteration"]
    if not runs or any(b.get("error_occurred") for b in runs):
        raise RuntimeError(f"{' '.join(command)} failed: {runs[:1]}")
    # An iteration is one sample of `calls` calls (manual time, microseconds).
    times = [b["real_time"] / calls for b in runs]
    return statistics.median(times), min(times), runs[0].get("label", "")


def cpu_description() -> str:
    """The CPU's model name and its widest vector ISA (every CPU figure names it)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines()
                  if line.startswith("model name")), platform.machine())
    flags = next((line.split(":", 1)[1].split() for line in info.splitlines()
                  if line.startswith("flags")), [])
    isa = "AVX-512" if "avx512f" in flags else "AVX2" if "avx2" in flags else "no AVX2"
    return f"{model}, {isa}, {len(re.findall('^processor', info, re.M))} CPUs"


def per_call_us(call, sync, calls: int, samples: int) -> tuple[float, float]:
    """The median and best per-call time (µs) over `samples` samples of `calls` calls."""
    timer = timeit.Timer(call, setup=sync)
    timer.timeit(calls)  # warm-up
    times = [t / calls * 1e6 for t in timer.repeat(repeat=samples, number=calls)]
    return statistics.median(times), min(times)


class Case:
    """The stack, its decode step and the step's rows for one device and shape."""

    def __init__(self, device: str, batch: int, context: int):
        import numpy as np

        import attnkit

        self.device, self.batch, self.context = device, batch, context
        self.dtype = "bfloat16" if device == "cuda" else "float32"
        # A cache that holds the shape, with room for any block size up to 256 tokens.
        probe = attnkit.AttentionStack(MODEL, device=device, dtype=self.dtype, num_blocks=2)
        element = 4 if self.dtype == "float32" else 2
        per_token = sum(2 * x["num_kv_heads"] * x["head_size"] * element
                        for x in probe.layers())
        del probe
        self.kv_cache_bytes = per_token * (batch * (context + 1 + 256) + 256)
        self.stack = attnkit.AttentionStack(MODEL, device=device, dtype=self.dtype,
                                            kv_cache_bytes=self.kv_cache_bytes)
        layer = self.stack.layer(LAYER)
        self.backend = layer["backend"]
        heads, kv_heads, d = layer["num_heads"], layer["num_kv_heads"], layer["head_size"]
        rng = np.random.default_rng(20261202)
        self.torch = None
        if device == "cuda":
            import torch

            self.torch = torch

            def rows(n, h):
                return torch.randn(n, h, d, device="cuda", dtype=torch.bfloat16)

            self.sync = torch.cuda.synchronize
        else:

            def rows(n, h):
                return rng.standard_normal((n, h, d), dtype=np.float32)

            self.sync = lambda: None
        for r in range(batch):  # one prefill step per request, as the C++ side does
            self.stack.add_request(r)
            self.stack.plan_step([(r, 0, context)])
            self.stack.forward(LAYER, rows(context, heads), rows(context, kv_heads),
                               rows(context, kv_heads), rows(context, heads))
        self.sync()
        self.stack.plan_step([(r, context, 1) for r in range(batch)])
        self.q, self.k, self.v = rows(batch, heads), rows(batch, kv_heads), rows(batch, kv_heads)
        self.out = rows(batch, heads)
        self.heads, self.kv_heads, self.head_size = heads, kv_heads, d

    def python_paths(self) -> dict[str, object]:
        s, q, k, v, out = self.stack, self.q, self.k, self.v, self.out
        paths: dict[str, object] = {
            "AttentionStack.forward": lambda: s.forward(LAYER, q, k, v, out),
        }
        if self.torch is not None:
            import attnkit.torch_ops as ops

            torch = self.torch
            stream = torch.cuda.current_stream().cuda_stream
            paths["AttentionStack.forward(stream=)"] = (
                lambda: s.forward(LAYER, q, k, v, out, stream=stream))
            handle, cache = ops.handle(s), s.kv_cache(LAYER, "torch")
            op = torch.ops.attnkit.forward_
            paths["torch.ops.attnkit.forward_"] = (
                lambda: op(handle, LAYER, q, k, v, out, cache.key, cache.value))
        return paths

    def flashinfer_paths(self) -> tuple[dict[str, object], str]:
        """FlashInfer's decode wrapper on the same shape, or ({}, why not)."""
        if self.torch is None:
            return {}, "CPU"
        try:
            import flashinfer
        except Exception as e:  # noqa: BLE001 - any import failure means no peer
            return {}, f"flashinfer does not import: {type(e).__name__}: {e}"
        torch = self.torch
        page = self.stack.kv_cache(LAYER).block_size
        pages_per_req = (self.context + 1 + page - 1) // page
        num_pages = self.batch * pages_per_req
        cache = torch.randn(num_pages, 2, page, self.kv_heads, self.head_size, device="cuda",
                            dtype=torch.bfloat16)
        indptr = torch.arange(0, num_pages + 1, pages_per_req, dtype=torch.int32, device="cuda")
        indices = torch.arange(num_pages, dtype=torch.int32, device="cuda")
        last = torch.full((self.batch,), (self.context + 1 - 1) % page + 1, dtype=torch.int32,
                          device="cuda")
        workspace = torch.empty(128 << 20, dtype=torch.uint8, device="cuda")
        wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(workspace, "NHD")
        wrapper.plan(indptr, indices, last, self.heads, self.kv_heads, self.head_size, page,
                     q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)
        q, k, v, out = self.q, self.k, self.v, self.out
        # One new token per request at position `context`: its page and slot.
        batch_indices = torch.arange(self.batch, dtype=torch.int32, device="cuda")
        positions = torch.full((self.batch,), self.context, dtype=torch.int32, device="cuda")

        def append_and_run():
            flashinfer.append_paged_kv_cache(k, v, batch_indices, positions, cache, indices,
                                             indptr, last)
            wrapper.run(q, cache, out=out)

        # Never timed on a call that failed: run() once and check its output first.
        wrapper.run(q, cache, out=out)
        torch.cuda.synchronize()
        if not torch.isfinite(out).all():
            raise RuntimeError("flashinfer run() produced non-finite values")
        version = getattr(flashinfer, "__version__", "?")
        return {f"flashinfer {version} run()": lambda: wrapper.run(q, cache, out=out),
                f"flashinfer {version} append_paged_kv_cache() + run()": append_and_run}, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cxx", required=True, help="path of bench/stack_overhead_bench")
    parser.add_argument("--device", nargs="+", default=["cpu"], choices=["cpu", "cuda"])
    parser.add_argument("--cpu-shape", nargs="+", default=["1x16", "1x128"],
                        help="BATCHxCONTEXT decode shapes on the CPU (float32)")
    parser.add_argument("--cuda-shape", nargs="+", default=["1x16", "16x1024"],
                        help="BATCHxCONTEXT decode shapes on CUDA (bfloat16)")
    parser.add_argument("--calls", type=int, default=100)
    parser.add_argument("--samples", type=int, default=50)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--markdown", type=Path)
    a = parser.parse_args()

    # One OpenMP thread for the CPU rows (the C++ run inherits it): what is measured is the
    # call, and a parallel region's wake-up jitter would be larger than the figure sought.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import attnkit

    rows = []
    notes = []
    for device in a.device:
        for shape in a.cpu_shape if device == "cpu" else a.cuda_shape:
            batch, context = (int(x) for x in shape.split("x"))
            case = Case(device, batch, context)
            cxx, cxx_best, backend = cxx_per_call_us(a.cxx, case, a.calls, a.samples)
            entry = {"device": device, "dtype": case.dtype, "batch": batch, "context": context,
                     "backend": backend, "cxx_us": cxx, "cxx_best_us": cxx_best, "paths": {}}
            for name, call in case.python_paths().items():
                us, best = per_call_us(call, case.sync, a.calls, a.samples)
                entry["paths"][name] = {"us": us, "best_us": best, "added_us": us - cxx,
                                        "added_best_us": best - cxx_best}
            try:
                peers, why = case.flashinfer_paths()
            except Exception as e:  # noqa: BLE001 - a peer that fails is reported, not timed
                peers, why = {}, f"flashinfer failed: {type(e).__name__}: {str(e)[-300:]}"
            if why and why not in notes and device == "cuda":
                notes.append(why)
            for name, call in peers.items():
                us, best = per_call_us(call, case.sync, a.calls, a.samples)
                entry["paths"][name] = {"us": us, "best_us": best}
            rows.append(entry)
            print(json.dumps(entry), flush=True)

    machine = {"python": sys.version.split()[0], "cpu": cpu_description(),
               "omp_num_threads": os.environ["OMP_NUM_THREADS"],
               "attnkit_has_cuda": attnkit.has_cuda}
    if "cuda" in a.device:
        import torch

        machine["gpu"] = torch.cuda.get_device_name()
        machine["torch"] = torch.__version__
    if a.json:
        a.json.write_text(json.dumps({"machine": machine, "calls": a.calls,
                                      "samples": a.samples, "rows": rows, "notes": notes},
                                     indent=1))
    lines = [f"machine: {machine}; {a.calls} calls a sample, median of {a.samples} samples", "",
             "| device | shape (BxC) | backend | path | µs per call, median | best sample "
             "| added over C++, median | added, best |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        shape = f"{r['batch']}x{r['context']}"
        lines.append(f"| {r['device']} | {shape} | {r['backend']} | C++ "
                     f"AttentionStack::forward | {r['cxx_us']:.2f} | {r['cxx_best_us']:.2f} | | |")
        for name, p in r["paths"].items():
            added = (f"{p['added_us']:+.2f} | {p['added_best_us']:+.2f}" if "added_us" in p
                     else "(peer) | (peer)")
            lines.append(f"| {r['device']} | {shape} | {r['backend']} | {name} | "
                         f"{p['us']:.2f} | {p['best_us']:.2f} | {added} |")
    lines += [f"- {n}" for n in notes]
    text = "\n".join(lines) + "\n"
    print(text)
    if a.markdown:
        a.markdown.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
