"""pytest set-up of the faiss_ext Python tests: the import check, the GPU
skip and the seeded random generator."""

import os

import pytest

try:
    import faiss_ext  # noqa: F401
except ImportError as e:  # pragma: no cover - set-up error, not a test failure
    raise pytest.UsageError(
        "cannot import faiss_ext (%s): build it (cmake --build <build>) and run with "
        "PYTHONPATH=<build>/python /usr/bin/python3 -m pytest python_bindings/tests" % e)

#: Seed of every random generator in these tests (printed in the header).
SEED = int(os.environ.get("FAISS_EXT_TEST_SEED", "1234"))


def pytest_report_header(config):
    """Shows the seed, the module's location and the GPU count in the header."""
    return "faiss_ext: %s, GPUs: %d, seed: %d" % (
        faiss_ext.__file__, faiss_ext.get_num_gpus(), SEED)


def pytest_collection_modifyitems(config, items):
    """Skips the tests marked `gpu`, visibly and with the reason, without a GPU."""
    if faiss_ext.get_num_gpus() > 0:
        return
    skip = pytest.mark.skip(reason="no CUDA GPU here (faiss_ext.get_num_gpus() == 0)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def rng():
    """A numpy Generator seeded with SEED (the same data on every run)."""
    import numpy as np
    return np.random.default_rng(SEED)
