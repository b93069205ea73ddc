#!/usr/bin/env python3
"""Peer timings for bench/cpu_attention_bench: ggml's CPU flash attention
(ggml_flash_attn_ext on ggml's CPU backend) on the same decode and prefill shapes, with the
same counting (KV GB/s, GFLOP/s over visible pairs) and the same timing rules (2 warm-up
calls, median of 9 timed calls, KV rotated over >= 256 MiB so a call does not find it in the
last-level cache), so the two tables can be read side by side.

    python3 bench/ggml_peer.py --ggml-dir PATH [--attnkit build/bench/cpu_attention_bench]
        [--rounds N] [--build-dir DIR] [--isa native|avx2] [--threads N]
        [--repeats N] [--only SUBSTRING] [--kv-types f16 bf16] [--csv]

PATH is a local ggml checkout (or set GGML_DIR); nothing is downloaded. Without one the
script prints "skipped: ..." and exits 0. The first run builds ggml (CPU backend only,
Release, GGML_NATIVE=ON, OpenMP, GGML_BUILD_TESTS=ON, static) together with the driver
bench/ggml_peer_driver/ggml_fa_peer.cpp into --build-dir (default /tmp/ggml-peer-build);
with --isa avx2 ggml is built for AVX2 + FMA + F16C only (GGML_NATIVE=OFF, into
/tmp/ggml-peer-build-avx2) and attnkit runs with ATTNKIT_CPU_ISA=avx2, so the AVX2 kernels of
both are compared on a machine that also has AVX-512;
later runs reuse that build while the checkout (commit and local changes), the driver
sources, the options and the CPU are the same (--rebuild forces a build). Only the driver
target is built; the same build tree builds ggml's own harness with
`cmake --build DIR --target test-backend-ops`.

Why a driver and not test-backend-ops `perf` (ggml's own perf mode, also with --test-file):
  - threads: test-backend-ops sets the CPU backend to std::thread::hardware_concurrency()
    threads (main(), "TODO: better value for n_threads"); there is no flag or environment
    variable for it, so --threads could not be honoured (taskset would only squeeze those
    threads onto fewer cores).
  - inputs: every tensor of a --test-file case (test_generic_op) is filled uniform in
    [-1, 1], so its mask has no -inf at all, and the built-in FLASH_ATTN_EXT case's mask is
    random too (uniform, with about a fifth of it overwritten by random 128x64 blocks of -inf
    or 0), never causal. ggml's CPU kernel skips masked keys (key by key, or whole 64x64
    tiles), so a causal prefill cannot be expressed there: it would be timed doing all n^2
    pairs instead of n(n+1)/2.
  - cache: perf mode adds the same node to one graph many times and reruns it on the same
    tensors for >= 1 s, so the KV of the shapes that fit or nearly fit the 32 MiB L3 (32/8
    d128 b1 ctx4096: 16 MiB; 4/1 d256 b8 ctx4096: 32 MiB) stays there between calls, which
    attnkit's benchmark prevents by rotating over KV copies.
  - it reports the mean over all runs, not a median.
The driver calls the op the way llama.cpp does (q f32 [D, Q, H, B], k/v [D, CTX, KV, B]
contiguous, mask f16 [CTX, Q] with 0 / -inf, sinks f32 [H], scale 1/sqrt(D), GGML_PREC_F32),
one one-node graph per KV copy ("layer", each with its own random data; as many as reach
--min-rotate-mib, at most 64), sets the thread count with ggml_backend_cpu_set_n_threads
and times each ggml_backend_graph_compute with std::chrono::steady_clock.

Verification: after timing, every run compares one layer's output with attention computed
in double from the same inputs (every head; first and last sequence; first, middle and last
query token; the reference applies the causal rule by position, not through the mask
tensor) and reports the normalized squared error (NMSE). A run fails if any output is not
finite or NMSE > 1e-2. ggml's own flash attention test allows 5e-4, but against ggml's
reference path (the same per-row kernel), not exact attention; over these longer contexts
the f16 V accumulator of that path can drift further from exact attention, while a wrong
mask, a missing sink or garbage should give NMSE of order 0.1-1.

What is and is not the same as attnkit's CPU_FLASH row:
  - attnkit times forward(): the cache update of the step's tokens plus attention over a
    paged bf16 cache (page 16, blocks in random physical order), bf16 queries. ggml times
    attention only, over contiguous per-sequence K/V, f32 queries. KV f16 is ggml's usual
    cache type; bf16 is the like-for-like one.
  - B decode sequences are the op's 4th dimension (llama.cpp's per-sequence KV layout, no
    mask: every key is visible). With a unified cache llama.cpp would instead pass one
    [B*CTX] cache and a block-diagonal mask, a different cost.
  - ggml picks its kernel per call (src/ggml-cpu/ops.cpp,
    ggml_compute_forward_flash_attn_ext_f16, as of ggml d99724f2): one query token of one
    sequence over >= 512 f16 keys splits the keys across threads; >= 64 query tokens with
    f16 KV take the tiled path (64x64 tiles converted to f32, f32 GEMMs, fully masked tiles
    skipped); everything else (all bf16 shapes, decode with B > 1) takes the per-row path:
    each (query, head, sequence) row runs an online softmax one key at a time, the query
    converted to K's type for the dot products.
  - Prefill rows also rotate (as in attnkit's benchmark), although they are compute bound.
  - The mixed prefill + decode step of cpu_attention_bench has no single-op equivalent
    here (one op has one query length) and is not run.

Output: one row per shape and KV type: median and fastest call (ms), KV GB/s (unique KV
bytes read, B * CTX * KV * 2D * element bytes, per median time, decimal GB), GFLOP/s (4 D
per visible (query, key, head); causal: query j of Q over CTX keys sees CTX - Q + j + 1),
layers rotated over, and the check. --csv prints the same as CSV on stdout (the header lines
then go to stderr). Exit status: 0 when every run passed (or skipped), 1 when a run or a
check failed, 2 on bad arguments.
"""

