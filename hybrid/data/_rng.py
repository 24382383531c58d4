"""The random stream of data transforms.

While DataLoader makes a batch (in the main process, a worker thread or a worker
process) random transforms draw from a generator seeded for that batch, so
augmentations are reproducible from ``hybrid.random.seed`` and do not depend on
the number or kind of workers. Outside a DataLoader they draw from
``hybrid.random.numpy_rng()``.
"""
from __future__ import annotations

import contextlib
import random as _py_random
import threading
from typing import Iterator

import numpy as np

from .. import random as _random

__all__ = ["transform_rng"]

_local = threading.local()


def transform_rng() -> np.random.Generator:
    """The NumPy generator a random transform should draw from now."""
    rng = getattr(_local, "rng", None)
    return rng if rng is not None else _random.numpy_rng()


@contextlib.contextmanager
def batch_seed(seed: tuple[int, int], reseed_globals: bool = False) -> Iterator[None]:
    """Make ``transform_rng()`` a generator seeded by ``seed`` in this thread.

    ``reseed_globals`` also seeds NumPy's legacy global generator and Python's
    ``random`` (done in worker processes, whose global state would otherwise be a
    copy of one parent's).
    """
    own, numpy_global, python_global = np.random.SeedSequence(list(seed)).spawn(3)
    if reseed_globals:
        np.random.seed(numpy_global.generate_state(1)[0])
        _py_random.seed(int(python_global.generate_state(1, np.uint64)[0]))
    previous, _local.rng = getattr(_local, "rng", None), np.random.default_rng(own)
    try:
        yield
    finally:
        _local.rng = previous
