import numpy as np
import pytest

import hybrid
from hybrid import autograd


@pytest.fixture(autouse=True)
def _fresh_state():
    """Each test starts from a fixed seed, predict mode and no recording."""
    hybrid.random.seed(1234)
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
