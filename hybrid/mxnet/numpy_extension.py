"""``mxnet.numpy_extension`` (``mx.npx``): MXNet's neural-network operators and switches for ``mx.np``.

The operators (``npx.relu``, ``npx.fully_connected``, ``npx.batch_norm``, ...) are MXNet's of the operator
table, taking and returning :class:`~hybrid.mxnet.numpy.ndarray` handles; ``npx.reshape`` takes the NumPy
interface's codes (-1 infer, -2 copy, -3 drop a 1, -4 copy the rest, -5 merge two, -6 split one).
``set_np()`` and ``reset_np()`` switch the flag Gluon 2.0 code checks; blocks return handles of the kind
they were given whatever it says.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from ..gluon1.ops._namespace import NPX_OPERATORS
from . import array_methods as _array_methods
from .context import cpu, current_context, gpu, num_gpus
from .handle import handle_function, ndarray, unwrap, value_of, wrap

__all__ = ["set_np", "reset_np", "is_np_array", "is_np_shape", "use_np", "use_np_array", "use_np_shape",
           "set_np_shape", "reshape", "waitall", "seed", "cpu", "gpu", "num_gpus", "current_context", "save", "load",
           "masked_softmax", "masked_log_softmax", "arange_like", "batch_flatten", "nonzero", "OPERATORS"]

_array_methods.enable()

# npx name -> MXNet operator of the table (F.npx reads the same table)
OPERATORS = NPX_OPERATORS

_state = {"array": False, "shape": False}


def set_np(shape: bool = True, array: bool = True, dtype: bool = False) -> None:
    """Switch on MXNet's NumPy semantics flags (``is_np_array()``, ``is_np_shape()``)."""
    _state["shape"], _state["array"] = bool(shape), bool(array)


def reset_np() -> None:
    """Switch the NumPy semantics flags off."""
    set_np(False, False)


def set_np_shape(active: bool) -> bool:
    """Set the NumPy shape flag; returns the previous value."""
    previous, _state["shape"] = _state["shape"], bool(active)
    return previous


def is_np_array() -> bool:
    return _state["array"]


def is_np_shape() -> bool:
    return _state["shape"]


def _identity_decorator(obj: Any) -> Any:
    return obj


use_np = use_np_array = use_np_shape = _identity_decorator


def waitall() -> None:
    """Wait until every computation JAX has dispatched is done."""
    jax.effects_barrier()


def seed(seed: int, ctx: Any = "all") -> None:
    """Seed hybrid's random stream."""
    from .. import random
    random.seed(int(seed))


def save(file: Any, arr: Any) -> None:
    """Write arrays (one, a list, or a dict by name) to an MXNet ``.npz``-free array file (``npx.save``)."""
    from ._params_io import save as _save
    _save(file, unwrap(arr))


def load(file: Any) -> Any:
    """The arrays of an MXNet array file as ``mx.np`` handles: a list, or a dict by name."""
    from ._params_io import load as _load
    loaded = _load(file)
    return {k: ndarray(v) for k, v in loaded.items()} if isinstance(loaded, dict) else wrap(loaded, ndarray)


def _reshape_codes(shape: tuple, codes: tuple) -> tuple:
    out: list[int] = []
    i = j = 0
    while j < len(codes):
        code = codes[j]
        if code >= 0 or code == -1:
            out.append(code)
            i += 1
        elif code == -2:
            out.append(shape[i])
            i += 1
        elif code == -3:
            if shape[i] != 1:
                raise ValueError(f"npx.reshape: code -3 drops a dimension of size 1, dimension {i} is {shape[i]}")
            i += 1
        elif code == -4:
            out.extend(shape[i:])
            i = len(shape)
        elif code == -5:
            out.append(shape[i] * shape[i + 1])
            i += 2
        elif code == -6:
            first, second = codes[j + 1], codes[j + 2]
            if first == -1:
                first = shape[i] // second
            elif second == -1:
                second = shape[i] // first
            out.extend((first, second))
            i += 1
            j += 2
        else:
            raise ValueError(f"npx.reshape: unknown code {code} in {codes}")
        j += 1
    return tuple(out)


def reshape(a: Any, newshape: Any, reverse: bool = False, order: str = "C") -> ndarray:
    """``a`` reshaped by the NumPy interface's codes (see the module docstring); ``reverse`` reads them from
    the right."""
    value = value_of(a)
    codes = (int(newshape),) if isinstance(newshape, int) else tuple(int(c) for c in newshape)
    shape = tuple(value.shape)
    if reverse:
        target = _reshape_codes(shape[::-1], codes[::-1])[::-1]
    else:
        target = _reshape_codes(shape, codes)
    return ndarray(jnp.reshape(value, target))


def _masked(log: bool) -> Callable:
    def masked(data: Any, mask: Any = None, axis: int = -1, temperature: float = 1.0, normalize: bool = True,
               **kwargs: Any) -> ndarray:
        x = value_of(data) / temperature
        if mask is None:
            return ndarray(jax.nn.log_softmax(x, axis) if log else jax.nn.softmax(x, axis))
        keep = jnp.asarray(value_of(mask)).astype(bool)
        keep = jnp.broadcast_to(keep, x.shape)
        shifted = jnp.where(keep, x, -jnp.inf)
        if log:
            return ndarray(jnp.where(keep, jax.nn.log_softmax(shifted, axis), -jnp.inf))
        return ndarray(jnp.where(keep, jax.nn.softmax(shifted, axis), 0.0))
    masked.__name__ = "masked_log_softmax" if log else "masked_softmax"
    masked.__doc__ = "Softmax over ``axis`` of the entries ``mask`` keeps (masked entries give 0, or -inf for log)."
    return masked


masked_softmax = _masked(False)
masked_log_softmax = _masked(True)


def arange_like(data: Any, start: float = 0.0, step: float = 1.0, repeat: int = 1, axis: Any = None,
                **kwargs: Any) -> ndarray:
    """Counting values of ``data``'s shape (or of the length of ``axis``)."""
    value = value_of(data)
    count = value.size if axis is None else value.shape[axis]
    values = start + step * (jnp.arange(count // repeat + (count % repeat > 0)).repeat(repeat)[:count])
    values = values.astype(value.dtype)
    return ndarray(values.reshape(value.shape) if axis is None else values)


def batch_flatten(data: Any) -> ndarray:
    """``data`` as (batch, everything else)."""
    value = value_of(data)
    return ndarray(value.reshape(value.shape[0], -1))


def nonzero(a: Any) -> ndarray:
    """The indices of the nonzero entries, one row each (shape (count, ndim))."""
    return ndarray(jnp.stack(jnp.nonzero(value_of(a)), axis=-1))


@functools.lru_cache(maxsize=None)
def _operator(name: str) -> Callable:
    from ..gluon1.ops import F
    return handle_function(getattr(F, OPERATORS[name]), ndarray, name)


def __getattr__(name: str) -> Any:
    if name in OPERATORS:
        value = _operator(name)
        globals()[name] = value
        return value
    raise AttributeError(f"mx.npx.{name}: not an operator of MXNet's NumPy extension that hybrid.mxnet has "
                         f"(it has {', '.join(sorted(OPERATORS))} and {', '.join(__all__)})")
