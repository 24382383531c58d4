"""``mxnet.numpy.linalg`` (``mx.np.linalg``): ``jax.numpy.linalg``'s functions on handles."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from ..handle import handle_function, ndarray


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    value = getattr(jnp.linalg, name, None)
    if value is None or not callable(value):
        raise AttributeError(f"mx.np.linalg.{name}: not a function of numpy.linalg that hybrid.mxnet has")
    value = handle_function(value, ndarray, name)
    globals()[name] = value
    return value
