"""``autograd.Function``: a computation with a hand-written backward pass (MXNet's ``mx.autograd.Function``).

A call is one ``jax.custom_vjp`` call, so the same Function works eagerly, inside ``autograd.record()``,
in hybridized blocks, in ``hybrid.compile`` steps and under ``jax.grad``/``jax.jit``. ``forward`` and
``backward`` are JAX code: they are traced when a program is compiled, and run again only when one is
compiled again.

Compiled programs are cached by structure. Two instances of one Function class share a program when their
attributes (other than ``saved_tensors``) are equal; an instance holding an unhashable attribute (a NumPy
array, a list) gets a program of its own at every call.
"""
from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .lazy import LazyArray
from ..errors import AutogradError

__all__ = ["Function"]

_OWN = frozenset({"_used", "saved_tensors"})
_NUMBERS = (bool, int, float, complex, np.generic, np.ndarray, jax.Array)


class Function:
    """A differentiable computation with a custom gradient, as in MXNet.

    Subclass it, define ``forward(self, *inputs)`` (arrays in, an array or a tuple of arrays out) and
    ``backward(self, *output_grads)`` (one cotangent per output in, one gradient per input out; ``None``
    for no gradient), and call an instance once: ``y = MySigmoid()(x)``. ``forward`` may keep arrays
    for ``backward`` with ``self.save_for_backward(*arrays)``; ``backward`` reads them from
    ``self.saved_tensors`` (values that are not arrays, such as shapes, are kept as they are).

    Raises:
        AutogradError: an instance is called twice, or ``backward`` returns the wrong number of
            gradients or a gradient of the wrong shape.
        TypeError: an input is not an array or a number.
    """

    def __init__(self) -> None:
        self._used = False
        self.saved_tensors: tuple = ()

    def save_for_backward(self, *args: Any) -> None:
        """Keep ``args`` for ``backward`` (read back as ``self.saved_tensors``)."""
        self.saved_tensors = args

    def forward(self, *inputs: Any) -> Any:
        """The computation: arrays in, an array or a tuple of arrays out."""
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def backward(self, *output_grads: Any) -> Any:
        """One gradient per input of ``forward`` (a tuple, or one array for one input), given one
        cotangent per output."""
        raise NotImplementedError(f"{type(self).__name__}.backward is not defined")

    def __call__(self, *inputs: Any) -> Any:
        name = type(self).__name__
        if getattr(self, "_used", False):
            raise AutogradError(f"{name}: a Function instance can be called only once (it keeps the values saved "
                                f"for its backward); create one per call: `y = {name}()(x)`")
        if not hasattr(self, "saved_tensors"):
            raise AutogradError(f"{name}.__init__ must call super().__init__()")
        if not inputs:
            raise TypeError(f"{name}: forward needs at least one input array")
        for i, x in enumerate(inputs):
            if not isinstance(x, _NUMBERS):
                raise TypeError(f"{name}: input {i} is a {type(x).__name__}; the inputs of a Function are arrays "
                                "or numbers (pass other settings to its __init__)")
        self._used = True
        return _call(_Instance(self), *inputs)


class _Instance:
    """The Function called, passed through ``custom_vjp`` as a pytree node without leaves. Programs are
    cached by it: instances of one class with equal attributes compare equal."""

    __slots__ = ("function", "key")

    def __init__(self, function: Function):
        self.function = function
        self.key = _attributes_key(function)

    def __hash__(self) -> int:
        return hash(self.key) if self.key is not None else id(self)

    def __eq__(self, other: Any) -> bool:
        if self is other:
            return True
        return type(other) is _Instance and self.key is not None and self.key == other.key


def _attributes_key(function: Function) -> Any:
    """The class and attributes of ``function`` as a hashable key (arrays by identity), or None when
    an attribute cannot be compared."""
    items: list[tuple[str, Any, Any]] = []
    for name, value in sorted(getattr(function, "__dict__", {}).items()):
        if name in _OWN:
            continue
        if isinstance(value, jax.Array):
            items.append((name, "array", id(value)))  # immutable: the same object is the same value
            continue
        try:
            hash(value)
        except TypeError:
            return None
        items.append((name, type(value), value))
    return (type(function), tuple(items))


jax.tree_util.register_pytree_node(_Instance, lambda node: ((), node), lambda node, _: node)


