#!/usr/bin/env python3
"""Fails on an #include that runs against attnkit's layers (docs/architecture.md).

The layers and what each one links are read from src/CMakeLists.txt (its
attnkit_add_layer calls), so the rule lives in one place: the build enforces it through
include paths, and this check says the same thing about the sources without a build,
naming the file, the line and what that layer may include instead.

  - A file of a layer may include its own headers, the public headers (include/attnkit/)
    of the layers it links (directly or through them), and the internal headers of the
    layers below it that expose them (INTERNAL_PUBLIC: the kernels' building blocks, a
    backend leaf's factory header for the registry).
  - cli/, examples/ and bench/ are programs built on the library: public headers only
    (bench/ forces kernel variants through the documented options, core/options.h).
  - tests/ and fuzz/ may include anything.

Usage: scripts/check_layers.py [REPO]   (exit 0: clean; 1: forbidden includes; 2: usage)
"""

import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
SOURCE_SUFFIXES = {".h", ".cpp", ".cuh", ".cu", ".c"}
PROGRAM_DIRS = ("cli", "examples", "bench")


class Layer:
    def __init__(self, name, sources_dir, public_headers, deps, internal_public):
        self.name = name
        self.sources_dir = sources_dir
        self.public_headers = public_headers
        self.deps = deps
        self.internal_public = internal_public


def parse_layers(repo):
    text = (repo / "src" / "CMakeLists.txt").read_text()
    text = re.sub(r"#[^\n]*", "", text)  # comments
    backends = sorted(p.name for p in (repo / "src" / "backends").iterdir() if p.is_dir())
    leaf_targets = [f"attnkit_backend_{b}" for b in backends]
    layers = {}
    for call in re.finditer(r"\battnkit_add_layer\((.*?)\)", text, re.S):
        words = call.group(1).split()
        if not words or words[0] == "target":  # the function's own definition
            continue
        fields = {"SOURCES_DIR": [], "PUBLIC_HEADERS": [], "DEPS": []}
        key, internal_public = None, False
        for word in words[1:]:
            if word in fields:
                key = word
            elif word == "INTERNAL_PUBLIC":
                internal_public, key = True, None
            elif key:
                fields[key].append(word)
        deps = []
        for dep in fields["DEPS"]:
            if dep == "${ATTNKIT_BACKEND_TARGETS}":
                deps += leaf_targets
            elif dep.startswith("attnkit_"):
                deps.append(dep)
        names = [words[0]]
        sources = fields["SOURCES_DIR"]
        if words[0] == "${target}":  # the loop over src/backends/<name>/
            names = leaf_targets
            sources = [f"backends/{b}" for b in backends]
        for i, name in enumerate(names):
            layers[name] = Layer(name, sources[i] if i < len(sources) else sources[0],
                                 fields["PUBLIC_HEADERS"], deps, internal_public)
    if "attnkit_core" not in layers:
        sys.exit("check_layers: no attnkit_add_layer calls found in src/CMakeLists.txt")
    return layers


def below(layers, name, seen=None):
    """Every layer `name` links, directly or through others."""
    seen = set() if seen is None else seen
    for dep in layers[name].deps:
        if dep in layers and dep not in seen:
            seen.add(dep)
            below(layers, dep, seen)
    return seen


def owner_of_public(layers, header):
    # Generated into core's include path (build_config.h by configure_file, export.h by
    # GenerateExportHeader): every layer sees them.
    if header in ("attnkit/build_config.h", "attnkit/export.h"):
        return "attnkit_core"
    best = None
    for layer in layers.values():
        for prefix in layer.public_headers:
            if (header == prefix or header.startswith(prefix + "/")) and (
                    best is None or len(prefix) > best[1]):
                best = (layer.name, len(prefix))
    return best[0] if best else None


def owner_of_internal(layers, path):
    best = None
    for layer in layers.values():
        d = layer.sources_dir
        if path.startswith(d + "/") and (best is None or len(d) > best[1]):
            best = (layer.name, len(d))
    return best[0] if best else None


def main():
    if len(sys.argv) > 2:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    repo = pathlib.Path(sys.argv[1] if len(sys.argv) == 2 else ".").resolve()
    layers = parse_layers(repo)
    problems = []
    checked = 0
    for top in ("src", "include", *PROGRAM_DIRS):
        for path in sorted((repo / top).rglob("*")):
            if path.suffix not in SOURCE_SUFFIXES or not path.is_file():
                continue
            rel = path.relative_to(repo).as_posix()
            if top == "src":
                layer = owner_of_internal(layers, rel[len("src/"):])
            elif top == "include":
                layer = owner_of_public(layers, rel[len("include/"):])
            else:
                layer = None  # a program: public headers only
            if top in ("src", "include") and layer is None:
                problems.append(f"{rel}: belongs to no layer of src/CMakeLists.txt")
                continue
            allowed = {layer} | below(layers, layer) if layer else set()
            checked += 1
            for number, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                header = m.group(1)
                if (path.parent / header).is_file() and "/" not in header:
                    continue  # a file of the same folder
                if header.startswith("attnkit/"):
                    target = owner_of_public(layers, header)
                    ok = layer is None or target in allowed
                    kind = "public header"
                else:
                    target = owner_of_internal(layers, header)
                    ok = layer is not None and target is not None and (
                        target == layer or (target in allowed and layers[target].internal_public))
                    kind = "internal header"
                if not ok:
                    who = layer or f"{top}/ (a program)"
                    may = ("public headers (attnkit/...) only" if layer is None else
                           "its own headers and " + ", ".join(sorted(allowed - {layer})))
                    problems.append(f'{rel}:{number}: includes "{header}", an {kind} of '
                                    f"{target or 'no layer'}; {who} may include {may}")
    for p in problems:
        print(p)
    print(f"check_layers: {checked} files, {len(problems)} forbidden includes")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
