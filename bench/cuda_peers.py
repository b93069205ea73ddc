#!/usr/bin/env python3
"""Peers of bench/cuda_attention_bench on the same shapes, every one timed by CUDA-graph replay:
torch's scaled_dot_product_attention with its cuDNN and FLASH backends (contiguous K/V, GQA
through enable_gqa) and, when it imports, FlashInfer over a paged cache of 16-token pages
(decode: the CUDA-core and the tensor-core wrappers, fp8 e4m3 decode; prefill: the fa3
backend, and the fa2 one over an fp8 e4m3 cache, which fa3 takes only with fp8 queries; SDPA
has no fp8 K/V and skips).

    python3 bench/cuda_peers.py [--ours cuda_bench.json] [--json peers.json]
                                [--markdown peers.md] [--only TEXT] [--no-flashinfer]
    python3 bench/cuda_peers.py --jit-only K/N     # compile FlashInfer's kernels, part K of N

Timing, the same as cuda_attention_bench's graph figure: every call is chosen and prepared
outside the timed region (the SDPA backend is fixed at capture time, FlashInfer's plan() runs
once), then one CUDA graph holds N consecutive calls that cycle over disjoint input sets
(>= 2 GiB of K/V in all, so each call's K/V was last read >= 2 GiB earlier: the 60 MB L2
holds none of it); the figure is the median of 7 replays divided by N. No Python runs in
the timed region. Each peer's output on the first set is checked against a float32
reference of the same inputs (relative L2 error at most 2e-2; decode: every row, prefill:
request 0, query heads 0 and 1); a peer that fails the check is reported and not timed.

With --ours (cuda_attention_bench --json), prints attnkit's eager and graph times beside the
peers, their ratios (attnkit graph / peer) and the share of the read ceiling that
cuda_attention_bench measured in the same run. SDPA has no attention sinks: the sinks shape
runs without them on SDPA (noted); FlashInfer gets the sinks where its wrapper accepts
them. FlashInfer compiles its kernels on first use (JIT); --jit-only does that ahead of the
timed run (several processes can share the work)."""

import argparse
import json
import math
import sys
import zlib
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

PAGE = 16
ROTATE_BYTES = 2 << 30
TOLERANCE = 2e-2


@dataclass(frozen=True)
class Shape:
    kind: str
    batch: int
    context: int
    heads: int
    kv_heads: int
    head_size: int
    sinks: bool = False
    fp8: bool = False

    def name(self) -> str:
        text = (f"{self.kind} b{self.batch} s{self.context} h{self.heads}/{self.kv_heads} "
                f"d{self.head_size}")
        return text + (" sinks" if self.sinks else "") + (" fp8kv" if self.fp8 else "")

    @property
    def q_len(self) -> int:
        return 1 if self.kind == "decode" else self.context


# The shapes of cuda_attention_bench (same order).
SHAPES = [Shape("decode", 1, 16384, 32, 8, 128), Shape("decode", 16, 4096, 32, 8, 128),
          Shape("decode", 64, 2048, 32, 8, 128), Shape("decode", 128, 1024, 32, 8, 128),
          Shape("decode", 64, 4096, 4, 1, 256), Shape("decode", 64, 4096, 64, 8, 64, sinks=True),
          Shape("decode", 64, 2048, 32, 8, 128, fp8=True),
          Shape("prefill", 8, 2048, 16, 16, 128), Shape("prefill", 2, 8192, 16, 16, 128),
          Shape("prefill", 1, 16384, 16, 16, 128), Shape("prefill", 2, 8192, 32, 32, 64),
          Shape("prefill", 2, 8192, 8, 8, 256), Shape("prefill", 4, 4096, 32, 8, 128),
          Shape("prefill", 2, 8192, 16, 16, 128, fp8=True)]


def random_bf16(gen, *size):
    return (torch.rand(*size, device="cuda", generator=gen, dtype=torch.float32) * 2 - 1).to(
        torch.bfloat16)


