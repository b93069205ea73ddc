#!/usr/bin/env python3
"""Every CPU attention kernel instantiation in the built library issues software prefetches.

The kernels' KV rows are strided across pages, which the hardware prefetchers do not follow;
without the software prefetches decode waits on memory (on AVX2 CPU_FLASH ran at 1.3-2.5x
lower bandwidth, CPU_MLA at 16 heads 1.13-1.26x slower). GCC once deleted them without a word
(kernels/cpu/prefetch.h says how), so this disassembles the library and fails for each
kernel of each ISA namespace that holds no prefetch instruction: CPU_FLASH's
ItemKernel<Kv, kDot> and AVX2's prefill OuterProductKernel<Kv> (their member functions),
CPU_MLA's mla_item<Kv, kDot>.

    kernel_prefetch_test.py LIBATTNKIT

Skips (exit 0, with the reason) off x86 or without objdump (binutils).
"""

import collections
import platform
import re
import shutil
import subprocess
import sys

FUNCTION = re.compile(r"^[0-9a-f]+ <(.*)>:$")
KERNELS = (
    re.compile(r"attnkit::cpu::(\w+_isa)::(ItemKernel|OuterProductKernel)<([^<>]+?)>::"),
    re.compile(r"attnkit::cpu_mla::(\w+_isa)::(mla_item)<([^<>]+?)>\("),
)
# Every kernel family the library must hold at least one instantiation of.
FAMILIES = ("ItemKernel", "OuterProductKernel", "mla_item")


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    if platform.machine() not in ("x86_64", "AMD64"):
        print(f"skipped: prefetch instructions are checked on x86 only, not {platform.machine()}")
        return 0
    objdump = shutil.which("objdump")
    if objdump is None:
        print("skipped: objdump (binutils) not found")
        return 0
    listing = subprocess.run([objdump, "-d", "-C", "--no-show-raw-insn", sys.argv[1]],
                             check=True, capture_output=True, text=True).stdout
    prefetches = collections.Counter()
    current = None
    for line in listing.splitlines():
        header = FUNCTION.match(line)
        if header:
            found = (k.search(header.group(1)) for k in KERNELS)
            kernel = next((m for m in found if m), None)
            current = kernel.groups() if kernel else None
            if current:
                prefetches[current] += 0
        elif current and "prefetch" in line:
            prefetches[current] += 1
    absent = [f for f in FAMILIES if not any(k[1] == f for k in prefetches)]
    if absent:
        print(f"FAIL: no {', '.join(absent)} instantiation in {sys.argv[1]}")
        return 1
    missing = [k for k, n in sorted(prefetches.items()) if n == 0]
    for isa, kernel, args in sorted(prefetches):
        n = prefetches[(isa, kernel, args)]
        print(f"{isa} {kernel}<{args}>: {n} prefetch instructions")
    isas = sorted({k[0] for k in prefetches})
    if missing:
        print("FAIL: kernels without a prefetch instruction: " +
              ", ".join(f"{isa} {kernel}<{args}>" for isa, kernel, args in missing))
        return 1
    print(f"ok: {len(prefetches)} kernels of {', '.join(isas)} all prefetch")
    return 0


if __name__ == "__main__":
    sys.exit(main())
