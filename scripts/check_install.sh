#!/usr/bin/env bash
# Installs a built tree into a temporary prefix and builds and runs examples/embed against
# the installed package twice, as an engine would: with CMake's find_package(attnkit) and
# with pkg-config. Usage: scripts/check_install.sh [BUILD_DIR] (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build_dir" --prefix "$prefix" >/dev/null
echo "check-install: installed into $prefix:"
(cd "$prefix" && find . -maxdepth 2 -path ./include/attnkit -prune -o -print | sort | sed 's/^/  /')
test -f "$prefix/lib/cmake/attnkit/attnkitConfig.cmake"
test -f "$prefix/lib/cmake/attnkit/attnkitConfigVersion.cmake"
test -f "$prefix/lib/pkgconfig/attnkit.pc"
test -f "$prefix/include/attnkit/export.h"

# The installed CLI runs from the prefix (its RPATH finds the installed library).
"$prefix/bin/attnkit" backends >/dev/null

# 1. CMake: find_package(attnkit) from the prefix only.
cmake -S examples/embed -B "$work/embed-cmake" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/embed-cmake" >/dev/null
echo "check-install: find_package build:"
"$work/embed-cmake/attnkit_embed" | tail -2 | sed 's/^/  /'

# 2. pkg-config.
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
flags=$(pkg-config --cflags --libs attnkit)
echo "check-install: pkg-config --cflags --libs attnkit: $flags"
# shellcheck disable=SC2086
c++ -O1 examples/embed/embed.cpp $flags -Wl,-rpath,"$prefix/lib" -o "$work/embed-pc"
echo "check-install: pkg-config build:"
"$work/embed-pc" | tail -2 | sed 's/^/  /'
echo "check-install: 2 passed, 0 failed"
