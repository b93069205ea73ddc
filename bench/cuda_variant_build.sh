#!/usr/bin/env bash
# Builds one variant of CUDA_FLASH's kernels from an existing CUDA build, for timing next to
# the default in one device call (bench/cuda_variant_run.sh):
#
#   bench/cuda_variant_build.sh BUILD HEADER OUT
#
# BUILD is a configured and built CUDA build folder (Ninja or Makefiles; it is only read);
# HEADER defines the compile-time switches of src/backends/cuda_flash (ATTNKIT_FLASH_*, e.g.
# bench/variants/*.h). Each of CUDA_FLASH's translation units whose recorded dependencies
# include flash_kernel.cuh, flash_launch.cuh or flash_wgmma_kernel.cuh (all of them when the
# build recorded none) is compiled again with BUILD's own command line
# (compile_commands.json) plus `-include HEADER`, into OUT/obj; libattnkit is linked again
# with BUILD's link command, those objects replacing BUILD's, into OUT/lib. With TESTS=1,
# OUT/bin/attnkit_backends_cuda_tests too: a copy of BUILD's libattnkit_internal.a with the
# variant objects replacing their namesakes (`ar r`), linked with the tests' recorded link
# command. Last it prints the registers, stack frame and spills (ptxas -v, kept in
# OUT/obj/*.ptxas.log) of the decode instances (flash_attention_kernel with one warp row) of
# each head size.
# NVCC_THREADS (default 2) is nvcc's --threads.
set -euo pipefail
if [ $# -ne 3 ]; then
  echo "usage: $0 BUILD HEADER OUT" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
header=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
mkdir -p "$3"
out=$(cd "$3" && pwd)
[ -f "$build/compile_commands.json" ] || { echo "$build has no compile_commands.json" >&2; exit 1; }
[ -f "$header" ] || { echo "no header $2" >&2; exit 1; }
mkdir -p "$out/obj" "$out/lib"

# plan.py writes the commands to run: compile.sh (cwd BUILD), link.sh (the library),
# and, with TESTS=1, tests.sh; and objects.txt (BUILD's object -> the variant's).
python3 - "$build" "$header" "$out" "${TESTS:-0}" "${NVCC_THREADS:-2}" <<'PY'
import json, os, re, shlex, subprocess, sys

build, header, out, tests, threads = sys.argv[1:6]
ninja = os.path.exists(os.path.join(build, "build.ninja"))
watched = ("flash_kernel.cuh", "flash_launch.cuh", "flash_wgmma_kernel.cuh")

def recorded_deps(obj_rel):
    """Headers BUILD's generator recorded for an object; None when it recorded none."""
    if ninja:
        r = subprocess.run(["ninja", "-C", build, "-t", "deps", obj_rel], capture_output=True,
                           text=True)
        lines = r.stdout.splitlines()
        return lines[1:] if r.returncode == 0 and len(lines) > 1 else None
    for name in (obj_rel + ".d", os.path.splitext(obj_rel)[0] + ".d"):
        path = os.path.join(build, name)
        if os.path.exists(path):
            return open(path).read().split()
    return None

variants = {}  # BUILD's object (relative to BUILD) -> the variant's object
compile_lines = []
for entry in json.load(open(os.path.join(build, "compile_commands.json"))):
    src = entry["file"]
    if "/backends/cuda_flash/" not in src or not src.endswith(".cu"):
        continue
    args = shlex.split(entry["command"])
    i = args.index("-o")
    obj = args[i + 1]
    obj_rel = os.path.relpath(os.path.join(entry["directory"], obj), build)
    deps = recorded_deps(obj_rel)
    if deps is not None and not any(d.endswith(watched) for d in deps):
        print(f"kept:       {os.path.relpath(src)} (includes none of {', '.join(watched)})")
        continue
    new_obj = os.path.join(out, "obj", os.path.basename(obj))
    args[i + 1] = new_obj
    args[1:1] = ["-include", header, f"--threads={threads}", "-Xptxas=-v"]
    variants[obj_rel] = new_obj
    log = shlex.quote(new_obj + ".ptxas.log")
    compile_lines.append(f"(cd {shlex.quote(entry['directory'])} && {shlex.join(args)}) "
                         f">{log} 2>&1 || {{ cat {log}; exit 1; }}")
    print(f"recompiled: {os.path.relpath(src)}")
if not variants:
    sys.exit("no CUDA_FLASH .cu file in compile_commands.json: is BUILD a CUDA build?")

def link_command(target_rel, target_name, target_dir):
    """(cwd, argv) of the command that links BUILD's file target_rel."""
    if ninja:
        r = subprocess.run(["ninja", "-C", build, "-t", "commands", target_rel],
                           capture_output=True, text=True, check=True)
        line = r.stdout.splitlines()[-1]
        # ": && c++ ... && :" or "... && cd tests && cmake (test discovery)"
        m = re.match(r"^: && (.*?) && (:|cd .*)$", line)
        return build, shlex.split(m.group(1) if m else line)
    d = os.path.join(build, target_dir)
    return d, shlex.split(open(os.path.join(d, "CMakeFiles", target_name + ".dir",
                                            "link.txt")).read().splitlines()[0])

def rewrite(cwd, argv, output, replace):
    """argv with -o's argument set to output and every object in replace swapped."""
    res = []
    for j, a in enumerate(argv):
        if j > 0 and argv[j - 1] == "-o":
            res.append(output)
            continue
        key = os.path.relpath(os.path.join(cwd, a), build) if not os.path.isabs(a) else \
            os.path.relpath(a, build)
        res.append(replace.get(key, a))
    return res

def library_file():
    for name in sorted(os.listdir(os.path.join(build, "src"))):
        if re.fullmatch(r"libattnkit\.so\.\d+\.\d+\.\d+", name):
            return "src/" + name
    sys.exit(f"no src/libattnkit.so.X.Y.Z in {build} (a shared build is needed)")

lib_rel = library_file()
cwd, argv = link_command(lib_rel, "attnkit", "src")
objects_in = [a for a in argv if a.endswith(".o")]
swapped = [a for a in objects_in
           if os.path.relpath(os.path.join(cwd, a), build) in variants]
if len(swapped) != len(variants):
    sys.exit(f"the library's link command names {len(swapped)} of the {len(variants)} objects")
lib_out = os.path.join(out, "lib", os.path.basename(lib_rel))
link = rewrite(cwd, argv, lib_out, variants)
with open(os.path.join(out, "link.sh"), "w") as f:
    f.write(f"cd {shlex.quote(cwd)} && {shlex.join(link)}\n")
with open(os.path.join(out, "compile.sh"), "w") as f:
    f.write("\n".join(compile_lines) + "\n")
with open(os.path.join(out, "objects.txt"), "w") as f:
    for k, v in variants.items():
        f.write(f"{k} {v}\n")
if tests == "1":
    archive_rel = "src/libattnkit_internal.a"
    archive = os.path.join(out, "obj", "libattnkit_internal.a")
    cwd, argv = link_command("tests/attnkit_backends_cuda_tests", "attnkit_backends_cuda_tests",
                             "tests")
    if not any(os.path.relpath(os.path.join(cwd, a), build) == archive_rel for a in argv):
        sys.exit("the tests' link command does not name " + archive_rel)
    link = rewrite(cwd, argv, os.path.join(out, "bin", "attnkit_backends_cuda_tests"),
                   {archive_rel: archive})
    with open(os.path.join(out, "tests.sh"), "w") as f:
        f.write(f"cp {shlex.quote(os.path.join(build, archive_rel))} {shlex.quote(archive)}\n")
        # ar r replaces the member of the same name (the objects' names are unique in it).
        f.write(f"ar r {shlex.quote(archive)} {shlex.join(variants.values())}\n")
        f.write(f"mkdir -p {shlex.quote(os.path.join(out, 'bin'))}\n")
        f.write(f"cd {shlex.quote(cwd)} && {shlex.join(link)}\n")
PY

echo "== compiling with -include $header"
bash -e "$out/compile.sh"
echo "== linking $out/lib"
bash -e "$out/link.sh"
lib=$(cd "$out/lib" && ls libattnkit.so.*.*.*)
soname=$(objdump -p "$out/lib/$lib" | awk '/SONAME/ {print $2}')
ln -sf "$lib" "$out/lib/$soname"
ln -sf "$soname" "$out/lib/libattnkit.so"
if [ "${TESTS:-0}" = 1 ]; then
  # Every member name must be unique for `ar r` to replace the right one.
  dups=$(ar t "$build/src/libattnkit_internal.a" | sort | uniq -d)
  [ -z "$dups" ] || { echo "duplicate members in libattnkit_internal.a: $dups" >&2; exit 1; }
  echo "== linking $out/bin/attnkit_backends_cuda_tests"
  bash -e "$out/tests.sh"
  rm -f "$out/obj/libattnkit_internal.a"
fi
cp "$header" "$out/variant.h"

# The toolkit's demangler where installed, else binutils' (the names are Itanium C++ ABI).
demangle=$(command -v cu++filt || command -v c++filt)
# Registers of the decode instances (one warp row: FlashConfig<D, 1, 1, ...>) from ptxas:
# object, compute type, cache type, configuration, registers, stack frame, spill bytes.
echo "== decode kernels (ptxas -v)"
for log in "$out"/obj/flash_attention_d*.o.ptxas.log; do
  awk -v obj="$(basename "${log%.ptxas.log}")" '
    /Function properties for/ { name = $NF; next }
    /bytes stack frame/ && name != "" { frame[name] = $1; st[name] = $5; ld[name] = $9; next }
    /Used [0-9]+ registers/ && name != "" {
      for (i = 1; i <= NF; ++i) if ($i == "Used") regs = $(i + 1)
      print obj "\t" name "\t" regs "\t" frame[name] "\t" st[name] "\t" ld[name]; name = ""
    }' "$log"
done | while IFS=$'\t' read -r obj mangled regs frame stores loads; do
  pretty=$(echo "$mangled" | "$demangle")
  case $pretty in *flash_attention_kernel*"FlashConfig<"*", 1, 1, "*) ;; *) continue ;; esac
  t=$(echo "$pretty" | sed 's/.*flash_attention_kernel<\([^,]*\),.*/\1/')
  kv=$(echo "$pretty" | grep -o 'FlashConfig<[^>]*>, [^,>]*' | sed 's/.*>, //')
  config=$(echo "$pretty" | grep -o 'FlashConfig<[^>]*>' | head -1)
  echo "$obj $t $kv $config: $regs registers, ${frame}-byte stack, spills ${stores}/${loads} bytes (stores/loads)"
done
