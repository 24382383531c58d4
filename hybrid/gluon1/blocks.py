"""Gluon 1.x ``hybrid_forward`` blocks: the ``F`` namespace they are called with, and the inference of
their parameters' deferred shapes.

MXNet infers a ``hybrid_forward`` block's unknown dimensions (``shape=(units, 0)``) by shape inference
over its symbol. Here the block's ``hybrid_forward`` runs once under :func:`jax.eval_shape` with
placeholders (:class:`Unknown`) for its parameters of unknown shape and an ``F`` that resolves them: an
operator receiving a placeholder as one of its parameter inputs (``F.FullyConnected``'s weight,
``F.Convolution``'s weight, ``F.BatchNorm``'s gamma...) computes the shape MXNet would infer from its
data input and attributes (:data:`RULES`), the parameter is initialised with that shape, and the
operator runs on its data. Nothing else changes state during that run (:class:`ShapeFrame`).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Mapping

import jax
import numpy as np

from .._core import functional as _functional
from ..errors import DeferredInitializationError, ShapeError

__all__ = ["operators", "infer_shapes", "Unknown", "RULES"]

_F: Any = None


def operators() -> Any:
    """MXNet's operator namespace, ``F`` of ``hybrid_forward`` (imported on first use)."""
    global _F
    if _F is None:
        from .ops import F
        _F = F
    return _F


# -- what MXNet's shape inference gives each operator's parameter inputs --------------------------------
def _attrs(attrs: Mapping[str, Any], op: str) -> Any:
    from .ops import Attrs
    return Attrs(attrs, f"F.{op} (inferring parameter shapes)")


def _fully_connected(data: tuple, attrs: Mapping) -> dict:
    a = _attrs(attrs, "FullyConnected")
    units = a.int("num_hidden")
    features = math.prod(data[1:]) if a.bool("flatten", True) else data[-1]
    return {"weight": (units, features), "bias": (units,)}


def _kernel(op: str, attrs: Mapping) -> tuple[tuple[int, ...], int, int, bool]:
    a = _attrs(attrs, op)
    return a.tuple("kernel"), a.int("num_filter"), a.int("num_group", 1), (a.str("layout", "") or "").endswith("C")