import argparse
import csv
import hashlib
import json
import os
import pathlib
import re
import shutil
import statistics
import subprocess
import sys
from dataclasses import dataclass

REPO = pathlib.Path(__file__).resolve().parent.parent
DRIVER_DIR = REPO / "bench" / "ggml_peer_driver"
DRIVER_TARGET = "ggml_fa_peer"
KV_TYPES = ("f16", "bf16")  # ggml GGML_TYPE_F16 = 1, GGML_TYPE_BF16 = 30; both 2 bytes
KV_ELEMENT_BYTES = 2
NMSE_LIMIT = 1e-2
SKIP_MESSAGE = "skipped: no ggml checkout; pass --ggml-dir PATH"


@dataclass(frozen=True)
class Shape:
    name: str
    heads: int
    kv_heads: int
    head_size: int
    batch: int
    context: int
    query_len: int = 1
    causal: bool = False
    sinks: bool = False

    def kv_bytes(self):
        return (self.batch * self.context * self.kv_heads * 2 * self.head_size
                * KV_ELEMENT_BYTES)

    def flops(self):
        if self.causal:
            # Query j (0-based) sits at position context - query_len + j.
            per_seq = sum(self.context - self.query_len + j + 1 for j in range(self.query_len))
        else:
            per_seq = self.query_len * self.context
        return 4.0 * self.head_size * self.heads * self.batch * per_seq


# Names as in bench/cpu_attention_bench.cpp where that benchmark has the shape, so rows line
# up and --only selects the same ones; b1 ctx4096 and b8 ctx16384 are extra here.
SHAPES = [
    Shape("decode 32/8 d128 b1 ctx4096", 32, 8, 128, 1, 4096),
    Shape("decode 32/8 d128 b1 ctx16384", 32, 8, 128, 1, 16384),
    Shape("decode 32/8 d128 b8 ctx4096", 32, 8, 128, 8, 4096),
    Shape("decode 32/8 d128 b8 ctx16384", 32, 8, 128, 8, 16384),
    Shape("decode 32/8 d128 b32 ctx1024", 32, 8, 128, 32, 1024),
    Shape("decode gemma3-1b 4/1 d256 b8 ctx4096", 4, 1, 256, 8, 4096),
    Shape("decode gpt-oss 64/8 d64 sinks b8 ctx4096", 64, 8, 64, 8, 4096, sinks=True),
    Shape("prefill 32/8 d128 512 causal", 32, 8, 128, 1, 512, 512, causal=True),
    Shape("prefill 32/8 d128 2048 causal", 32, 8, 128, 1, 2048, 2048, causal=True),
]

