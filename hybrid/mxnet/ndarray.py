"""``mxnet.ndarray`` (``mx.nd``): MXNet's operators plus array creation and utilities, on ``jax.Array``.

Every MXNet operator of ``hybrid.mxnet.ops.F`` is an attribute (``nd.relu``, ``nd.contrib.BilinearResize2D``),
and the creation functions take MXNet's arguments (``ctx=`` places the array on that context's device,
default dtype float32). Arrays are immutable ``jax.Array``: ``x[:] = v`` raises JAX's TypeError (write
``x = x.at[:].set(v)``), ``x.asnumpy()`` raises (write ``np.asarray(x)``).
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import array_methods as _array_methods
from . import random  # noqa: F401  (mx.nd.random)
from ._params_io import load, save
from .context import to_device

__all__ = ["NDArray", "array", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "concat", "stack",
           "concatenate", "zeros_like", "ones_like", "waitall", "save", "load", "random", "from_numpy",
           "moveaxis"]

_array_methods.enable()

NDArray = jax.Array  # isinstance(x, nd.NDArray) holds for arrays and for values traced or recorded by JAX


def _placed(value: jax.Array, ctx: Any) -> jax.Array:
    return value if ctx is None else jax.device_put(value, to_device(ctx))


def _dtype(dtype: Any) -> Any:
    return "float32" if dtype is None else dtype


def array(source_array: Any, ctx: Any = None, dtype: Any = None) -> jax.Array:
    """An array holding ``source_array``: float32 unless ``dtype`` is given, except that a JAX array keeps its
    dtype (as MXNet keeps an NDArray's)."""
    if dtype is None and isinstance(source_array, jax.Array):
        return _placed(source_array, ctx)
    return _placed(jnp.asarray(np.asarray(source_array), dtype=_dtype(dtype)), ctx)


def from_numpy(ndarray: np.ndarray, zero_copy: bool = True) -> jax.Array:
    """A JAX array holding the NumPy array's values (its dtype kept)."""
    return jnp.asarray(ndarray)


def _shape(shape: Any) -> tuple:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def zeros(shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> jax.Array:
    """An array of zeros (float32 by default)."""
    return _placed(jnp.zeros(_shape(shape), _dtype(dtype)), ctx)


def ones(shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> jax.Array:
    """An array of ones (float32 by default)."""
    return _placed(jnp.ones(_shape(shape), _dtype(dtype)), ctx)


def full(shape: Any, val: Any, ctx: Any = None, dtype: Any = None, out: Any = None) -> jax.Array:
    """An array filled with ``val`` (float32 by default)."""
    return _placed(jnp.full(_shape(shape), val, _dtype(dtype)), ctx)


def empty(shape: Any, ctx: Any = None, dtype: Any = None) -> jax.Array:
    """MXNet's uninitialised array; zeros here (JAX has no uninitialised memory)."""
    return zeros(shape, ctx, dtype)


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1, infer_range: Any = None,
           ctx: Any = None, dtype: Any = None) -> jax.Array:
    """Evenly spaced values in [start, stop) (float32 by default), each repeated ``repeat`` times."""
    values = jnp.arange(start, stop, step, dtype=_dtype(dtype)) if stop is not None else \
        jnp.arange(0, start, step, dtype=_dtype(dtype))
    if repeat != 1:
        values = jnp.repeat(values, int(repeat))
    return _placed(values, ctx)


def linspace(start: float, stop: float, num: int, endpoint: bool = True, ctx: Any = None,
             dtype: Any = None) -> jax.Array:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32 by default)."""
    return _placed(jnp.linspace(start, stop, int(num), endpoint=endpoint, dtype=_dtype(dtype)), ctx)


def eye(N: int, M: int = 0, k: int = 0, ctx: Any = None, dtype: Any = None) -> jax.Array:
    """An N x M (M = 0: N x N) matrix with ones on the ``k``-th diagonal."""
    return _placed(jnp.eye(int(N), int(M) or None, int(k), dtype=_dtype(dtype)), ctx)


def zeros_like(data: Any, **kwargs: Any) -> jax.Array:
    """Zeros of ``data``'s shape and dtype."""
    return jnp.zeros_like(data)


def ones_like(data: Any, **kwargs: Any) -> jax.Array:
    """Ones of ``data``'s shape and dtype."""
    return jnp.ones_like(data)


def concat(*data: Any, dim: int = 1, **kwargs: Any) -> jax.Array:
    """The arrays joined along ``dim`` (default 1, as MXNet)."""
    return jnp.concatenate([jnp.asarray(d) for d in data], axis=dim)


def concatenate(arrays: Sequence[Any], axis: int = 0, always_copy: bool = True) -> jax.Array:
    """The arrays of a list joined along ``axis`` (default 0)."""
    return jnp.concatenate([jnp.asarray(a) for a in arrays], axis=axis)


def stack(*data: Any, axis: int = 0, **kwargs: Any) -> jax.Array:
    """The arrays stacked along a new ``axis``."""
    return jnp.stack([jnp.asarray(d) for d in data], axis=axis)


def moveaxis(tensor: Any, source: Any, destination: Any) -> jax.Array:
    """``tensor`` with axes moved from ``source`` to ``destination``."""
    return jnp.moveaxis(tensor, source, destination)


def waitall() -> None:
    """Wait until every computation JAX has dispatched is done."""
    jax.effects_barrier()


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    from ..gluon1.ops import F
    try:
        value = getattr(F, name)
    except AttributeError:
        raise AttributeError(f"mx.nd.{name}: not an MXNet NDArray function or operator that hybrid has "
                             "(hybrid.mxnet.ops.OPERATORS lists the operators)") from None
    globals()[name] = value
    return value
