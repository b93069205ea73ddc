#!/usr/bin/env python3
"""Builds the FlashInfer site folder that bench/cuda_peers_run.sh takes as PEER_TAR: an xz
tar whose top level is the contents of a Python site folder holding FlashInfer 0.7.4, its
runtime apache-tvm-ffi 0.1.15.post2 and a ninja binary, rebuilt from the pinned PyPI wheels.

    python3 bench/flashinfer_site.py [--out .whl/fi.tar.xz] [--work DIR]

The GPU machine has Python 3.12, torch, numpy, transformers, CUDA 13 and ninja, but no
network and no flashinfer or apache-tvm-ffi. bench/cuda_peers_run.sh unpacks the tar
(bench/device_step.sh, unpack_stage) into a peer/ folder and sets PYTHONPATH to it, so that
bench/cuda_peers.py can `import flashinfer` and have FlashInfer compile its kernels (JIT)
there. Everything a device call carries travels in at most 64 MiB, and the full wheels
unpack to far more (FlashInfer alone is a 100 MB wheel of ~14,700 files, most of them
kernel sources for backends the peers never build), so the site folder is trimmed to what
`import flashinfer` and the JIT builds of the attention modules need.

What is kept (everything else in the wheels is dropped):
  - flashinfer/, Python: the modules reachable from flashinfer/__init__.py through
    `import flashinfer...` / `from flashinfer... import` / relative imports and
    importlib.import_module("...") calls with a constant name, at any depth of the source
    (imports inside functions count), until nothing new is reached. The closure is computed
    statically with `ast`; nothing is imported. Beside each kept module, the package
    folder's small data files (*.json, *.txt, *.csv, py.typed); not its kernel sources
    (*.cu, *.cuh, *.h, *.c) or notes (*.md).
  - flashinfer/data/, the JIT's compile inputs: include/, cutlass/include/,
    cutlass/tools/util/include/, cccl/ (cub, libcudacxx, thrust), spdlog/, and the files at
    the top of csrc/ (the attention sources and their jinja templates); not the csrc/
    subfolders (other backends' kernels) nor the build scripts.
  - flashinfer_python-0.7.4.dist-info/: METADATA, WHEEL, entry_points.txt, top_level.txt,
    and RECORD cut down to the kept files. Not kept: the wheel's top-level b12x/ package,
    build_backend.py, build_utils.py, the licenses/ folder.
  - tvm_ffi/ from the cp311, cp312 and cp313 wheels laid over one another: the Python
    package, headers, cmake files, lib/libtvm_ffi.so (the same in all three) and the three
    core.cpython-3XX-x86_64-linux-gnu.so extensions side by side, so that any of those
    interpreters imports it; not tvm_ffi/src/, tvm_ffi/cython/ (C++ and Cython sources) or
    tvm_ffi/3rdparty/ (vendored code).
  - apache_tvm_ffi-0.1.15.post2.dist-info/: METADATA, WHEEL and entry_points.txt of the
    cp313 wheel (the last one laid down), licenses/, and RECORD listing the kept files.
  - bin/ninja: the binary of the PyPI ninja 1.13.2 wheel, a fallback for a machine without
    ninja on PATH.

The wheels come from `pip download --no-deps` (no other package is needed) into --work
(default: a temporary folder, removed at the end; a given folder is kept, and a second run
reuses the wheels already there). The tar is written with Python's tarfile and lzma (xz
preset 9: one block, 64 MiB dictionary), entries named ./PATH in sorted order, owner 0/0,
file times from the wheels: about 12 MiB packed, 5,430 files (129 MB) unpacked. The
script prints the tar's size and file count at the end.
"""

import argparse
import ast
import calendar
import io
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile

REPO = pathlib.Path(__file__).resolve().parent.parent

FLASHINFER = ("flashinfer-python", "0.7.4")
TVM_FFI = ("apache-tvm-ffi", "0.1.15.post2")
NINJA = ("ninja", "1.13.2")
# apache-tvm-ffi's core extension is built per interpreter; cp313 last, so its dist-info
# files are the ones kept.
TVM_FFI_PYTHONS = ("3.11", "3.12", "3.13")
TVM_FFI_PLATFORM = "manylinux_2_28_x86_64"  # the wheels carry manylinux_2_24 and _2_28

FLASHINFER_DIST_INFO = "flashinfer_python-0.7.4.dist-info"
FLASHINFER_DIST_INFO_FILES = ("METADATA", "WHEEL", "entry_points.txt", "top_level.txt")
# Data files kept beside the kept Python modules (not under flashinfer/data/).
PACKAGE_DATA_SUFFIXES = (".json", ".typed", ".txt", ".csv")
# Subtrees of flashinfer/data/ kept whole; of csrc/ only the files at its top level.
DATA_TREES = ("include", "cutlass/include", "cutlass/tools/util/include", "cccl/cub",
              "cccl/libcudacxx/include", "cccl/thrust", "spdlog/include")
DATA_CSRC = "csrc"

