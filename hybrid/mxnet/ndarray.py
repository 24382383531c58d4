"""``mxnet.ndarray`` (``mx.nd``): MXNet's operators plus array creation and utilities, on mutable handles.

Every function returns :class:`NDArray` handles (:mod:`hybrid.mxnet.handle`) and takes handles or arrays.
Every MXNet operator of ``hybrid.mxnet.ops.F`` is an attribute (``nd.relu``, ``nd.contrib.BilinearResize2D``),
and the creation functions take MXNet's arguments (``ctx=`` places the array on that context's device,
default dtype float32).
"""
from __future__ import annotations

from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from . import array_methods as _array_methods
from . import random  # noqa: F401  (mx.nd.random)
from ._params_io import load as _load, save as _save
from .context import to_device
from .handle import NDArray, handle_function, unwrap, value_of, wrap

__all__ = ["NDArray", "array", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "concat", "stack",
           "concatenate", "zeros_like", "ones_like", "waitall", "save", "load", "random", "from_numpy",
           "moveaxis"]

_array_methods.enable()


def _placed(value: jax.Array, ctx: Any) -> NDArray:
    return NDArray(value if ctx is None else jax.device_put(value, to_device(ctx)))


def _dtype(dtype: Any) -> Any:
    return "float32" if dtype is None else dtype


def array(source_array: Any, ctx: Any = None, dtype: Any = None) -> NDArray:
    """An array holding ``source_array``: float32 unless ``dtype`` is given, except that a JAX array keeps its
    dtype (as MXNet keeps an NDArray's)."""
    source_array = value_of(source_array)
    if dtype is None and isinstance(source_array, jax.Array):
        return _placed(source_array, ctx)
    return _placed(jnp.asarray(np.asarray(source_array), dtype=_dtype(dtype)), ctx)


def from_numpy(ndarray: np.ndarray, zero_copy: bool = True) -> NDArray:
    """A handle holding the NumPy array's values (its dtype kept)."""
    return NDArray(jnp.asarray(ndarray))


def _shape(shape: Any) -> tuple:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)


def zeros(shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> NDArray:
    """An array of zeros (float32 by default)."""
    return _placed(jnp.zeros(_shape(shape), _dtype(dtype)), ctx)


def ones(shape: Any, ctx: Any = None, dtype: Any = None, **kwargs: Any) -> NDArray:
    """An array of ones (float32 by default)."""
    return _placed(jnp.ones(_shape(shape), _dtype(dtype)), ctx)


def full(shape: Any, val: Any, ctx: Any = None, dtype: Any = None, out: Any = None) -> NDArray:
    """An array filled with ``val`` (float32 by default)."""
    return _placed(jnp.full(_shape(shape), val, _dtype(dtype)), ctx)


def empty(shape: Any, ctx: Any = None, dtype: Any = None) -> NDArray:
    """MXNet's uninitialised array; zeros here (JAX has no uninitialised memory)."""
    return zeros(shape, ctx, dtype)


def arange(start: float, stop: float | None = None, step: float = 1.0, repeat: int = 1, infer_range: Any = None,
           ctx: Any = None, dtype: Any = None) -> NDArray:
    """Evenly spaced values in [start, stop) (float32 by default), each repeated ``repeat`` times."""
    values = jnp.arange(start, stop, step, dtype=_dtype(dtype)) if stop is not None else \
        jnp.arange(0, start, step, dtype=_dtype(dtype))
    if repeat != 1:
        values = jnp.repeat(values, int(repeat))
    return _placed(values, ctx)


def linspace(start: float, stop: float, num: int, endpoint: bool = True, ctx: Any = None,
             dtype: Any = None) -> NDArray:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32 by default)."""
    return _placed(jnp.linspace(start, stop, int(num), endpoint=endpoint, dtype=_dtype(dtype)), ctx)


def eye(N: int, M: int = 0, k: int = 0, ctx: Any = None, dtype: Any = None) -> NDArray:
    """An N x M (M = 0: N x N) matrix with ones on the ``k``-th diagonal."""
    return _placed(jnp.eye(int(N), int(M) or None, int(k), dtype=_dtype(dtype)), ctx)


def zeros_like(data: Any, **kwargs: Any) -> NDArray:
    """Zeros of ``data``'s shape and dtype."""
    return NDArray(jnp.zeros_like(value_of(data)))


def ones_like(data: Any, **kwargs: Any) -> NDArray:
    """Ones of ``data``'s shape and dtype."""
    return NDArray(jnp.ones_like(value_of(data)))


def concat(*data: Any, dim: int = 1, **kwargs: Any) -> NDArray:
    """The arrays joined along ``dim`` (default 1, as MXNet)."""
    return NDArray(jnp.concatenate([jnp.asarray(value_of(d)) for d in data], axis=dim))


def concatenate(arrays: Sequence[Any], axis: int = 0, always_copy: bool = True) -> NDArray:
    """The arrays of a list joined along ``axis`` (default 0)."""
    return NDArray(jnp.concatenate([jnp.asarray(value_of(a)) for a in arrays], axis=axis))


def stack(*data: Any, axis: int = 0, **kwargs: Any) -> NDArray:
    """The arrays stacked along a new ``axis``."""
    return NDArray(jnp.stack([jnp.asarray(value_of(d)) for d in data], axis=axis))


def moveaxis(tensor: Any, source: Any, destination: Any) -> NDArray:
    """``tensor`` with axes moved from ``source`` to ``destination``."""
    return NDArray(jnp.moveaxis(value_of(tensor), source, destination))


def save(fname: Any, data: Any) -> None:
    """Write handles or arrays (one, a list, or a dict by name) to an MXNet ``.ndarray``/``.params`` file."""
    _save(fname, unwrap(data))


def load(fname: Any) -> Any:
    """The arrays of an MXNet file as handles: a list, or a dict by name."""
    loaded = _load(fname)
    return {k: NDArray(v) for k, v in loaded.items()} if isinstance(loaded, dict) else wrap(loaded)


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
    value = _HandleNamespace(value, f"mx.nd.{name}") if not callable(value) else handle_function(value, NDArray,
                                                                                                  name)
    globals()[name] = value
    return value


class _HandleNamespace:
    """An operator namespace of ``F`` (``F.contrib``, ``F.linalg``, ...) whose functions return handles."""

    def __init__(self, namespace: Any, label: str):
        self._namespace, self._label = namespace, label

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._namespace, name)
        value = handle_function(value, NDArray, name) if callable(value) else _HandleNamespace(
            value, f"{self._label}.{name}")
        setattr(self, name, value)
        return value

    def __dir__(self) -> list:
        return dir(self._namespace)
