#!/usr/bin/env python3
"""Compares the PTX of one CUDA translation unit between the working tree and a git revision,
kernel by kernel, so that a change meant to leave some kernels' code alone can be checked
before any GPU time is spent.

    python3 scripts/ptx_compare.py BUILD SOURCE [--base REV] [--filter REGEX]

BUILD is a configured CUDA build folder with compile_commands.json; SOURCE the .cu file (as
it appears in the compile commands, e.g. src/backends/cuda_flash/sm90a/flash_wgmma.cu). The
file's PTX is generated with the build's own command line (`-c` replaced by `-ptx`) from the
working tree, then from REV (default HEAD) by `git stash` of the working tree's changes,
restored afterwards. Each .entry/.func is compared after dropping line and file markers and
renaming registers (%r12 -> %r): "identical" (the same text), "renamed" (the same
instructions under other register names), or "differs" with the instruction counts. Exit
status 1 when any function selected by --filter differs.
"""

import argparse
import json
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

FUNCTION = re.compile(r"^(?:\.visible |\.weak )?\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\S+?)\(?$")
REGISTER = re.compile(r"%(rd|rs|r|p|f|fd|h|hh)\d+")
LABEL = re.compile(r"\$L__BB\d+_\d+")


def ptx_command(build: Path, source: str) -> tuple[list[str], str]:
    for entry in json.loads((build / "compile_commands.json").read_text()):
        if entry["file"].endswith(source):
            args = shlex.split(entry["command"])
            if "-o" in args:
                i = args.index("-o")
                del args[i : i + 2]
            return [("-ptx" if a == "-c" else a) for a in args], entry["directory"]
    sys.exit(f"{source} is not in {build}/compile_commands.json")


def functions(ptx: str) -> dict[str, list[str]]:
    body = ptx.split(".section\t.debug")[0]
    out: dict[str, list[str]] = {}
    current = None
    for line in body.split("\n"):
        stripped = line.strip()
        if stripped.startswith((".loc", ".file", "//")):
            continue
        m = FUNCTION.match(line)
        if m:
            current = m.group(1)
            out[current] = []
        if current is not None:
            out[current].append(LABEL.sub("L", line))
    return out


def generate(command: list[str], directory: str, out: Path) -> str:
    subprocess.run(command + ["-o", str(out)], cwd=directory, check=True)
    return out.read_text()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("build", type=Path)
    parser.add_argument("source")
    parser.add_argument("--base", default="HEAD", help="git revision to compare with")
    parser.add_argument("--filter", default=".", help="regex on the mangled function names")
    args = parser.parse_args()
    command, directory = ptx_command(args.build.resolve(), args.source)
    repo = Path(subprocess.check_output(["git", "rev-parse", "--show-toplevel"], text=True).strip())
    with tempfile.TemporaryDirectory() as tmp:
        new = functions(generate(command, directory, Path(tmp) / "new.ptx"))
        head = subprocess.check_output(["git", "rev-parse", "HEAD"], cwd=repo, text=True).strip()
        # The branch checked out, if any, is what HEAD returns to (not its commit, which would
        # leave HEAD detached and the next commits on no branch).
        branch = subprocess.run(["git", "symbolic-ref", "--quiet", "--short", "HEAD"], cwd=repo,
                                capture_output=True, text=True).stdout.strip()
        base = subprocess.check_output(["git", "rev-parse", args.base], cwd=repo, text=True).strip()
        stashed = False
        if subprocess.run(["git", "diff", "--quiet", "HEAD"], cwd=repo).returncode != 0:
            subprocess.run(["git", "stash", "push", "--quiet"], cwd=repo, check=True)
            stashed = True
        try:
            if base != head:
                subprocess.run(["git", "checkout", "--quiet", base], cwd=repo, check=True)
            old = functions(generate(command, directory, Path(tmp) / "old.ptx"))
        finally:
            if base != head:
                subprocess.run(["git", "checkout", "--quiet", branch or head], cwd=repo, check=True)
            if stashed:
                subprocess.run(["git", "stash", "pop", "--quiet"], cwd=repo, check=True)
    selected = re.compile(args.filter)
    differs = 0
    for name in sorted(set(old) | set(new)):
        if not selected.search(name):
            continue
        a, b = old.get(name), new.get(name)
        if a is None or b is None:
            print(f"{'only in base' if b is None else 'new'}: {name}")
            differs += 1
            continue
        strip = lambda lines: [REGISTER.sub(r"%\1", l) for l in lines if ".reg " not in l]
        if a == b:
            verdict = "identical"
        elif strip(a) == strip(b):
            verdict = "renamed"
        else:
            verdict = f"differs ({len(strip(a))} -> {len(strip(b))} lines)"
            differs += 1
        print(f"{verdict}: {name}")
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
