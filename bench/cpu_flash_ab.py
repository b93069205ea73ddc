#!/usr/bin/env python3
"""Before/after comparison of CPU_FLASH builds on one machine, alternating runs.

    python3 bench/cpu_flash_ab.py --bench build/bench/cpu_attention_bench \
        [--rounds 5] [--only decode] [--threads 2] [--repeats 3] NAME=LIBDIR ...

Each NAME=LIBDIR names a directory holding a libattnkit.so.* build (copied there by hand,
one per version of the kernels). One round runs the same cpu_attention_bench binary once per
library (LD_LIBRARY_PATH=LIBDIR; the order reverses every other round so neither side always
runs first), each call measuring its own read and FMA ceilings. Printed per shape: the median
rate over the rounds (KV GB/s for decode, GFLOP/s otherwise) and, for every library after the
first, the median over the rounds of its rate divided by the first's in the same round.
Set ATTNKIT_CPU_ISA in the environment to compare the kernels of one ISA (avx2, scalar).
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

CEILINGS = re.compile(r"^ceilings: read ([0-9.]+) GB/s(?: \([^)]*\))?, fp32 FMA \(\S+\) "
                      r"([0-9.]+) GFLOP/s", re.M)
ISA = re.compile(r"cpu isa (\S+)")


def variant(text):
    name, sep, libdir = text.partition("=")
    if not sep or not name or not os.path.isdir(libdir):
        raise argparse.ArgumentTypeError(f"expected NAME=LIBDIR with an existing LIBDIR, "
                                         f"got {text!r}")
    return name, libdir


def run(args, libdir):
    env = dict(os.environ, LD_LIBRARY_PATH=libdir)
    cmd = [args.bench, "--threads", str(args.threads), "--repeats", str(args.repeats),
           "--no-reference", "--no-baseline", "--only", args.only]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"error: {' '.join(cmd)} with LD_LIBRARY_PATH={libdir} exited "
                 f"{p.returncode}\n{p.stderr}")
    rows = {}
    for line in p.stdout.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) > 5 and cells[0].split(" ")[0] in ("decode", "prefill", "mixed"):
            rows[cells[0]] = float(cells[3]) if cells[0].startswith("decode") else float(cells[5])
    ceilings = CEILINGS.search(p.stdout)
    isa = ISA.search(p.stdout)
    return rows, ceilings, isa.group(1) if isa else "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", required=True, help="the cpu_attention_bench binary")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only", default="decode", help="shape name substring (default: decode)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("variants", nargs="+", type=variant, metavar="NAME=LIBDIR")
    args = ap.parse_args()
    if args.rounds < 1 or args.repeats < 1 or args.threads < 1:
        ap.error("--rounds, --repeats and --threads must be >= 1")
    rates = {name: {} for name, _ in args.variants}
    reads = {name: [] for name, _ in args.variants}
    isas = set()
    for r in range(args.rounds):
        order = args.variants if r % 2 == 0 else args.variants[::-1]
        for name, libdir in order:
            rows, ceilings, isa = run(args, libdir)
            isas.add(isa)
            if ceilings:
                reads[name].append(float(ceilings.group(1)))
            for shape, value in rows.items():
                rates[name].setdefault(shape, []).append(value)
    first = args.variants[0][0]
    print(f"cpu isa {', '.join(sorted(isas))}; {args.threads} threads; {args.rounds} rounds "
          f"of --repeats {args.repeats}")
    for name, _ in args.variants:
        if reads[name]:
            print(f"{name}: read ceiling median {statistics.median(reads[name]):.2f} GB/s")
    names = [n for n, _ in args.variants]
    print("\n| shape | " + " | ".join(names) + " |\n|---|" + "---|" * len(names))
    for shape, base in rates[first].items():
        cells = [f"{statistics.median(base):.2f}"]
        for name in names[1:]:
            mine = rates[name].get(shape, [])
            if len(mine) != len(base):
                cells.append("-")
                continue
            ratio = statistics.median(a / b for a, b in zip(mine, base))
            cells.append(f"{statistics.median(mine):.2f} (x{ratio:.2f})")
        print(f"| {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
