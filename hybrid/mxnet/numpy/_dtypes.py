"""MXNet's dtype defaults for its NumPy interface, within what JAX holds."""
from __future__ import annotations

from typing import Any

import warnings

import jax
import numpy as np

__all__ = ["default_dtype", "float_default"]

_WIDE = {np.dtype("int64"): np.dtype("int32"), np.dtype("uint64"): np.dtype("uint32"),
         np.dtype("float64"): np.dtype("float32")}


def default_dtype(dtype: Any, requested: bool = False) -> np.dtype:
    """``dtype`` as JAX holds it. Without ``jax_enable_x64`` a 64-bit dtype becomes its 32-bit kind: that of
    a source (a NumPy int64 index array) silently, as JAX converts NumPy inputs; one the caller
    ``requested`` (``ones(..., dtype='int64')``) with a warning, once per dtype."""
    dtype = np.dtype(dtype)
    if dtype in _WIDE and not jax.config.jax_enable_x64:
        if requested and dtype not in _WARNED:
            _WARNED.add(dtype)
            warnings.warn(f"dtype {dtype} is held as {_WIDE[dtype]} because JAX's 64-bit mode is off (call "
                          f"jax.config.update('jax_enable_x64', True) at start-up for {dtype})", stacklevel=3)
        return _WIDE[dtype]
    return dtype


_WARNED: set[np.dtype] = set()


def float_default(dtype: Any) -> np.dtype:
    """A requested dtype: float32 when None (MXNet's default); Python's ``int`` is JAX's default integer
    (int32 unless 64-bit mode is on), ``float`` is float32."""
    if dtype is None or dtype is float:
        return np.dtype(np.float32)
    if dtype is int:
        return default_dtype(np.int64)
    return default_dtype(dtype, requested=True)
