"""pytest setup for attnkit's Python tests (tests/python/).

The package under test is the build tree's (PYTHONPATH=build/python, as ctest sets it) or an
installed one. Tests that need a CUDA GPU carry the `gpu` marker and are skipped, saying why,
where there is none: `pytest -m gpu` runs only them, `-m "not gpu"` the rest."""

import os
import shutil

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU and a CUDA build of attnkit")


def cuda_available() -> bool:
    """A CUDA build of attnkit on a machine with a GPU (asked of the library itself)."""
    import attnkit

    if not attnkit.has_cuda:
        return False
    return any(b["runnable"] for b in attnkit.backends()["backends"] if b["name"] == "CUDA_FLASH")


def pytest_collection_modifyitems(config, items):
    if cuda_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU and a CUDA build of attnkit (none here)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def cli():
    """The attnkit CLI of the same build (ATTNKIT_CLI, set by ctest), else one on PATH."""
    path = os.environ.get("ATTNKIT_CLI") or shutil.which("attnkit")
    if not path:
        pytest.skip("no attnkit CLI to compare with (set ATTNKIT_CLI)")
    return path
