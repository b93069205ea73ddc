#!/usr/bin/env bash
# Installs the Debian 12 packages attnkit needs to build and test, but only those that are
# missing (checked with dpkg -s), so that a machine that has them all needs no root and no
# network. nvcc is optional (CUDA backends are built when it is found) and not installed here.
set -euo pipefail

packages=(
  cmake
  g++
  make
  nlohmann-json3-dev
  libcli11-dev
  libfmt-dev
  libspdlog-dev
  libdlpack-dev
  libgtest-dev
  libgmock-dev
  libbenchmark-dev
  clang-format
  clang-tidy  # make tidy (clang-tidy-14, run-clang-tidy-14)
  # scripts/check_layers.py (make check-layers); the Python package (python/): headers to
  # build its extension, pip for python/requirements-test.txt (below)
  python3
  python3-dev
  python3-pip
  # scripts/check_install.sh (make check-install): builds examples/embed with pkg-config
  pkgconf
  # tests/json/json_schema_test.py: every --json output against docs/schemas/
  python3-jsonschema
  # Sanitizers and fuzzing (make sanitize, make fuzz): clang-14 with its runtimes
  # (ASan/UBSan/TSan/libFuzzer) and LLVM's OpenMP runtime, whose Archer tool
  # (libarcher.so) makes OpenMP's synchronisation visible to ThreadSanitizer.
  clang-14
  libclang-rt-14-dev
  libomp-14-dev
)

missing=()
for package in "${packages[@]}"; do
  if ! dpkg -s "$package" >/dev/null 2>&1; then
    missing+=("$package")
  fi
done

# The Python tooling the build and tests/python need, from PyPI, for the python3 on PATH
# (the interpreter CMake finds): only when one is missing.
install_python_requirements() {
  local requirements
  requirements="$(dirname "$0")/../python/requirements-test.txt"
  if python3 -c "import nanobind, pytest, numpy, jsonschema, scikit_build_core" 2>/dev/null; then
    echo "install-deps: the Python requirements are installed"
    return
  fi
  echo "install-deps: pip install -r python/requirements-test.txt"
  # Debian's own python3 is externally managed (PEP 668): install for the user there.
  python3 -m pip install -q -r "$requirements" ||
    python3 -m pip install -q --user --break-system-packages -r "$requirements"
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages are installed"
  install_python_requirements
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; install them with apt-get" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update
"${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
install_python_requirements
