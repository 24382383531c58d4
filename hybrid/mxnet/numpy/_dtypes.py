"""MXNet's dtype defaults for its NumPy interface, within what JAX holds."""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

__all__ = ["default_dtype", "float_default"]

_WIDE = {np.dtype("int64"): np.dtype("int32"), np.dtype("uint64"): np.dtype("uint32"),
         np.dtype("float64"): np.dtype("float32")}


def default_dtype(dtype: Any, requested: bool = False) -> np.dtype:
    """``dtype`` as JAX holds it. Without ``jax_enable_x64`` a 64-bit dtype of a source (a NumPy int64 index
    array) becomes its 32-bit kind, as JAX converts NumPy inputs; a 64-bit dtype the caller ``requested``
    raises TypeError rather than being narrowed."""
    dtype = np.dtype(dtype)
    if dtype in _WIDE and not jax.config.jax_enable_x64:
        if requested:
            raise TypeError(f"dtype {dtype} needs JAX's 64-bit mode: call jax.config.update('jax_enable_x64', "
                            f"True) at start-up, or ask for {_WIDE[dtype]}")
        return _WIDE[dtype]
    return dtype


def float_default(dtype: Any) -> np.dtype:
    """A requested dtype: float32 when None (MXNet's default); Python's ``int`` is JAX's default integer
    (int32 unless 64-bit mode is on), ``float`` is float32."""
    if dtype is None or dtype is float:
        return np.dtype(np.float32)
    if dtype is int:
        return default_dtype(np.int64)
    return default_dtype(dtype, requested=True)