class Inputs:
    """One input set of a shape: q [b, q_len, h, d], contiguous k/v [b, s, kvh, d] (bf16, or
    the values an fp8 e4m3 cache holds), sink logits, the float32 scale."""

    def __init__(self, s: Shape, gen: torch.Generator):
        self.q = random_bf16(gen, s.batch, s.q_len, s.heads, s.head_size)
        self.k = random_bf16(gen, s.batch, s.context, s.kv_heads, s.head_size)
        self.v = random_bf16(gen, s.batch, s.context, s.kv_heads, s.head_size)
        if s.fp8:
            self.k = self.k.to(torch.float8_e4m3fn)
            self.v = self.v.to(torch.float8_e4m3fn)
        self.sinks = (torch.rand(s.heads, device="cuda", generator=gen) * 4 - 1
                      if s.sinks else None)
        self.scale = 1.0 / math.sqrt(s.head_size)


def kv_set_bytes(s: Shape) -> int:
    return 2 * s.batch * s.context * s.kv_heads * s.head_size * (1 if s.fp8 else 2)


def num_sets(s: Shape) -> int:
    return max(2, min(64, ROTATE_BYTES // kv_set_bytes(s) + 1))


def reference(s: Shape, x: Inputs, sinks: bool) -> torch.Tensor:
    """float32 attention of what is checked: decode every request and head, prefill
    request 0 and query heads 0-1, as [b, q_len, heads checked, d]."""
    group = s.heads // s.kv_heads
    if s.kind == "decode":
        q = x.q[:, 0].float().view(s.batch, s.kv_heads, group, s.head_size)
        k = x.k.float().permute(0, 2, 1, 3)  # [b, kvh, s, d]
        v = x.v.float().permute(0, 2, 1, 3)
        logits = (q @ k.transpose(-1, -2)) * x.scale  # [b, kvh, group, s]
        if sinks:
            sink = x.sinks.view(1, s.kv_heads, group, 1).expand(s.batch, -1, -1, 1)
            probs = torch.softmax(torch.cat([logits, sink], dim=-1), dim=-1)[..., :-1]
        else:
            probs = torch.softmax(logits, dim=-1)
        return (probs @ v).reshape(s.batch, 1, s.heads, s.head_size)
    out = torch.empty(1, s.q_len, 2, s.head_size, device="cuda")
    for h in range(2):
        q, k, v = x.q[0, :, h].float(), x.k[0, :, h // group].float(), x.v[0, :, h // group].float()
        keys = torch.arange(s.context, device="cuda")[None, :]
        for r0 in range(0, s.q_len, 2048):
            r1 = min(s.q_len, r0 + 2048)
            pos = torch.arange(r0, r1, device="cuda")[:, None] + (s.context - s.q_len)
            logits = ((q[r0:r1] @ k.T) * x.scale).masked_fill(keys > pos, float("-inf"))
            out[0, r0:r1, h] = torch.softmax(logits, dim=1) @ v
    return out


_references = {}


def check(s: Shape, x: Inputs, got: torch.Tensor, sinks: bool) -> float:
    """Relative L2 error of `got` ([b, q_len, h, d]) against the float32 reference."""
    key = (s.name(), sinks)  # set 0 of a shape is the same for every peer (seeded)
    if key not in _references:
        _references[key] = reference(s, x, sinks)
    ref = _references[key]
    if s.kind == "prefill":
        got = got[:1, :, :2]
    got = got.float()
    if not torch.isfinite(got).all():
        return float("inf")
    return (torch.linalg.vector_norm(got - ref) / torch.linalg.vector_norm(ref)).item()


def graph_replay_ms(calls) -> float:
    """Median time per call of one CUDA graph holding N calls that cycle over `calls` (one
    per input set), N chosen so that a replay lasts >= ~3 ms."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the capture, as torch.cuda.graph requires
        for c in calls:
            c()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for c in calls:
        c()
    b.record()
    b.synchronize()
    once = a.elapsed_time(b) / len(calls)
    n = len(calls) * max(1, math.ceil(3.0 / max(once * len(calls), 1e-3)))
    n = min(n, max(len(calls), 1024))
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(n):
            calls[i % len(calls)]()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(7):
        a.record()
        graph.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / n)
    del graph
    return sorted(times)[len(times) // 2]


# --- peers: each returns (call, output [b, q_len, h, d], applies_sinks) for one input set, or
# raises NotImplementedError(why) when it does not run the shape.

def sdpa_peer(backend):
    def make(s: Shape, x: Inputs, state: dict):
        if s.fp8:
            raise NotImplementedError("SDPA has no fp8 K/V")
        q = x.q.transpose(1, 2).contiguous()  # [b, h, q_len, d]
        k = x.k.transpose(1, 2).contiguous()
        v = x.v.transpose(1, 2).contiguous()
        causal = s.kind == "prefill"
        out = {}

        def call():
            with sdpa_kernel([backend]):
                out["o"] = F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                          scale=x.scale, enable_gqa=True)

        call()
        torch.cuda.synchronize()
        return call, (lambda: out["o"].transpose(1, 2)), False
    return make


def paged_indices(s: Shape, gen: torch.Generator):
    """FlashInfer's page table of a shape: indptr, shuffled page indices, last_page_len."""
    pages_per_req = (s.context + PAGE - 1) // PAGE
    num_pages = s.batch * pages_per_req
    indices = torch.randperm(num_pages, device="cuda", generator=gen).to(torch.int32)
    indptr = torch.arange(0, num_pages + 1, pages_per_req, dtype=torch.int32, device="cuda")
    last = torch.full((s.batch,), (s.context - 1) % PAGE + 1, dtype=torch.int32, device="cuda")
    return indptr, indices, last


def paged_cache(s: Shape, x: Inputs, indices: torch.Tensor):
    """x's K/V as paged NHD caches [pages, PAGE, kvh, d], request b's page j at
    indices[b * pages_per_req + j]."""
    pages_per_req = (s.context + PAGE - 1) // PAGE
    shape = (s.batch * pages_per_req, PAGE, s.kv_heads, s.head_size)
    caches = []
    for t in (x.k, x.v):
        padded = torch.zeros(s.batch, pages_per_req * PAGE, s.kv_heads, s.head_size,
                             device="cuda", dtype=t.dtype)
        padded[:, :s.context] = t
        cache = torch.empty(shape, device="cuda", dtype=t.dtype)
        cache[indices.long()] = padded.view(shape)
        caches.append(cache)
    return tuple(caches)


def flashinfer_setup(s: Shape, state: dict, kind: str):
    """FlashInfer for a wrapper of `kind` ("decode" or "prefill"): the module, and on the
    shape's first set the page table (indptr, indices, last_page_len; indices kept in
    state for every set) and a workspace in state; None as the table afterwards."""
    import flashinfer
    if s.kind != kind:
        raise NotImplementedError(f"{kind} wrapper")
    if "wrapper" in state:
        return flashinfer, None
    table = paged_indices(s, state["gen"])
    state["indices"] = table[1]
    state["workspace"] = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    return flashinfer, table


def flashinfer_decode_peer(tensor_cores: bool):
    def make(s: Shape, x: Inputs, state: dict):
        flashinfer, table = flashinfer_setup(s, state, "decode")
        if table is not None:
            indptr, indices, last = table
            wrapper = flashinfer.BatchDecodeWithPagedKVCacheWrapper(
                state["workspace"], "NHD", use_cuda_graph=True, use_tensor_cores=tensor_cores,
                paged_kv_indptr_buffer=indptr.clone(), paged_kv_indices_buffer=indices.clone(),
                paged_kv_last_page_len_buffer=last.clone())
            wrapper.plan(indptr, indices, last, s.heads, s.kv_heads, s.head_size, PAGE,
                         q_data_type=torch.bfloat16, kv_data_type=x.k.dtype, sm_scale=x.scale)
            state["wrapper"] = wrapper
        wrapper = state["wrapper"]
        cache = paged_cache(s, x, state["indices"])  # every set in the planned page order
        q = x.q[:, 0].contiguous()  # [b, h, d]
        out = torch.empty_like(q)
        kwargs = {"out": out}
        if x.sinks is not None and state.get("sinks", True):
            kwargs["sinks"] = x.sinks

        def call():
            wrapper.run(q, cache, **kwargs)

        if "sinks" in kwargs and "sinks" not in state:
            # Does the wrapper apply sinks? Judged once, on set 0, by the reference.
            try:
                call()
                state["sinks"] = check(s, x, out[:, None], True) <= TOLERANCE
            except Exception:  # noqa: BLE001 - a wrapper without sinks runs without them
                state["sinks"] = False
            if not state["sinks"]:
                del kwargs["sinks"]
        call()
        torch.cuda.synchronize()
        return call, (lambda: out[:, None]), "sinks" in kwargs
    return make


def flashinfer_prefill_peer(backend: str):
    def make(s: Shape, x: Inputs, state: dict):
        # FlashInfer 0.7.4's fa3 prefill takes an fp8 cache only with fp8 queries (bf16
        # queries over e4m3 fail its static_assert on the B operand's major-ness); its fa2
        # prefill takes bf16 queries over e4m3, and runs here for the fp8 cache only (fa3
        # is the faster of the two on 16-bit caches on Hopper).
        if backend == "fa3" and s.fp8:
            raise NotImplementedError("fa3 takes an fp8 cache with fp8 queries only (fa2 runs it)")
        if backend == "fa2" and not s.fp8:
            raise NotImplementedError("fa2 runs the fp8 cache only (fa3 the 16-bit ones)")
        flashinfer, table = flashinfer_setup(s, state, "prefill")
        if table is not None:
            indptr, indices, last = table
            qo_indptr = torch.arange(0, s.batch * s.q_len + 1, s.q_len, dtype=torch.int32,
                                     device="cuda")
            wrapper = flashinfer.BatchPrefillWithPagedKVCacheWrapper(state["workspace"], "NHD",
                                                                     backend=backend)
            wrapper.plan(qo_indptr, indptr, indices, last, s.heads, s.kv_heads, s.head_size,
                         PAGE, causal=True, sm_scale=x.scale, q_data_type=torch.bfloat16,
                         kv_data_type=x.k.dtype)
            state["wrapper"] = wrapper
        wrapper = state["wrapper"]
        cache = paged_cache(s, x, state["indices"])
        q = x.q.reshape(s.batch * s.q_len, s.heads, s.head_size)
        out = torch.empty_like(q)

        def call():
            wrapper.run(q, cache, out=out)

        call()
        torch.cuda.synchronize()
        return call, (lambda: out.view(s.batch, s.q_len, s.heads, s.head_size)), False
    return make


def flashinfer_version() -> str:
    try:
        import flashinfer
        return getattr(flashinfer, "__version__", "?")
    except Exception as e:  # noqa: BLE001 - any import failure means no FlashInfer peers
        return f"unavailable ({type(e).__name__}: {e})"


def peers(with_flashinfer: bool):
    out = {"cuDNN": sdpa_peer(SDPBackend.CUDNN_ATTENTION),
           "torch FLASH": sdpa_peer(SDPBackend.FLASH_ATTENTION)}
    if with_flashinfer:
        out["FlashInfer decode"] = flashinfer_decode_peer(False)
        out["FlashInfer decode (tensor cores)"] = flashinfer_decode_peer(True)
        out["FlashInfer fa3"] = flashinfer_prefill_peer("fa3")
        out["FlashInfer fa2"] = flashinfer_prefill_peer("fa2")
    return out


def measure(s: Shape, peer_name: str, make, jit_only: bool) -> dict:
    """One peer on one shape: check on set 0, then graph-replay time over all sets."""
    # Inputs are made for the whole rotation up front (same seed per shape for every peer).
    gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(s.name().encode()))
    state = {"gen": gen}
    sets = 1 if jit_only else num_sets(s)
    calls, result = [], {"peer": peer_name}
    try:
        for i in range(sets):
            x = Inputs(s, gen)
            call, output, sinks = make(s, x, state)
            if i == 0:
                err = check(s, x, output(), sinks)
                result["rel_l2"] = err
                result["sinks"] = sinks
                if not err <= TOLERANCE:
                    result["error"] = f"output differs from the float32 reference (rel L2 {err:.3g})"
                    return result
            calls.append(call)
        if jit_only:
            return result
        result["ms"] = graph_replay_ms(calls)
    except NotImplementedError as e:
        result["skip"] = str(e)
    except Exception as e:  # noqa: BLE001 - one peer's failure is a row, not the end of the run
        result["error"] = f"{type(e).__name__}: {str(e)[-300:]}"
    finally:
        del calls
        torch.cuda.empty_cache()
    return result


def small(s: Shape) -> Shape:
    """The same kernel configuration on a small input (FlashInfer's JIT keys on dtype, head
    size, heads and the wrapper, not on lengths)."""
    return Shape(s.kind, 1, 256, s.heads, s.kv_heads, s.head_size, s.sinks, s.fp8)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ours", help="cuda_attention_bench --json output of the same run")
    ap.add_argument("--json", help="write every measurement here")
    ap.add_argument("--markdown", help="write the table here")
    ap.add_argument("--only", default="", help="shapes whose name contains this text")
    ap.add_argument("--no-flashinfer", action="store_true")
    ap.add_argument("--jit-only", metavar="K/N",
                    help="compile FlashInfer's kernels for part K of N of the shapes and stop")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device: nothing to measure")
        return 0
    version = flashinfer_version()
    with_fi = not args.no_flashinfer and not version.startswith("unavailable")
    if args.jit_only:
        k, n = (int(v) for v in args.jit_only.split("/"))
        work = [(small(s), name, make) for s in SHAPES for name, make in peers(with_fi).items()
                if name.startswith("FlashInfer") and args.only in s.name()]
        for i, (s, name, make) in enumerate(work):
            if i % n == k:
                r = measure(s, name, make, jit_only=True)
                print(s.name(), name, r.get("error") or r.get("skip") or "compiled", flush=True)
        return 0

    dev = torch.cuda.get_device_properties(0)
    print(f"device: {dev.name}, {dev.multi_processor_count} SMs; torch {torch.__version__}, "
          f"cuDNN {torch.backends.cudnn.version()}, FlashInfer {version}", flush=True)
    rows = []
    for s in SHAPES:
        if args.only not in s.name():
            continue
        for name, make in peers(with_fi).items():
            r = measure(s, name, make, jit_only=False)
            r["shape"] = s.name()
            rows.append(r)
            what = (f"{r['ms']:.4f} ms" if "ms" in r else
                    "skipped: " + r["skip"] if "skip" in r else "ERROR " + r.get("error", ""))
            print(f"{s.name():36s} {name:34s} {what}", flush=True)

    ours = {}
    read_gbs = None
    if args.ours:
        with open(args.ours) as f:
            data = json.load(f)
        read_gbs = data.get("read_gbs")
        for r in data["results"]:
            if r["kv_cache"] not in ("auto", "fp8_e4m3"):
                continue  # no peer runs an fp8 e5m2 cache here
            s = Shape(r["kind"], r["batch"], r["context"], r["heads"], r["kv_heads"],
                      r["head_size"], r["sinks"], r["kv_cache"] == "fp8_e4m3")
            ours.setdefault(s.name(), {})[r["backend"]] = r

    lines = table(rows, ours, read_gbs)
    print("\n".join(lines))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(lines) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"device": dev.name, "torch": torch.__version__,
                       "cudnn": torch.backends.cudnn.version(), "flashinfer": version,
                       "results": rows}, f, indent=1)
    return 0