TVM_FFI_DIST_INFO = "apache_tvm_ffi-0.1.15.post2.dist-info"
TVM_FFI_DIST_INFO_FILES = ("METADATA", "WHEEL", "entry_points.txt")
TVM_FFI_DROPPED = ("tvm_ffi/3rdparty/", "tvm_ffi/src/", "tvm_ffi/cython/")

NINJA_BINARY = "ninja-1.13.2.data/scripts/ninja"


def log(*parts):
    print(*parts, file=sys.stderr, flush=True)


def download(name, version, dest, extra=()):
    """pip download one wheel (no dependencies) into dest; returns its path."""
    dest.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
           "--disable-pip-version-check", "-q", "-d", str(dest), *extra,
           f"{name}=={version}"]
    log("+", " ".join(cmd))
    subprocess.run(cmd, check=True)
    stem = name.replace("-", "_") + "-" + version + "-"
    wheels = sorted(p for p in dest.glob("*.whl") if p.name.startswith(stem))
    if len(wheels) != 1:
        raise SystemExit(f"expected one {name} {version} wheel in {dest}, found "
                         f"{[p.name for p in wheels]}")
    return wheels[0]


class Site:
    """The tar's files: path -> (zip file, member) or (bytes, mode, mtime)."""

    def __init__(self):
        self.files = {}

    def add_member(self, path, zf, info):
        self.files[path] = (zf, info)

    def add_bytes(self, path, data, mode=0o644, mtime=0):
        self.files[path] = (data, mode, mtime)

    def latest_mtime(self):
        return max((zip_mtime(v[1]) for v in self.files.values()
                    if isinstance(v[0], zipfile.ZipFile)), default=0)


def zip_mtime(info):
    return calendar.timegm(info.date_time + (0, 0, -1))


def zip_mode(info):
    mode = (info.external_attr >> 16) & 0o7777
    return mode or 0o644


def module_index(zf):
    """flashinfer module name -> its .py member, for every module in the wheel."""
    index = {}
    for name in zf.namelist():
        if name.startswith("flashinfer/") and name.endswith(".py"):
            parts = name[:-3].split("/")
            if parts[-1] == "__init__":
                parts.pop()
            index[".".join(parts)] = name
    return index


