"""MXNet's NDArray methods on JAX arrays, added while the MXNet surface is in use.

Gluon 1.x code calls operators as methods: ``x.slice_axis(axis=1, begin=0, end=2)``,
``x.reshape((0, -1))``, ``x.split(num_outputs=4, axis=-1)``, ``x.sum(axis=0, exclude=True)``. Importing
a user-facing module of ``hybrid.mxnet`` (``nd``, ``sym``, ``gluon``, ...) calls :func:`enable`, which
gives ``jax.Array`` and JAX's tracers (hence hybrid's recorded values) these methods:

- methods JAX arrays lack (``slice_axis``, ``expand_dims``, ``split``, ``tile``, ``exp``, ...) call the
  MXNet operator of the same name, ``F.<name>(x, *args, **kwargs)``;
- methods JAX arrays have keep JAX's meaning for every call JAX accepts; a call JAX would reject gets
  MXNet's meaning: ``reshape`` with MXNet's codes (0, -2, -3, -4 on a non-empty array) or ``reverse=``,
  ``transpose(axes=...)``, reductions with ``exclude=``;
- ``asnumpy``, ``asscalar``, ``context``/``ctx`` and ``as_in_context`` read as on an NDArray;
- a write into the array a Parameter's ``data()`` returned (``p.data()[:] += 1``) writes the Parameter, and
  its ``grad`` is the Parameter's ``grad()`` (so ``p.data().grad[:] *= s`` scales the gradient);
- names that need a mutable array (``attach_grad``, ``grad`` of any other array) raise
  :class:`ArrayMethodError` (an ``AttributeError``) saying what to write instead: a ``jax.Array`` is what
  hybrid's own API gives (a Parameter's ``data()``, a block's output inside ``hybrid_forward``);
  ``mx.nd``/``mx.np`` arrays are mutable handles (:mod:`hybrid.mxnet.handle`) that have them.

``disable()`` restores JAX's classes as they were.
"""
from __future__ import annotations

from typing import Any, Callable

import jax

from .._core.lazy import ArrayImpl, LazyArray, Tracer

__all__ = ["ArrayMethodError", "enable", "disable", "enabled", "OPERATOR_METHODS", "UNAVAILABLE"]


class ArrayMethodError(AttributeError):
    """An NDArray attribute that needs a mutable array (a gradient buffer); the message says what to use."""


# method name -> what to write instead
UNAVAILABLE = {
    "attach_grad": ("a jax.Array (a Parameter's data(), a value inside a block) cannot hold a gradient buffer: "
                    "make an mx.nd/mx.np array of it (nd.array(x)) and attach_grad() that, or use "
                    "g = autograd.grad(y, x) for x used inside autograd.record()"),
    "grad": ("a jax.Array has no .grad: use autograd.grad(y, x), a Parameter's p.grad() after backward, or an "
             "mx.nd/mx.np array with attach_grad()"),
}

# methods JAX arrays lack, served by the MXNet operator of the same name
OPERATOR_METHODS = (
    "slice_axis", "slice_like", "expand_dims", "split", "tile", "broadcast_like", "broadcast_axes",
    "broadcast_axis", "reshape_like", "pick", "topk", "shape_array", "size_array", "zeros_like", "ones_like",
    "softmax", "log_softmax", "relu", "sigmoid", "tanh", "exp", "expm1", "log", "log1p", "log2", "log10",
    "sqrt", "rsqrt", "square", "abs", "sign", "floor", "ceil", "trunc", "fix", "rint", "sin", "cos",
    "arccos", "arcsin", "arctan", "norm", "flip", "one_hot", "nansum", "nanprod", "slice", "swapaxes",
)
_EXCLUDE_REDUCTIONS = ("sum", "mean", "max", "min", "prod")
_CLASSES: tuple = ()
_saved: list[tuple[type, str, Any]] = []  # (class, name, previous attribute or _ABSENT)
_ABSENT = object()


def _F() -> Any:
    from ..gluon1.ops import F
    return F


