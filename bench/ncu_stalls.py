#!/usr/bin/env python3
"""Where a kernel's warps wait, from Nsight Compute's per-instruction stall samples.

    ncu --set full --import-source no -k regex:KERNEL --launch-skip 40 --launch-count 1 \
        -o prof cuda_attention_bench --shape ...
    ncu -i prof.ncu-rep --page source --csv --print-source sass > source.csv
    python3 bench/ncu_stalls.py source.csv [--top 40]

Prints the warp stall samples of the whole kernel by reason, then by instruction class
(the opcode's first word: HGMMA, BAR, SYNCS, MUFU, ...) with each class's three largest
reasons, the warp instructions executed per class (when the CSV has "Instructions
Executed"), then the instructions with the most samples and their largest reasons. The
reasons are the CSV's per-reason sample columns (`stall_*`, as ncu names them, without
their "(Not Issued)" subsets); a CSV without them (an older ncu, or a report without
source counters) gives a message and exit status 1.
"""
import argparse
import collections
import csv
import sys


def number(text):
    try:
        return float(text.replace(",", "")) if text.strip() else 0.0
    except ValueError:
        return 0.0


def read_rows(path):
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    # ncu may print a banner before the CSV header; the header is the first line that
    # names the source column.
    start = next((i for i, line in enumerate(lines) if '"Source"' in line), None)
    if start is None:
        raise SystemExit(f"{path}: no CSV header with a \"Source\" column (is it --page source --csv?)")
    return list(csv.DictReader(lines[start:]))


def opcode_class(sass):
    words = sass.split()
    # Skip a predicate (@P0, @!PT) to the opcode, and keep its first dotted part.
    for w in words:
        if w.startswith("@"):
            continue
        return w.split(".")[0]
    return "?"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv", help="ncu --page source --csv --print-source sass output")
    ap.add_argument("--top", type=int, default=40, help="instructions to list (default 40)")
    args = ap.parse_args()

    rows = read_rows(args.csv)
    if not rows:
        raise SystemExit(f"{args.csv}: no instruction rows")
    # Per-reason sample columns; ncu also prints each reason's not-issued subset as
    # "stall_x (Not Issued)", left out so that no sample counts twice.
    reasons = [c for c in rows[0].keys() if c and c.startswith("stall_") and "(" not in c]
    if not reasons:
        print(f"{args.csv}: no per-reason stall columns (stall_*); columns are: "
              + ", ".join(k for k in rows[0].keys() if k), file=sys.stderr)
        return 1

    executed_col = next((c for c in rows[0].keys() if c == "Instructions Executed"), None)
    total = collections.Counter()
    by_class = collections.defaultdict(collections.Counter)
    executed = collections.Counter()
    per_inst = []
    for r in rows:
        sass = r.get("Source", "").strip()
        if executed_col:
            executed[opcode_class(sass)] += number(r.get(executed_col, ""))
        counts = {k: number(r.get(k, "")) for k in reasons}
        n = sum(counts.values())
        if n == 0:
            continue
        total.update(counts)
        cls = opcode_class(sass)
        by_class[cls].update(counts)
        by_class[cls]["_n"] += n
        per_inst.append((n, r.get("# Address", r.get("Address", "")), sass, counts))

    all_samples = sum(total.values())
    print(f"warp stall samples: {all_samples:.0f}")
    for k, v in total.most_common():
        if v > 0:
            print(f"  {k:<26} {v:8.0f} {100 * v / all_samples:5.1f}%")

    print("by instruction class (samples, share, largest reasons):")
    for cls, c in sorted(by_class.items(), key=lambda kv: -kv[1]["_n"]):
        n = c["_n"]
        if n < 0.002 * all_samples:
            continue
        top = [(k, v) for k, v in c.most_common() if k != "_n" and v > 0][:3]
        detail = ", ".join(f"{k[6:]} {100 * v / n:.0f}%" for k, v in top)
        print(f"  {cls:<12} {n:8.0f} {100 * n / all_samples:5.1f}%  {detail}")

    if executed:
        all_executed = sum(executed.values())
        print(f"warp instructions executed: {all_executed:.0f}, by class:")
        for cls, v in executed.most_common():
            if v >= 0.002 * all_executed:
                print(f"  {cls:<12} {v:12.0f} {100 * v / all_executed:5.1f}%")

    print(f"instructions with the most samples (top {args.top}):")
    per_inst.sort(key=lambda x: -x[0])
    for n, addr, sass, counts in per_inst[: args.top]:
        top = sorted(((v, k) for k, v in counts.items() if v > 0), reverse=True)[:2]
        detail = ", ".join(f"{k[6:]} {100 * v / n:.0f}%" for v, k in top)
        print(f"  {n:7.0f} {100 * n / all_samples:5.1f}%  {addr:>6}  {sass:<60} {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
