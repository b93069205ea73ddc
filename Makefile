# Entry points (see README.md). Every target installs missing Debian packages first.
#   make demo          configure (default preset), build, run the demo
#   make test          configure, build, run every test (ctest --output-on-failure)
#   make format-check  clang-format --dry-run --Werror on every C++ source
#   make format        clang-format -i on every C++ source
# PRESET=debug or PRESET=asan selects another CMake preset (CMakePresets.json).

PRESET ?= default
BUILD_DIR_default := build
BUILD_DIR_debug := build-debug
BUILD_DIR_asan := build-asan
BUILD_DIR := $(BUILD_DIR_$(PRESET))
ATTNKIT := $(BUILD_DIR)/cli/attnkit

SOURCE_DIRS := $(wildcard include src cli tests bench examples fuzz)
CXX_SOURCES = $(shell find $(SOURCE_DIRS) -type f \( -name '*.cpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)

.PHONY: all deps configure build test demo format format-check clean

all: build

deps:
	scripts/install-deps.sh

configure: deps
	cmake --preset $(PRESET)

build: configure
	cmake --build --preset $(PRESET)

test: build
	ctest --preset $(PRESET) --output-on-failure

demo: build
	$(ATTNKIT) run --verify

format-check: deps
	clang-format --dry-run --Werror $(CXX_SOURCES)

format: deps
	clang-format -i $(CXX_SOURCES)

clean:
	rm -rf $(BUILD_DIR)
