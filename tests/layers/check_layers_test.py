#!/usr/bin/env python3
"""scripts/check_layers.py against small trees: it passes a clean one and names every kind
of forbidden include (run by ctest as check_layers_test)."""

import pathlib
import shutil
import subprocess
import sys
import tempfile
import unittest

REPO = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "check_layers.py"


class CheckLayers(unittest.TestCase):
    def setUp(self):
        self.root = pathlib.Path(tempfile.mkdtemp())
        (self.root / "src").mkdir()
        shutil.copy(REPO / "src" / "CMakeLists.txt", self.root / "src" / "CMakeLists.txt")
        for folder in ("core", "kernels/cpu", "backend", "backends/one", "backends/two",
                       "selector"):
            (self.root / "src" / folder).mkdir(parents=True)
        for folder in ("core", "kernels", "backend", "selector"):
            (self.root / "include" / "attnkit" / folder).mkdir(parents=True)
        (self.root / "cli").mkdir()
        self.write("include/attnkit/core/enums.h", "#pragma once\n")
        self.write("include/attnkit/selector/selector.h", '#include "attnkit/core/enums.h"\n')
        self.write("src/kernels/cpu/simd.h", '#include "attnkit/core/enums.h"\n')
        self.write("src/backends/one/one.h", '#include "kernels/cpu/simd.h"\n')
        self.write("src/backends/two/two.cpp", '#include "two.h"\n')
        self.write("src/backends/two/two.h", "#pragma once\n")
        self.write("cli/main.cpp", '#include "attnkit/selector/selector.h"\n')

    def tearDown(self):
        shutil.rmtree(self.root)

    def write(self, rel, text):
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def run_check(self):
        return subprocess.run([sys.executable, str(SCRIPT), str(self.root)],
                              capture_output=True, text=True, check=False)

    def test_clean_tree_passes(self):
        result = self.run_check()
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("0 forbidden includes", result.stdout)

    def test_include_upward_fails(self):
        self.write("src/core/bad.cpp", '#include "attnkit/selector/selector.h"\n')
        result = self.run_check()
        self.assertEqual(result.returncode, 1)
        self.assertIn('src/core/bad.cpp:1: includes "attnkit/selector/selector.h"', result.stdout)
        self.assertIn("attnkit_selector", result.stdout)

    def test_sibling_backend_fails(self):
        self.write("src/backends/one/uses_two.cpp", '\n#include "backends/two/two.h"\n')
        result = self.run_check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("src/backends/one/uses_two.cpp:2", result.stdout)
        self.assertIn("attnkit_backend_two", result.stdout)

    def test_program_including_internals_fails(self):
        self.write("cli/peek.cpp", '#include "kernels/cpu/simd.h"\n')
        result = self.run_check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("public headers (attnkit/...) only", result.stdout)

    def test_kernels_including_a_backend_fails(self):
        self.write("src/kernels/cpu/bad.h", '#include "backends/one/one.h"\n')
        result = self.run_check()
        self.assertEqual(result.returncode, 1)
        self.assertIn("src/kernels/cpu/bad.h:1", result.stdout)


if __name__ == "__main__":
    unittest.main()