class _Saved:
    """What ``forward`` saved, without its arrays (they travel as the residuals of ``custom_vjp``)."""

    __slots__ = ("instance", "tree", "statics", "in_avals", "single")

    def __init__(self, instance: _Instance, tree: Any, statics: tuple, in_avals: tuple, single: bool):
        self.instance, self.tree, self.statics, self.in_avals, self.single = instance, tree, statics, in_avals, single

    def _parts(self) -> tuple:
        return (self.instance, self.tree, self.in_avals, self.single)

    def __hash__(self) -> int:
        return hash(self._parts())

    def __eq__(self, other: Any) -> bool:
        if type(other) is not _Saved or self._parts() != other._parts() or len(self.statics) != len(other.statics):
            return False
        try:
            return all(a is b or bool(a == b) for a, b in zip(self.statics, other.statics))
        except Exception:  # values whose comparison is not a bool
            return False

    def rebuild(self, arrays: list) -> tuple:
        it = iter(arrays)
        leaves = [next(it) if static is _ARRAY else static for static in self.statics]
        return jax.tree_util.tree_unflatten(self.tree, leaves)


jax.tree_util.register_pytree_node(_Saved, lambda node: ((), node), lambda node, _: node)
_ARRAY = object()  # marks the places of arrays among the saved values


def _is_array(value: Any) -> bool:
    return isinstance(value, (jax.Array, np.ndarray))


def _forward(function: Function, inputs: tuple) -> Any:
    outputs = function.forward(*inputs)
    if isinstance(outputs, list):
        outputs = tuple(outputs)
    parts = outputs if isinstance(outputs, tuple) else (outputs,)
    if not parts or not all(map(_is_array, parts)):
        raise AutogradError(f"{type(function).__name__}.forward must return an array or a tuple of arrays, got "
                            f"{type(outputs).__name__ if not parts else [type(p).__name__ for p in parts]}")
    return outputs


@jax.custom_vjp
def _call(instance: _Instance, *inputs: Any) -> Any:
    function = instance.function
    before = function.saved_tensors
    outputs = _forward(function, inputs)
    leaves = jax.tree_util.tree_leaves(function.saved_tensors)
    if any(isinstance(v, jax.core.Tracer) and not isinstance(v, LazyArray) for v in leaves):
        function.saved_tensors = before  # traced values must not outlive the trace
    return outputs


def _call_fwd(instance: _Instance, *inputs: Any) -> tuple:
    function = instance.function
    before = function.saved_tensors
    function.saved_tensors = ()
    try:
        outputs = _forward(function, inputs)
        leaves, tree = jax.tree_util.tree_flatten(function.saved_tensors)
    finally:
        function.saved_tensors = before
    arrays = [v for v in leaves if _is_array(v)]
    statics = tuple(_ARRAY if _is_array(v) else v for v in leaves)
    in_avals = tuple((tuple(np.shape(x)), jnp.result_type(x)) for x in inputs)
    saved = _Saved(instance, tree, statics, in_avals, not isinstance(outputs, tuple))
    return outputs, (saved, arrays)


def _call_bwd(residuals: tuple, output_grads: Any) -> tuple:
    saved, arrays = residuals
    function = saved.instance.function
    name = type(function).__name__
    grads_in = (output_grads,) if saved.single else tuple(output_grads)
    grads_in = tuple(jnp.zeros(g.shape, jnp.float32) if g.dtype == jax.dtypes.float0 else g for g in grads_in)
    before = function.saved_tensors
    function.saved_tensors = saved.rebuild(arrays)
    try:
        grads = function.backward(*grads_in)
    finally:
        function.saved_tensors = before
    if not isinstance(grads, (tuple, list)):
        grads = (grads,)
    if len(grads) != len(saved.in_avals):
        raise AutogradError(f"{name}.backward returned {len(grads)} gradient(s) for the {len(saved.in_avals)} "
                            "input(s) of forward; return one per input (None for no gradient)")
    out: list[jax.Array | None] = []
    for i, (g, (shape, dtype)) in enumerate(zip(grads, saved.in_avals)):
        if g is None or not jnp.issubdtype(dtype, jnp.inexact):
            out.append(None)  # a zero gradient (the only one an integer input has)
            continue
        g = jnp.asarray(g)
        if tuple(g.shape) != shape:
            raise AutogradError(f"{name}.backward: the gradient of input {i} has shape {tuple(g.shape)}, the input "
                                f"has shape {shape}")
        out.append(g.astype(dtype))
    return (saved.instance, *out)


_call.defvjp(_call_fwd, _call_bwd)
