# Entry points (see README.md). Every target installs missing Debian packages first.
#   make demo          configure (demo preset: build-demo/, the CLI only, CPU kernels), build,
#                      run the demo
#   make test          configure, build, run every test (ctest --output-on-failure)
#   make format-check  clang-format --dry-run --Werror on every C++ source
#   make format        clang-format -i on every C++ source
#   make sanitize      make asan, then make tsan (docs/reliability.md)
#   make asan          Debug + AddressSanitizer + UBSan build, the whole CPU test suite
#   make tsan          clang-14 ThreadSanitizer build (LLVM libomp + Archer), the threaded
#                      CPU kernels, the KV cache (block pool) and the reliability tests
#   make fuzz          every libFuzzer target for FUZZ_SECONDS seconds each (default 60)
#   make check-layers  fail on an #include against the layers (scripts/check_layers.py)
#   make check-install install build/ into a temporary prefix, build and run examples/embed
#                      against it with find_package and with pkg-config
#   make tidy          clang-tidy over every .cpp of src/ and cli/ (.clang-tidy,
#                      scripts/clang_tidy.sh), warnings as errors; about 9 min on 2 cores
#   make tidy-ci       what CI runs, about 6.5 min on 2 cores: the same without the check
#                      performance-unnecessary-value-param and without the scalar and AVX2
#                      instantiations of the CPU SIMD kernels (the AVX-512 ones compile every
#                      kernel template path); simd_scalar.h, simd_avx2.h and that check are
#                      covered only by make tidy (CONTRIBUTING.md, clang-tidy)
# PRESET=debug, PRESET=asan or PRESET=tsan selects another CMake preset (CMakePresets.json).

PRESET ?= default
BUILD_DIR_default := build
BUILD_DIR_debug := build-debug
BUILD_DIR_asan := build-asan
BUILD_DIR_tsan := build-tsan
BUILD_DIR := $(BUILD_DIR_$(PRESET))
ATTNKIT := $(BUILD_DIR)/cli/attnkit

SOURCE_DIRS := $(wildcard include src cli tests bench examples fuzz)
CXX_SOURCES = $(shell find $(SOURCE_DIRS) -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)

FUZZ_SECONDS ?= 60

.PHONY: all deps configure build test demo format format-check check-layers check-install tidy \
	tidy-ci clean sanitize asan tsan fuzz

all: build

deps:
	scripts/install-deps.sh

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

test: build
	ctest --preset $(PRESET) --output-on-failure

# The demo builds only what it runs: the CLI and the library's CPU kernels (build-demo/).
demo: deps
	cmake --preset demo
	cmake --build --preset demo
	build-demo/cli/attnkit run --verify

# Each sanitizer build has its own directory and preset; the preset lists what it builds
# and runs (tsan: only the suites with threads or the block pool, see CMakePresets.json).
asan tsan: deps
	cmake --preset $@
	cmake --build --preset $@
	ctest --preset $@ --output-on-failure

sanitize: asan tsan

fuzz: deps
	scripts/fuzz.sh $(FUZZ_SECONDS)

format-check: deps
	clang-format --dry-run --Werror $(CXX_SOURCES)

check-layers:
	python3 scripts/check_layers.py

check-install: build
	scripts/check_install.sh $(BUILD_DIR)

format: deps
	clang-format -i $(CXX_SOURCES)

tidy: deps
	scripts/clang_tidy.sh

tidy-ci: deps
	scripts/clang_tidy.sh --ci

clean:
	rm -rf $(BUILD_DIR)