CSV_FIELDS = ["shape", "kv_type", "heads", "kv_heads", "head_size", "batch", "context",
              "query_len", "causal", "sinks", "threads", "repeats", "median_ms", "min_ms",
              "kv_gb_per_s", "gflop_per_s", "layers", "layer_mib", "check_nmse", "check",
              "ggml_commit"]


def log(*parts, file=sys.stderr):
    print(*parts, file=file, flush=True)


def git_state(ggml_dir):
    """The checkout's commit and a digest of its local changes ('' where git cannot tell)."""
    try:
        head = subprocess.run(["git", "-C", str(ggml_dir), "rev-parse", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        diff = subprocess.run(["git", "-C", str(ggml_dir), "diff", "HEAD"],
                              capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return ""
    return head + ("+" + hashlib.sha256(diff).hexdigest()[:12] if diff else "")


def cpu_signature():
    """Model and feature flags of this CPU: a GGML_NATIVE build is only valid on its CPU."""
    try:
        lines = pathlib.Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return ""
    keep = [ln for ln in lines if ln.split(":")[0].strip() in ("model name", "flags")]
    return hashlib.sha256("\n".join(sorted(set(keep))).encode()).hexdigest()[:16]


def cpu_model():
    """The CPU's model name from /proc/cpuinfo ('?' where it cannot be read)."""
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


# ggml's instruction-set options per --isa: the CPU's own (GGML_NATIVE), or AVX2 + FMA + F16C
# only, which with ATTNKIT_CPU_ISA=avx2 on attnkit's side compares the AVX2 kernels of both on a
# machine that also has AVX-512.
GGML_ISA_OPTIONS = {
    "native": ["-DGGML_NATIVE=ON"],
    "avx2": ["-DGGML_NATIVE=OFF", "-DGGML_AVX=ON", "-DGGML_AVX2=ON", "-DGGML_FMA=ON",
             "-DGGML_F16C=ON", "-DGGML_BMI2=ON", "-DGGML_AVX512=OFF", "-DGGML_AVX_VNNI=OFF"],
}


def cmake_options(ggml_dir, isa):
    return [
        "-DCMAKE_BUILD_TYPE=Release",
        f"-DGGML_PEER_GGML_DIR={ggml_dir}",
        "-DGGML_CPU=ON",  # every other backend is off by default
        "-DGGML_BLAS=OFF",
        *GGML_ISA_OPTIONS[isa],
        "-DGGML_OPENMP=ON",
        "-DGGML_BUILD_TESTS=ON",
        "-DGGML_BUILD_EXAMPLES=OFF",
        "-DBUILD_SHARED_LIBS=OFF",
        # ggml's two opt-in downloads (KleidiAI on Arm, LLVM OpenMP on Windows), off
        # explicitly: nothing is fetched.
        "-DGGML_CPU_KLEIDIAI=OFF",
        "-DGGML_OPENMP_FETCH=OFF",
    ]


def build_stamp(ggml_dir, options):
    digest = hashlib.sha256()
    for f in sorted(DRIVER_DIR.iterdir()):
        if f.is_file():
            digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return {"ggml_dir": str(ggml_dir), "ggml_state": git_state(ggml_dir),
            "driver": digest.hexdigest(), "cmake": options, "cpu": cpu_signature()}


def run_logged(cmd, log_file):
    log_file.write("$ " + " ".join(cmd) + "\n")
    log_file.flush()
    return subprocess.run(cmd, stdout=log_file, stderr=subprocess.STDOUT).returncode


def ensure_built(ggml_dir, build_dir, jobs, rebuild, isa):
    """Path of the driver binary, configuring and building it first where needed."""
    binary = build_dir / "bin" / DRIVER_TARGET
    stamp_path = build_dir / "ggml_peer_stamp.json"
    options = cmake_options(ggml_dir, isa)
    stamp = build_stamp(ggml_dir, options)
    if not rebuild and binary.is_file() and stamp_path.is_file():
        try:
            if json.loads(stamp_path.read_text()) == stamp:
                log(f"using the existing build in {build_dir} (--rebuild to rebuild)")
                return binary
        except ValueError:
            pass
    if shutil.which("cmake") is None:
        sys.exit("error: cmake not found (needed to build ggml)")
    build_dir.mkdir(parents=True, exist_ok=True)
    stamp_path.unlink(missing_ok=True)
    log_path = build_dir / "ggml_peer_build.log"
    log(f"building ggml from {ggml_dir} into {build_dir} (-j{jobs}; log: {log_path})")
    with open(log_path, "w") as lf:
        ok = (run_logged(["cmake", "-S", str(DRIVER_DIR), "-B", str(build_dir), *options], lf)
              == 0 and
              run_logged(["cmake", "--build", str(build_dir), "--target", DRIVER_TARGET,
                          "-j", str(jobs)], lf) == 0)
    if not ok or not binary.is_file():
        tail = log_path.read_text(errors="replace").splitlines()[-30:]
        log("\n".join(tail))
        sys.exit(f"error: building ggml failed (full log: {log_path})")
    stamp_path.write_text(json.dumps(stamp, indent=1) + "\n")
    return binary


def run_shape(binary, shape, kv_type, args):
    """The driver's JSON result for one shape and KV type, or None (error printed)."""
    cmd = [str(binary), "--heads", str(shape.heads), "--kv-heads", str(shape.kv_heads),
           "--head-size", str(shape.head_size), "--batch", str(shape.batch),
           "--context", str(shape.context), "--query-len", str(shape.query_len),
           "--causal", str(int(shape.causal)), "--sinks", str(int(shape.sinks)),
           "--kv-type", kv_type, "--threads", str(args.threads), "--warmup", str(args.warmup),
           "--repeats", str(args.repeats), "--min-rotate-mib", str(args.min_rotate_mib)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0 or not p.stdout.strip():
        log(f"error: {shape.name} {kv_type}: driver exited {p.returncode}\n{p.stderr.strip()}")
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def load_average():
    try:
        return " ".join(pathlib.Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def positive_int(text):
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return value


def parse_args():
    ap = argparse.ArgumentParser(
        description="Times ggml's CPU flash attention on cpu_attention_bench's shapes.")
    ap.add_argument("--ggml-dir", default=os.environ.get("GGML_DIR"),
                    help="local ggml checkout (default: $GGML_DIR)")
    ap.add_argument("--build-dir", type=pathlib.Path,
                    help="where ggml and the driver are built (default: /tmp/ggml-peer-build, "
                         "/tmp/ggml-peer-build-avx2 with --isa avx2)")
    ap.add_argument("--isa", choices=sorted(GGML_ISA_OPTIONS), default="native",
                    help="native: ggml built for this CPU (GGML_NATIVE), attnkit on its best "
                         "kernels; avx2: ggml built for AVX2 + FMA + F16C and attnkit run "
                         "with ATTNKIT_CPU_ISA=avx2 (default: %(default)s)")
    ap.add_argument("--rebuild", action="store_true", help="build even if a build exists")
    ap.add_argument("--jobs", type=positive_int, default=2,
                    help="parallel build jobs (default: %(default)s)")
    ap.add_argument("--threads", type=positive_int, default=2,
                    help="threads of ggml's CPU backend (default: %(default)s)")
    ap.add_argument("--repeats", type=positive_int, default=9,
                    help="timed calls per shape; the median is reported (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed calls before them (default: %(default)s)")
    ap.add_argument("--min-rotate-mib", type=int, default=256,
                    help="KV copies rotated through reach this size; 0 leaves one copy, "
                         "which lets small shapes stay in cache (default: %(default)s)")
    ap.add_argument("--only", metavar="SUBSTRING",
                    help="only shapes whose name contains SUBSTRING")
    ap.add_argument("--kv-types", nargs="+", choices=KV_TYPES, default=list(KV_TYPES),
                    help="KV cache types (default: f16 bf16)")
    ap.add_argument("--csv", action="store_true",
                    help="print CSV on stdout instead of the table")
    ap.add_argument("--attnkit", metavar="CPU_ATTENTION_BENCH", type=pathlib.Path,
                    help="also time attnkit's CPU_FLASH with this cpu_attention_bench "
                         "binary, alternating with ggml shape by shape, and print the ratios")
    ap.add_argument("--rounds", type=positive_int, default=3,
                    help="with --attnkit: alternating rounds per shape; medians over the "
                         "rounds are compared (default: %(default)s)")
    args = ap.parse_args()
    if args.warmup < 0 or args.min_rotate_mib < 0:
        ap.error("--warmup and --min-rotate-mib must be >= 0")
    if args.build_dir is None:
        suffix = "" if args.isa == "native" else f"-{args.isa}"
        args.build_dir = pathlib.Path(f"/tmp/ggml-peer-build{suffix}")
    return args


def run_attnkit(bench, shape, args):
    """CPU_FLASH's row for one shape from cpu_attention_bench: (rate, read ceiling GB/s,
    FMA ceiling GFLOP/s, isa), rate in KV GB/s for decode and GFLOP/s for prefill."""
    cmd = [str(bench), "--threads", str(args.threads), "--repeats", str(args.repeats),
           "--no-reference", "--no-baseline", "--only", shape.name]
    env = dict(os.environ)
    if args.isa != "native":
        env["ATTNKIT_CPU_ISA"] = args.isa
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        log(f"error: {shape.name}: cpu_attention_bench exited {p.returncode}\n{p.stderr}")
        return None
    isa = re.search(r"cpu isa (\S+)", p.stdout)
    ceil = re.search(r"^ceilings: read ([0-9.]+) GB/s(?: \([^)]*\))?, fp32 FMA \(\S+\) "
                     r"([0-9.]+) GFLOP/s", p.stdout, re.M)
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if cells and cells[0] == shape.name:
            rate = float(cells[3]) if shape.query_len == 1 else float(cells[5])
            return (rate, float(ceil.group(1)) if ceil else float("nan"),
                    float(ceil.group(2)) if ceil else float("nan"),
                    isa.group(1) if isa else "?")
    log(f"error: {shape.name}: no row in cpu_attention_bench's output")
    return None


def side_by_side(binary, shapes, args):
    """attnkit / ggml per shape, the two alternating, medians over --rounds rounds."""
    print("\n| shape | unit | attnkit CPU_FLASH (bf16) | attnkit ISA | % of ceiling | ggml f16 "
          "| ggml bf16 | attnkit / best ggml |\n|---|---|---|---|---|---|---|---|", flush=True)
    failed = 0
    advised = set()
    for shape in shapes:
        ours, ceilings, theirs = [], [], {t: [] for t in args.kv_types}
        isa = "?"
        for _ in range(args.rounds):
            a = run_attnkit(args.attnkit, shape, args)
            if a is None:
                failed += 1
                break
            ours.append(a[0])
            isa = a[3]
            ceilings.append(a[1] if shape.query_len == 1 else a[2])
            for kv_type in args.kv_types:
                r = run_shape(binary, shape, kv_type, args)
                if r is None or not r["finite"] or r["check_nmse"] is None or \
                        r["check_nmse"] > NMSE_LIMIT:
                    failed += 1
                    continue
                advised.add(bool(r.get("huge_pages_advised")))
                seconds = r["median_ms"] * 1e-3
                theirs[kv_type].append(shape.kv_bytes() / seconds / 1e9 if shape.query_len == 1
                                       else shape.flops() / seconds / 1e9)
        if not ours:
            continue
        mine = statistics.median(ours)
        ceiling = statistics.median(ceilings)
        peer = {t: statistics.median(v) for t, v in theirs.items() if v}
        best = max(peer.values()) if peer else float("nan")
        cell = {t: f"{peer[t]:.2f}" if t in peer else "-" for t in KV_TYPES}
        unit = "KV GB/s" if shape.query_len == 1 else "GFLOP/s"
        print(f"| {shape.name} | {unit} | {mine:.2f} | {isa} | {100 * mine / ceiling:.0f}% | "
              f"{cell['f16']} | {cell['bf16']} | {mine / best:.2f} |", flush=True)
    if advised:
        print("\nggml's tensors: " + ("advised for transparent huge pages, as attnkit's caches "
                                     "and read ceiling are (ATTNKIT_HUGE_PAGES)" if advised == {True}
                                     else "in 4 KiB pages" if advised == {False}
                                     else "some advised for huge pages, some not"), flush=True)
    return failed


def main():
    args = parse_args()
    if not args.ggml_dir or not pathlib.Path(args.ggml_dir).is_dir():
        where = f" ({args.ggml_dir} does not exist)" if args.ggml_dir else ""
        print(SKIP_MESSAGE + where)
        return 0
    ggml_dir = pathlib.Path(args.ggml_dir).resolve()
    if not (ggml_dir / "include" / "ggml.h").is_file():
        log(f"error: {ggml_dir} is not a ggml checkout (no include/ggml.h)")
        return 2
    shapes = [s for s in SHAPES if not args.only or args.only in s.name]
    if not shapes:
        log(f"error: no shape name contains {args.only!r}; shapes: "
            + "; ".join(s.name for s in SHAPES))
        return 2

    binary = ensure_built(ggml_dir, args.build_dir.resolve(), args.jobs, args.rebuild, args.isa)
    info = sys.stderr if args.csv else sys.stdout
    omp_env = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OMP_"))
    log(f"load average at start: {load_average()}", file=info)

    if args.attnkit is not None:
        if not args.attnkit.is_file():
            log(f"error: --attnkit {args.attnkit}: no such file")
            return 2
        log(f"machine: {cpu_model()}, {os.cpu_count()} CPUs; {args.threads} threads both; "
            f"--isa {args.isa}", file=info)
        log(f"attnkit: {args.attnkit}; {args.rounds} rounds per shape, attnkit then ggml "
            f"({' '.join(args.kv_types)}) in each; rates are medians over the rounds; "
            "% of ceiling: read bandwidth (decode) or fp32 FMA (prefill), measured by "
            "cpu_attention_bench in the same call", file=info)
        failed = side_by_side(binary, shapes, args)
        log(f"\nload average at end: {load_average()}", file=info)
        if failed:
            log(f"{failed} run(s) failed")
        return 1 if failed else 0

    writer = None
    if args.csv:
        writer = csv.DictWriter(sys.stdout, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
    failed = 0
    header_done = False
    for shape in shapes:
        for kv_type in args.kv_types:
            r = run_shape(binary, shape, kv_type, args)
            if r is None:
                failed += 1
                continue
            if not header_done:
                log(f"ggml {r['ggml_commit']} from {ggml_dir}, CPU backend compiled with "
                    f"{r['cpu_features']}; {args.threads} threads, {args.warmup} warm-up + "
                    f"{args.repeats} timed calls per row" + (f"; {omp_env}" if omp_env else "") +
                    ("; tensors advised for transparent huge pages, as attnkit's caches are"
                     if r.get("huge_pages_advised") else "; tensors in 4 KiB pages"),
                    file=info)
                if not args.csv:
                    print("\n| shape | KV | median ms | min ms | KV GB/s | GFLOP/s | layers | "
                          "check (NMSE) |\n|---|---|---|---|---|---|---|---|", flush=True)
                header_done = True
            seconds = r["median_ms"] * 1e-3
            nmse = r["check_nmse"]
            ok = r["finite"] and nmse is not None and nmse <= NMSE_LIMIT
            if not ok:
                failed += 1
            check = (f"ok ({nmse:.1e})" if ok else
                     f"FAILED (NMSE {nmse if nmse is not None else 'n/a'}, "
                     f"finite {r['finite']})")
            row = {"shape": shape.name, "kv_type": kv_type, "heads": shape.heads,
                   "kv_heads": shape.kv_heads, "head_size": shape.head_size,
                   "batch": shape.batch, "context": shape.context,
                   "query_len": shape.query_len, "causal": int(shape.causal),
                   "sinks": int(shape.sinks), "threads": args.threads,
                   "repeats": args.repeats, "median_ms": f"{r['median_ms']:.4f}",
                   "min_ms": f"{r['min_ms']:.4f}",
                   "kv_gb_per_s": f"{shape.kv_bytes() / seconds / 1e9:.3f}",
                   "gflop_per_s": f"{shape.flops() / seconds / 1e9:.2f}",
                   "layers": r["layers"], "layer_mib": f"{r['layer_mib']:.1f}",
                   "check_nmse": "" if nmse is None else f"{nmse:.3e}",
                   "check": "ok" if ok else "FAILED", "ggml_commit": r["ggml_commit"]}
            if writer:
                writer.writerow(row)
                sys.stdout.flush()
            else:
                print(f"| {shape.name} | {kv_type} | {row['median_ms']} | {row['min_ms']} | "
                      f"{row['kv_gb_per_s']} | {row['gflop_per_s']} | {r['layers']} x "
                      f"{row['layer_mib']} MiB | {check} |", flush=True)
    log(f"\nload average at end: {load_average()}", file=info)
    if failed:
        log(f"{failed} run(s) failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
