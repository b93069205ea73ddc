#!/usr/bin/env python3
"""Peer timings for bench/cuda_attention_bench: torch.nn.functional.scaled_dot_product_attention
with its cuDNN and FLASH backends on the same shapes (contiguous KV, GQA through
enable_gqa), timed the same way (median of 7 batches of ~25 ms, rotating over KV copies
of >= ~2 GB so repeated runs do not measure the L2).

    python3 bench/torch_sdpa_peer.py [--ours cuda_bench.json] [--markdown out.md]

With --ours, prints our time / their time per shape. SDPA has no attention sinks: the
sinks shape runs without them on the peer (noted in the table)."""

import argparse
import json
import math

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

DECODE = [(1, 16384, 32, 8, 128, False), (16, 4096, 32, 8, 128, False),
          (64, 2048, 32, 8, 128, False), (128, 1024, 32, 8, 128, False),
          (64, 4096, 4, 1, 256, False), (64, 4096, 64, 8, 64, True)]
PREFILL = [(8, 2048, 16, 16, 128), (2, 8192, 16, 16, 128), (1, 16384, 16, 16, 128),
           (2, 8192, 32, 32, 64), (2, 8192, 8, 8, 256), (4, 4096, 32, 8, 128)]
BACKENDS = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}


def median_ms(fn):
    fn(0)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    fn(1)
    b.record()
    b.synchronize()
    iters = int(min(500, max(1, 25.0 / max(a.elapsed_time(b), 1e-3))))
    times, call = [], 2
    for _ in range(7):
        a.record()
        for _ in range(iters):
            fn(call)
            call += 1
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) / iters)
    return sorted(times)[len(times) // 2]


def time_shape(kind, b, s, h, hkv, d, backend):
    q_len = 1 if kind == "decode" else s
    kv_bytes = 2 * b * hkv * s * d * 2
    sets = max(1, min(8, (2 << 30) // kv_bytes + 1))
    gen = torch.Generator(device="cuda").manual_seed(0)
    q = torch.rand(b, h, q_len, d, device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1
    kvs = [(torch.rand(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1,
            torch.rand(b, hkv, s, d, device="cuda", dtype=torch.bfloat16, generator=gen) * 2 - 1)
           for _ in range(sets)]
    causal = kind == "prefill"

    def run(i):
        k, v = kvs[i % sets]
        with sdpa_kernel([BACKENDS[backend]]):
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                  enable_gqa=(h != hkv))

    try:
        ms = median_ms(run)
    except RuntimeError as e:  # backend refuses the shape
        return None, str(e).splitlines()[0][:80]
    finally:
        torch.cuda.synchronize()
    return ms, ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ours")
    ap.add_argument("--markdown")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}")
    peer = {}
    for (b, s, h, hkv, d, sinks) in DECODE:
        for be in BACKENDS:
            peer[("decode", b, s, h, hkv, d, be)] = time_shape("decode", b, s, h, hkv, d, be)
    for (b, s, h, hkv, d) in PREFILL:
        for be in BACKENDS:
            peer[("prefill", b, s, h, hkv, d, be)] = time_shape("prefill", b, s, h, hkv, d, be)

    ours = {}
    copy_gbs = None
    if args.ours:
        with open(args.ours) as f:
            data = json.load(f)
        copy_gbs = data["copy_gbs"]
        for r in data["results"]:
            if r.get("kv_cache", "auto") != "auto":
                continue  # fp8 caches: SDPA has no counterpart
            ours[(r["kind"], r["batch"], r["context"], r["heads"], r["kv_heads"], r["head_size"],
                  r["backend"])] = r

    lines = ["| shape | cuDNN ms | FLASH ms | CUDA_FLASH ms | ours/cuDNN | ours/FLASH | "
             "CUDA_PAGED ms | peer note |", "|---|---|---|---|---|---|---|---|"]
    for kind, shapes in (("decode", DECODE), ("prefill", PREFILL)):
        for sh in shapes:
            b, s, h, hkv, d = sh[:5]
            sinks = kind == "decode" and sh[5]
            key = (kind, b, s, h, hkv, d)
            cu, cu_err = peer[key + ("cudnn",)]
            fl, fl_err = peer[key + ("flash",)]
            of = ours.get(key + ("CUDA_FLASH",))
            op = ours.get(key + ("CUDA_PAGED",))

            def fmt(x):
                return f"{x:.4f}" if x is not None else "n/a"

            def ratio(a, bb):
                return f"{a / bb:.2f}" if a is not None and bb is not None else "n/a"

            note = "; ".join(n for n in (("peer has no sinks" if sinks else ""),
                                         ("cuDNN: " + cu_err if cu_err else ""),
                                         ("FLASH: " + fl_err if fl_err else "")) if n)
            ofm = of["ms"] if of else None
            lines.append(f"| {kind} b{b} s{s} h{h}/{hkv} d{d}{' sinks' if sinks else ''} | "
                         f"{fmt(cu)} | {fmt(fl)} | {fmt(ofm)} | {ratio(ofm, cu)} | "
                         f"{ratio(ofm, fl)} | {fmt(op['ms'] if op else None)} | {note} |")
    text = "\n".join(lines)
    print(text)
    if copy_gbs:
        print(f"\ncopy bandwidth (ours, same run): {copy_gbs:.0f} GB/s")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