def _unavailable(name: str) -> property:
    message = UNAVAILABLE[name]

    def getter(self: Any) -> Any:
        raise ArrayMethodError(f"{type(self).__name__}.{name}: {message}")
    return property(getter, doc=message)


def _operator_method(name: str) -> Callable:
    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(_F(), name)(self, *args, **kwargs)
    method.__name__ = name
    method.__doc__ = f"MXNet's ``x.{name}(...)``: ``F.{name}(x, ...)``."
    return method


def _is_mxnet_shape(self: Any, shape: tuple) -> bool:
    if any(type(d) is int and d < -1 for d in shape):
        return True
    return 0 in shape and self.size != 0


def _reshape(original: Callable) -> Callable:
    def reshape(self: Any, *args: Any, **kwargs: Any) -> Any:
        shape = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
        if "shape" in kwargs or "reverse" in kwargs:
            return _F().reshape(self, *args, **kwargs)
        if shape and all(isinstance(d, int) for d in shape) and _is_mxnet_shape(self, tuple(shape)):
            return _F().reshape(self, shape=tuple(shape), **kwargs)
        return original(self, *args, **kwargs)
    reshape.__doc__ = original.__doc__
    return reshape


def _transpose(original: Callable) -> Callable:
    def transpose(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "axes" in kwargs:
            return _F().transpose(self, *args, **kwargs)
        return original(self, *args, **kwargs)
    transpose.__doc__ = original.__doc__
    return transpose


def _reduction(name: str, original: Callable) -> Callable:
    def reduction(self: Any, *args: Any, **kwargs: Any) -> Any:
        if "exclude" in kwargs:
            return getattr(_F(), name)(self, *args, **kwargs)
        return original(self, *args, **kwargs)
    reduction.__name__ = name
    reduction.__doc__ = original.__doc__
    return reduction


def _asnumpy(self: Any) -> Any:
    """MXNet's ``x.asnumpy()``: a writable NumPy copy."""
    import numpy as np
    return np.array(self)


def _asscalar(self: Any) -> Any:
    """MXNet's ``x.asscalar()``: the one value of a size-1 array; ValueError for any other size."""
    if self.size != 1:
        raise ValueError(f"asscalar: the array has shape {tuple(self.shape)}, not a single value")
    return _asnumpy(self).reshape(())[()]


def _context(self: Any) -> Any:
    """MXNet's ``x.context``: the Context of the device holding the array."""
    from .context import Context
    devices = self.devices() if isinstance(self, jax.Array) and not isinstance(self, Tracer) else ()
    device = next(iter(devices), None) or jax.devices()[0]
    return Context("gpu" if device.platform in ("gpu", "cuda", "rocm") else "cpu", device.id)


def _as_in_context(self: Any, ctx: Any) -> Any:
    """MXNet's ``x.as_in_context(ctx)``: ``jax.device_put`` onto the context's device."""
    from .context import to_device
    return jax.device_put(self, to_device(ctx)) if isinstance(self, jax.Array) and not isinstance(
        self, Tracer) else self


def _wait_to_read(self: Any) -> None:
    """MXNet's ``x.wait_to_read()``: wait until the value is computed."""
    if hasattr(self, "block_until_ready"):
        self.block_until_ready()


def _set(cls: type, name: str, value: Any) -> None:
    _saved.append((cls, name, cls.__dict__.get(name, _ABSENT)))
    setattr(cls, name, value)


# id of an array a Parameter's data() or grad() returned -> (that Parameter, "data" or "grad"), checked by
# identity on use
_OWNERS: dict[int, tuple] = {}


def _reading(original: Callable, kind: str) -> Callable:
    def read(self: Any, *args: Any, **kwargs: Any) -> Any:
        value = original(self, *args, **kwargs)
        if type(value) is ArrayImpl or type(value) is LazyArray:
            if len(_OWNERS) > 4096:
                _OWNERS.clear()
            _OWNERS[id(value)] = (self, kind)
        return value
    read.__name__ = original.__name__
    read.__doc__ = original.__doc__
    return read


def _owner(array: Any) -> tuple:
    """``(Parameter, "data" or "grad")`` when ``array`` is what that Parameter's ``data()`` or ``grad()``
    returned and still holds (MXNet's arrays are the parameter's buffers), else ``(None, None)``."""
    param, kind = _OWNERS.get(id(array), (None, None))
    if kind == "data" and _same(param.own_data, array) or kind == "grad" and _same(param.grad(), array):
        return param, kind
    return None, None


def write_back(array: Any, value: Any) -> bool:
    """Replace what ``array`` holds by ``value`` when ``array`` is what a Parameter's ``data()`` or
    ``grad()`` returned and still holds; False otherwise."""
    param, kind = _owner(array)
    if kind == "data":
        param.set_data(value)
    elif kind == "grad":
        param.set_grad(value)
    return kind is not None


def _same(current: Any, array: Any) -> bool:
    """Whether ``current`` is ``array``, or the value ``array`` (a recorded value) was computed as."""
    return current is array or (type(array) is LazyArray and array._value is not None and current is array._value)


def _setitem(self: Any, index: Any, value: Any) -> None:
    """MXNet's ``p.data()[idx] = v`` and ``p.grad()[idx] = v``: a write into the array a Parameter's
    ``data()`` or ``grad()`` returned writes the Parameter (other arrays are immutable: JAX's TypeError)."""
    from .handle import unwrap, value_of
    if _owner(self)[1] is None:
        raise TypeError("this jax.Array is immutable (only the arrays a Parameter's data() and grad() returned "
                        "write its Parameter): write x = x.at[idx].set(v), or make a mutable array with "
                        "mx.nd.array(x) / mx.np.array(x)")
    write_back(self, self.at[unwrap(index)].set(value_of(value)))


def _grad(self: Any) -> Any:
    """MXNet's ``p.data().grad``: for the array a Parameter's ``data()`` returned, the Parameter's ``grad()``
    (writes into it write the gradient; None when ``grad_req`` is ``'null'``); ArrayMethodError for any other
    jax.Array."""
    param, kind = _owner(self)
    if kind != "data":
        raise ArrayMethodError(f"{type(self).__name__}.grad: {UNAVAILABLE['grad']}")
    return None if param.grad_req == "null" else param.grad()


def enabled() -> bool:
    """True while the MXNet methods are on JAX's array classes."""
    return bool(_saved)


def enable() -> None:
    """Give ``jax.Array`` and JAX's tracers MXNet's NDArray methods (idempotent)."""
    if _saved:
        return
    for cls in (ArrayImpl, Tracer):
        for name in UNAVAILABLE:
            if not hasattr(cls, name) or name == "grad":
                _set(cls, name, _unavailable(name))
        for name in OPERATOR_METHODS:
            if not hasattr(cls, name):
                _set(cls, name, _operator_method(name))
        _set(cls, "reshape", _reshape(cls.reshape))
        _set(cls, "transpose", _transpose(cls.transpose))
        for name in _EXCLUDE_REDUCTIONS:
            _set(cls, name, _reduction(name, getattr(cls, name)))
        for name, value in (("as_in_context", _as_in_context), ("wait_to_read", _wait_to_read),
                            ("asnumpy", _asnumpy), ("asscalar", _asscalar), ("context", property(_context)),
                            ("ctx", property(_context))):
            if not hasattr(cls, name):
                _set(cls, name, value)
    _set(ArrayImpl, "__setitem__", _setitem)
    _set(LazyArray, "__setitem__", _setitem)
    from ..parameter import Parameter
    _set(Parameter, "data", _reading(Parameter.data, "data"))
    _set(Parameter, "grad", _reading(Parameter.grad, "grad"))
    for cls in (ArrayImpl, LazyArray):
        _set(cls, "grad", property(_grad, doc=_grad.__doc__))


def disable() -> None:
    """Restore JAX's array classes as they were before :func:`enable`."""
    while _saved:
        cls, name, previous = _saved.pop()
        if previous is _ABSENT:
            delattr(cls, name)
        else:
            setattr(cls, name, previous)