def imported_modules(module, path, source, index):
    """flashinfer modules named by the imports of one module (anywhere in its source), with
    their parent packages."""
    is_package = path.endswith("/__init__.py")
    package = module if is_package else module.rpartition(".")[0]

    def resolve(level, name):
        base = package.split(".")
        if level > 1:
            base = base[:len(base) - (level - 1)]
        return ".".join(base + ([name] if name else []))

    names = set()
    for node in ast.walk(ast.parse(source, filename=path)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = resolve(node.level, node.module) if node.level else (node.module or "")
            names.add(target)
            # `from pkg import sub` imports the submodule pkg.sub when there is one.
            names.update(f"{target}.{a.name}" for a in node.names
                         if f"{target}.{a.name}" in index)
        elif (isinstance(node, ast.Call) and node.args
              and getattr(node.func, "attr", getattr(node.func, "id", None)) == "import_module"
              and isinstance(node.args[0], ast.Constant)
              and isinstance(node.args[0].value, str)):
            name = node.args[0].value
            if name.startswith("."):
                stripped = name.lstrip(".")
                name = resolve(len(name) - len(stripped), stripped)
            names.add(name)
    found = set()
    for name in names:
        if name == "flashinfer" or name.startswith("flashinfer."):
            parts = name.split(".")
            found.update(".".join(parts[:i]) for i in range(1, len(parts) + 1))
    return found


def import_closure(zf):
    """Member paths of the modules reachable from flashinfer/__init__.py."""
    index = module_index(zf)
    keep, todo = {"flashinfer"}, ["flashinfer"]
    while todo:
        module = todo.pop()
        path = index[module]
        for name in imported_modules(module, path, zf.read(path), index):
            if name in index and name not in keep:
                keep.add(name)
                todo.append(name)
    return sorted(index[m] for m in keep)


def add_flashinfer(site, zf):
    members = {i.filename: i for i in zf.infolist() if not i.is_dir()}
    modules = import_closure(zf)
    kept = set(modules)
    folders = {m.rpartition("/")[0] for m in modules}
    for path, info in members.items():
        folder, _, base = path.rpartition("/")
        if folder in folders and base.endswith(PACKAGE_DATA_SUFFIXES):
            kept.add(path)
        elif any(path.startswith(f"flashinfer/data/{tree}/") for tree in DATA_TREES):
            kept.add(path)
        elif folder == f"flashinfer/data/{DATA_CSRC}":
            kept.add(path)
    for name in FLASHINFER_DIST_INFO_FILES:
        kept.add(f"{FLASHINFER_DIST_INFO}/{name}")
    for path in sorted(kept):
        site.add_member(path, zf, members[path])
    record = zf.read(f"{FLASHINFER_DIST_INFO}/RECORD").decode()
    lines = [line for line in record.splitlines() if line.split(",", 1)[0] in kept]
    lines.append(f"{FLASHINFER_DIST_INFO}/RECORD,,")
    site.add_bytes(f"{FLASHINFER_DIST_INFO}/RECORD", ("\n".join(lines) + "\n").encode())
    log(f"flashinfer: {len(modules)} Python modules, {len(kept) + 1} files of "
        f"{len(members)}")


def add_tvm_ffi(site, wheels):
    record = {}
    for wheel in wheels:  # later wheels overwrite the files the earlier ones share
        zf = zipfile.ZipFile(wheel)
        for line in zf.read(f"{TVM_FFI_DIST_INFO}/RECORD").decode().splitlines():
            record.setdefault(line.split(",", 1)[0], line)
        for info in zf.infolist():
            path = info.filename
            if info.is_dir():
                continue
            if path.startswith("tvm_ffi/") and not path.startswith(TVM_FFI_DROPPED):
                site.add_member(path, zf, info)
            elif (path in (f"{TVM_FFI_DIST_INFO}/{n}" for n in TVM_FFI_DIST_INFO_FILES)
                  or path.startswith(f"{TVM_FFI_DIST_INFO}/licenses/")):
                site.add_member(path, zf, info)
    kept = sorted(p for p in site.files if p.startswith(("tvm_ffi/", TVM_FFI_DIST_INFO)))
    lines = [record.get(p, f"{p},,") for p in kept]
    lines.append(f"{TVM_FFI_DIST_INFO}/RECORD,,")
    site.add_bytes(f"{TVM_FFI_DIST_INFO}/RECORD", ("\n".join(lines) + "\n").encode())
    log(f"apache-tvm-ffi: {len(kept) + 1} files")


def add_ninja(site, wheel):
    zf = zipfile.ZipFile(wheel)
    info = zf.getinfo(NINJA_BINARY)
    site.add_bytes("bin/ninja", zf.read(info), 0o755, zip_mtime(info))


def write_tar(site, out):
    """xz tar of the site: ./ then every folder and file, sorted, folders first."""
    folders = set()
    for path in site.files:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[:i]) for i in range(1, len(parts) + 1))
    entries = sorted(list(site.files) + list(folders), key=lambda p: p.split("/"))
    folder_mtime = site.latest_mtime()
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".part")
    count = 0
    with tarfile.open(tmp, "w:xz", preset=9, format=tarfile.GNU_FORMAT) as tar:
        for path in [""] + entries:
            ti = tarfile.TarInfo("./" + path if path else ".")
            ti.uid = ti.gid = 0
            ti.uname = ti.gname = ""
            if path == "" or path in folders:
                ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, folder_mtime
                tar.addfile(ti)
                continue
            value = site.files[path]
            if isinstance(value[0], zipfile.ZipFile):
                zf, info = value
                data, ti.mode, ti.mtime = zf.read(info), zip_mode(info), zip_mtime(info)
            else:
                data, ti.mode, ti.mtime = value
                ti.mtime = ti.mtime or folder_mtime
            ti.size = len(data)
            tar.addfile(ti, io.BytesIO(data))
            count += 1
    tmp.replace(out)
    return count, len(folders) + 1


def parse_args():
    ap = argparse.ArgumentParser(
        description="Build the trimmed FlashInfer site folder tar for bench/cuda_peers_run.sh.")
    ap.add_argument("--out", type=pathlib.Path, default=REPO / ".whl" / "fi.tar.xz",
                    help="tar to write (default: .whl/fi.tar.xz of this checkout)")
    ap.add_argument("--work", type=pathlib.Path,
                    help="folder for the downloaded wheels (default: a temporary folder, "
                         "removed at the end)")
    return ap.parse_args()


def main():
    args = parse_args()
    start = time.monotonic()
    work = args.work or pathlib.Path(tempfile.mkdtemp(prefix="flashinfer_site."))
    try:
        fi_wheel = download(*FLASHINFER, work / "flashinfer")
        tvm_wheels = [
            download(*TVM_FFI, work / f"tvm_ffi-{v}",
                     ("--python-version", v, "--platform", TVM_FFI_PLATFORM))
            for v in TVM_FFI_PYTHONS]
        ninja_wheel = download(*NINJA, work / "ninja",
                               ("--platform", "manylinux_2_17_x86_64"))
        site = Site()
        add_flashinfer(site, zipfile.ZipFile(fi_wheel))
        add_tvm_ffi(site, tvm_wheels)
        add_ninja(site, ninja_wheel)
        files, folders = write_tar(site, args.out)
    finally:
        if args.work is None:
            shutil.rmtree(work, ignore_errors=True)
    unpacked = sum(len(v[0]) if isinstance(v[0], bytes) else v[1].file_size
                   for v in site.files.values())
    size = args.out.stat().st_size
    print(f"{args.out}: {size / 2**20:.1f} MiB ({size} bytes), {files} files and {folders} "
          f"folders, {unpacked / 1e6:.0f} MB of files, {time.monotonic() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
