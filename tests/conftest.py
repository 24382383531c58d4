import atexit
import os
import shutil
import tempfile

import numpy as np
import pytest

# The suite's persistent compilation cache: one fresh directory per test process (inherited by the
# subprocesses it starts), so results never depend on the user's cache and the user's cache is untouched.
_CACHE_DIR = tempfile.mkdtemp(prefix="hybrid-test-xla-")
os.environ["HYBRID_COMPILATION_CACHE"] = _CACHE_DIR
atexit.register(shutil.rmtree, _CACHE_DIR, ignore_errors=True)

import hybrid  # noqa: E402
from hybrid import autograd


# The fast core subset, ``pytest -m core``: the layering rules and the imperative core, in about a minute.
CORE_FILES = {"test_import_cycles.py", "test_parameter_interface.py", "test_modes.py", "test_parameter.py",
              "test_parameter_state.py", "test_block.py", "test_autograd.py", "test_record.py", "test_trainer.py",
              "test_graph.py", "test_op_traits.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name in CORE_FILES:
            item.add_marker(pytest.mark.core)


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts from a fixed seed, predict mode, no recording, and no compiled program kept from an
    earlier test's discarded blocks (so a test's first call of a block traces and compiles)."""
    hybrid.random.seed(1234)
    hybrid._compiled.cached_op.release_unused()
    autograd.set_recording(False)
    autograd.set_training(False)
    yield
    autograd.set_recording(False)
    autograd.set_training(False)


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def assert_close(actual, expected, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(np.asarray(actual, dtype=np.float64), np.asarray(expected, dtype=np.float64),
                               rtol=rtol, atol=atol)