def _convolution(data: tuple, attrs: Mapping) -> dict:
    kernel, filters, groups, channels_last = _kernel("Convolution", attrs)
    if channels_last:
        return {"weight": (filters, *kernel, data[-1] // groups), "bias": (filters,)}
    return {"weight": (filters, data[1] // groups, *kernel), "bias": (filters,)}


def _deconvolution(data: tuple, attrs: Mapping) -> dict:
    kernel, filters, groups, channels_last = _kernel("Deconvolution", attrs)
    if channels_last:
        return {"weight": (data[-1], *kernel, filters // groups), "bias": (filters,)}
    return {"weight": (data[1], filters // groups, *kernel), "bias": (filters,)}


def _per_channel(op: str, axis_default: int, names: tuple[str, ...]) -> Callable[[tuple, Mapping], dict]:
    def rule(data: tuple, attrs: Mapping) -> dict:
        size = data[_attrs(attrs, op).int("axis", axis_default) % len(data)]
        return {name: (size,) for name in names}
    return rule


def _group_norm(data: tuple, attrs: Mapping) -> dict:
    groups = _attrs(attrs, "GroupNorm").int("num_groups", 1)
    return {"gamma": (groups,), "beta": (groups,)}


def _embedding(data: tuple, attrs: Mapping) -> dict:
    a = _attrs(attrs, "Embedding")
    return {"weight": (a.int("input_dim"), a.int("output_dim"))}


def _leaky_relu(data: tuple, attrs: Mapping) -> dict:
    return {"gamma": (data[1] if len(data) > 1 else 1,)}


_NORM = ("gamma", "beta")
_BN = ("gamma", "beta", "moving_mean", "moving_var")

# operator -> rule: (data shape, attributes) -> {parameter input name: shape}
RULES: dict[str, Callable[[tuple, Mapping], dict]] = {
    "FullyConnected": _fully_connected,
    "Convolution": _convolution,
    "Deconvolution": _deconvolution,
    "BatchNorm": _per_channel("BatchNorm", 1, _BN),
    "LayerNorm": _per_channel("LayerNorm", -1, _NORM),
    "InstanceNorm": _per_channel("InstanceNorm", 1, _NORM),
    "GroupNorm": _group_norm,
    "Embedding": _embedding,
    "LeakyReLU": _leaky_relu,
}
# elementwise operators of two same-shaped inputs: an unknown operand takes the other's shape
_SAME_SHAPE = frozenset({"elemwise_add", "elemwise_sub", "elemwise_mul", "elemwise_div", "_plus", "_minus",
                         "_mul", "_div", "_Plus", "_Minus", "_Mul", "_Div"})


class Unknown:
    """Stands for a parameter of unknown shape while ``hybrid_forward`` runs for shape inference. Any use
    other than as a parameter input of an operator of :data:`RULES` raises DeferredInitializationError."""

    __slots__ = ("block", "name", "param")

    def __init__(self, block: Any, name: str, param: Any):
        self.block, self.name, self.param = block, name, param

    @property
    def shape(self) -> tuple:
        return self.param.shape

    @property
    def dtype(self) -> np.dtype:
        return self.param.dtype

    def resolve(self, shape: tuple, op: str) -> Any:
        """Give the parameter ``shape`` (what ``op`` infers), initialise it and return its data."""
        try:
            self.param.shape = shape
        except ShapeError as exc:
            raise ShapeError(f"parameter {self.name!r} is declared with shape "
                             f"{self.param.shape} (0 = unknown), but F.{op} needs {tuple(shape)} for the input "
                             "it gets") from exc
        self.param.finish_deferred_init()
        return self.param.own_data

    def _refuse(self, *args: Any, **kwargs: Any) -> Any:
        raise _UnknownUsed(self)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name not in ("__jax_array__", "__array__"):
            raise AttributeError(name)
        raise _UnknownUsed(self)

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = __truediv__ = __rtruediv__ = _refuse
    __pow__ = __rpow__ = __matmul__ = __rmatmul__ = __neg__ = __getitem__ = __iter__ = __len__ = _refuse

    def __repr__(self) -> str:
        return f"<parameter {self.name!r} of unknown shape {self.param.shape}>"


class _UnknownUsed(Exception):
    def __init__(self, unknown: Unknown):
        super().__init__(repr(unknown))
        self.unknown = unknown


def _resolve(op: str, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``args``/``kwargs`` of ``F.<op>`` with every :class:`Unknown` among its parameter inputs replaced by
    the parameter's data, initialised with the shape the operator infers."""
    if op in _SAME_SHAPE:
        operands = list(args) + [kwargs.get("lhs"), kwargs.get("rhs")]
        known = [v for v in operands if v is not None and not isinstance(v, Unknown) and hasattr(v, "shape")]
        if not known:
            return args, kwargs

        def fill(v: Any) -> Any:
            return v.resolve(tuple(known[0].shape), op) if isinstance(v, Unknown) else v
        return tuple(fill(a) for a in args), {k: fill(v) for k, v in kwargs.items()}
    from .ops import get_op
    names, rule = get_op(op).inputs, RULES[op]
    bound = dict(zip(names, args))
    bound.update((k, v) for k, v in kwargs.items() if k in names)
    data = bound.get("data")
    if data is None or isinstance(data, Unknown) or not hasattr(data, "shape"):
        return args, kwargs
    attrs = {k: v for k, v in kwargs.items() if k not in names}
    shapes = rule(tuple(data.shape), attrs)
    resolved = {name: v.resolve(shapes[name], op) for name, v in bound.items()
                if isinstance(v, Unknown) and name in shapes}
    args = tuple(resolved.get(name, a) for name, a in zip(names, args)) + tuple(args[len(names):])
    return args, {k: resolved.get(k, v) for k, v in kwargs.items()}


class _ResolvingNamespace:
    """``F`` for the shape-inference run: calls ``F``'s operators after resolving unknown parameters."""

    __slots__ = ("_namespace",)

    def __init__(self, namespace: Any):
        self._namespace = namespace

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._namespace, name)
        if not callable(attr):
            return _ResolvingNamespace(attr)
        if name not in RULES and name not in _SAME_SHAPE:
            return attr

        def call(*args: Any, **kwargs: Any) -> Any:
            if any(isinstance(v, Unknown) for v in args) or any(isinstance(v, Unknown) for v in kwargs.values()):
                args, kwargs = _resolve(name, args, kwargs)
            return attr(*args, **kwargs)
        return call


_IGNORED = frozenset(("name", "ctx", "out", "attr"))


class StateWriting:
    """``F`` for a training-mode call of a block with parameters that are not differentiated (running
    statistics): an operator with auxiliary-state inputs (``F.BatchNorm``'s moving mean and variance)
    given such a parameter's data writes the new value back to that parameter, as Gluon 1.x's aux states
    are updated. Other operators are ``F``'s own."""

    __slots__ = ("_namespace", "_states")

    def __init__(self, namespace: Any, states: dict):
        self._namespace = namespace
        self._states = states  # id(array passed to hybrid_forward) -> Parameter

    def __getattr__(self, name: str) -> Any:
        from .ops import OPERATORS
        attr = getattr(self._namespace, name)
        op = OPERATORS.get(name)
        if op is None or not op.aux or not callable(attr):
            return attr
        return lambda *args, **kwargs: self._call(op, name, args, kwargs)

    def _call(self, op: Any, label: str, args: tuple, kwargs: dict) -> Any:
        from .. import autograd
        from .ops import Attrs, OpContext
        names = op.inputs
        ins = list(args[:len(names)]) + [None] * max(0, len(names) - len(args))
        attrs = dict(zip(op.attr_order, args[len(names):]))
        for key, value in kwargs.items():
            if key in names:
                ins[names.index(key)] = value
            elif key not in _IGNORED:
                attrs[key] = value
        targets = {i: self._states.get(id(ins[i])) for i in op.aux if i < len(ins)}

        def set_state(position: int, value: Any) -> None:
            param = targets.get(position)
            if param is not None:
                param.set_data(value)
        outs = op.fn(ins, Attrs(attrs, f"F.{label}"), OpContext(autograd.is_training(), set_state))
        return outs[0] if len(outs) == 1 else outs


class ShapeFrame(_functional.TraceFrame):
    """The frame of a shape-inference run: parameters are read from the blocks, writes (running
    statistics, attributes) are dropped, random keys are fixed; children are run inline."""

    __slots__ = ()

    def lookup(self, param: Any) -> Any:
        return None

    def store(self, param: Any, value: Any) -> None:
        pass

    def next_key(self) -> jax.Array:
        return jax.random.key(0)


def _abstract(leaf: Any) -> bool:
    return hasattr(leaf, "shape") and hasattr(leaf, "dtype") and not isinstance(leaf, (np.generic, Unknown))


def infer_shapes(block: Any, args: tuple, kwargs: dict) -> None:
    """Initialise ``block``'s own parameters of unknown shape from what its ``hybrid_forward`` passes them
    to, for inputs of the shapes of ``args``/``kwargs``.

    Raises DeferredInitializationError naming the parameters whose shapes cannot be inferred that way,
    ShapeError when an operator needs a shape the declared one excludes.
    """
    unknown = {name: Unknown(block, name, p) for name, p in block._reg_params.items()
               if p.is_deferred}
    leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
    positions = [i for i, leaf in enumerate(leaves) if _abstract(leaf)]
    specs = [jax.ShapeDtypeStruct(tuple(leaves[i].shape), leaves[i].dtype) for i in positions]
    namespace = _ResolvingNamespace(operators())

    def run(*arrays: Any) -> None:
        filled = list(leaves)
        for i, array in zip(positions, arrays):
            filled[i] = array
        call_args, call_kwargs = jax.tree_util.tree_unflatten(treedef, filled)
        params = {name: unknown[name] if name in unknown else p.data() for name, p in block._reg_params.items()}
        block.hybrid_forward(namespace, *call_args, **call_kwargs, **params)

    with _functional.frame({}, frame_type=ShapeFrame) as frame:
        try:
            jax.eval_shape(run, *specs)
        except Exception as exc:
            left = [u for u in unknown.values() if not u.param.is_initialized]
            if not left or isinstance(exc, ShapeError):
                raise
            raise _cannot_infer(block, left, exc) from exc
        finally:
            frame.restore_attributes()
    left = [u for u in unknown.values() if not u.param.is_initialized]
    if left:
        raise _cannot_infer(block, left, None)


def _cannot_infer(block: Any, left: list, exc: Exception | None) -> DeferredInitializationError:
    names = ", ".join(f"{u.name!r} {u.param.shape}" for u in left)
    if isinstance(exc, _UnknownUsed):
        how = f"hybrid_forward uses {exc.unknown.name!r} other than as an operator's parameter input; "
    elif exc is not None:
        how = f"hybrid_forward failed with {type(exc).__name__}: {exc}; "
    else:
        how = "hybrid_forward does not pass it to an operator; "
    ops = ", ".join(f"F.{op}" for op in RULES)
    return DeferredInitializationError(
        f"cannot infer the unknown dimensions (0) of parameter(s) {names}: "
        f"{how}hybrid infers them where a parameter is passed as a parameter input of {ops} (or as an "
        "operand of F.elemwise_*). Give the full shape in self.params.get(..., shape=...), or define "
        "infer_shape(self, *inputs) setting the parameters' shapes (e.g. self.weight.shape = (units, x.shape[1])).")
