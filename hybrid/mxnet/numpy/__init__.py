"""``mxnet.numpy`` (``mx.np``): MXNet's NumPy interface on mutable handles (:class:`ndarray`).

Every ``jax.numpy`` function is an attribute taking handles or arrays and returning :class:`ndarray`
handles; the functions below differ from ``jax.numpy`` as MXNet's do: creation functions (``array``,
``zeros``, ``ones``, ``full``, ``empty``, ``arange``, ``linspace``, ``eye``, ``identity``) default to float32
and take ``ctx=``. ``np.random`` and ``np.linalg`` are MXNet's submodules over ``jax.random`` and
``jax.numpy.linalg``.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as _onp

from .. import array_methods as _array_methods
from ..context import to_device
from ..handle import ndarray, handle_function, value_of
from ._dtypes import default_dtype, float_default

__all__ = ["ndarray", "array", "asarray", "zeros", "ones", "full", "empty", "arange", "linspace", "eye", "identity",
           "zeros_like", "ones_like", "full_like", "empty_like", "genfromtxt", "random", "linalg"]

_array_methods.enable()

pi, e, inf, nan, newaxis, euler_gamma = _onp.pi, _onp.e, _onp.inf, _onp.nan, None, _onp.euler_gamma
float16, float32, float64, bfloat16 = _onp.float16, _onp.float32, _onp.float64, jnp.bfloat16
int8, int16, int32, int64, uint8 = _onp.int8, _onp.int16, _onp.int32, _onp.int64, _onp.uint8
bool_ = _onp.bool_
dtype = _onp.dtype


def _placed(value: Any, ctx: Any = None, device: Any = None) -> ndarray:
    where = ctx if ctx is not None else device
    return ndarray(value if where is None else jax.device_put(value, to_device(where)))


def array(object: Any, dtype: Any = None, ctx: Any = None, device: Any = None, copy: bool = True) -> ndarray:
    """An ndarray holding ``object``: a handle's or array's dtype is kept, anything else is float32 unless
    ``dtype`` is given (booleans stay boolean)."""
    source = value_of(object)
    if dtype is None and hasattr(source, "dtype"):
        return _placed(jnp.asarray(source, dtype=default_dtype(source.dtype)), ctx, device)
    values = _onp.asarray(source)
    if dtype is None:
        dtype = _onp.bool_ if values.dtype == _onp.bool_ else float32
    return _placed(jnp.asarray(values, dtype=float_default(dtype)), ctx, device)


asarray = array


def _shape(shape: Any) -> tuple:
    return (int(shape),) if isinstance(shape, (int, _onp.integer)) else tuple(int(d) for d in shape)


def zeros(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None, device: Any = None) -> ndarray:
    """Zeros (float32 by default)."""
    return _placed(jnp.zeros(_shape(shape), float_default(dtype)), ctx, device)


def ones(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None, device: Any = None) -> ndarray:
    """Ones (float32 by default)."""
    return _placed(jnp.ones(_shape(shape), float_default(dtype)), ctx, device)


def empty(shape: Any, dtype: Any = None, order: str = "C", ctx: Any = None, device: Any = None) -> ndarray:
    """MXNet's uninitialised array; zeros here (JAX has no uninitialised memory)."""
    return zeros(shape, dtype, order, ctx, device)


def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", ctx: Any = None,
         device: Any = None, out: Any = None) -> ndarray:
    """An array filled with ``fill_value`` (float32 unless ``dtype`` is given or the value is a handle)."""
    fill = value_of(fill_value)
    if dtype is None and hasattr(fill, "dtype"):
        dtype = default_dtype(fill.dtype)
    return _placed(jnp.full(_shape(shape), fill, float_default(dtype)), ctx, device)


def arange(start: Any, stop: Any = None, step: Any = 1, dtype: Any = None, ctx: Any = None,
           device: Any = None) -> ndarray:
    """Evenly spaced values in [start, stop): float32 unless ``dtype`` is given (MXNet's default)."""
    return _placed(jnp.arange(start, stop, step, dtype=float_default(dtype)), ctx, device)


def linspace(start: Any, stop: Any, num: int = 50, endpoint: bool = True, retstep: bool = False, dtype: Any = None,
             axis: int = 0, ctx: Any = None, device: Any = None) -> Any:
    """``num`` evenly spaced values from ``start`` to ``stop`` (float32 by default)."""
    values = jnp.linspace(value_of(start), value_of(stop), int(num), endpoint=endpoint, retstep=retstep,
                          dtype=float_default(dtype), axis=axis)
    if retstep:
        return _placed(values[0], ctx, device), float(values[1])
    return _placed(values, ctx, device)


def eye(N: int, M: int | None = None, k: int = 0, dtype: Any = None, ctx: Any = None, device: Any = None) -> ndarray:
    """An N x M matrix with ones on the ``k``-th diagonal (float32 by default)."""
    return _placed(jnp.eye(int(N), None if M is None else int(M), int(k), dtype=float_default(dtype)), ctx, device)


def identity(n: int, dtype: Any = None, ctx: Any = None, device: Any = None) -> ndarray:
    """The n x n identity matrix (float32 by default)."""
    return eye(n, dtype=dtype, ctx=ctx, device=device)


def genfromtxt(*args: Any, ctx: Any = None, device: Any = None, **kwargs: Any) -> ndarray:
    """NumPy's ``genfromtxt`` read into an ndarray of the dtype NumPy gives (float64 unless ``dtype`` is
    given, as MXNet's), placed on ``ctx``."""
    values = _onp.genfromtxt(*args, **kwargs)
    return array(values, dtype=values.dtype, ctx=ctx, device=device)


def _like(fill: Any) -> Any:
    def like(a: Any, dtype: Any = None, order: str = "C", ctx: Any = None, device: Any = None, **kwargs: Any):
        value = value_of(a)
        dtype = default_dtype(value.dtype) if dtype is None else float_default(dtype)
        return _placed(fill(value, dtype, kwargs), ctx, device)
    return like


zeros_like = _like(lambda v, d, kw: jnp.zeros_like(v, dtype=d))
ones_like = _like(lambda v, d, kw: jnp.ones_like(v, dtype=d))
empty_like = zeros_like
full_like = _like(lambda v, d, kw: jnp.full_like(v, value_of(kw["fill_value"]), dtype=d))
zeros_like.__doc__ = "Zeros of ``a``'s shape and dtype."
ones_like.__doc__ = "Ones of ``a``'s shape and dtype."


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    if name in ("random", "linalg"):
        import importlib
        module = importlib.import_module(f"{__name__}.{name}")
        globals()[name] = module
        return module
    value = getattr(jnp, name, None)
    if value is None:
        raise AttributeError(f"mx.np.{name}: not a NumPy function that hybrid.mxnet has (mx.np serves "
                             "jax.numpy's functions on handles)")
    if callable(value) and not isinstance(value, type):
        value = handle_function(value, ndarray, name)
    globals()[name] = value
    return value