def table(rows, ours, read_gbs):
    by_shape = {}
    for r in rows:
        by_shape.setdefault(r["shape"], []).append(r)
    lines = []
    for shape, rs in by_shape.items():
        mine = ours.get(shape, {})
        lines.append(f"\n### {shape}\n")
        lines.append("| who | ms (graph replay) | attnkit graph / this | note |")
        lines.append("|---|---|---|---|")
        for backend, r in mine.items():
            note = f"eager {r['ms']:.4f} ms"
            if shape.startswith("prefill") and r.get("graph_ms"):
                note += f"; graph {r['tflops'] * r['ms'] / r['graph_ms']:.0f} TFLOP/s"
            elif read_gbs and r.get("gbs") and r.get("graph_ms"):
                graph_gbs = r["gbs"] * r["ms"] / r["graph_ms"]
                note += f"; graph {100 * graph_gbs / read_gbs:.1f}% of the read ceiling"
            lines.append(f"| attnkit {backend} | {r.get('graph_ms', 0):.4f} | | {note} |")
        best = mine.get("CUDA_FLASH") or next(iter(mine.values()), None)
        for r in rs:
            if "ms" in r:
                ratio = (f"{best['graph_ms'] / r['ms']:.3f}" if best and best.get("graph_ms")
                         else "")
                note = f"rel L2 {r['rel_l2']:.2g}"
                if shape.endswith("sinks") and not r.get("sinks"):
                    note += "; without sinks"
                lines.append(f"| {r['peer']} | {r['ms']:.4f} | {ratio} | {note} |")
            elif "skip" in r:
                lines.append(f"| {r['peer']} | – | | does not run this shape: {r['skip']} |")
            else:
                lines.append(f"| {r['peer']} | – | | failed: {r['error']} |")
    return lines


if __name__ == "__main__":
    sys.exit(main())
