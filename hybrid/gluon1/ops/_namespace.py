"""``F``: MXNet's operator namespace (its ``nd`` and ``sym`` faces at once) over the operator table.

``F.<name>(*args, **kwargs)`` binds positional and keyword arguments to the operator's input names;
further positional arguments are attributes in MXNet's order, other keywords are attributes given as
Python values. ``name=``, ``ctx=``, ``out=`` and ``attr=`` are accepted and ignored. One output comes back
as an array, several as a list. ``F.contrib``, ``F.linalg``, ``F.random`` and ``F.image`` hold the
operators MXNet files as ``_contrib_*``, ``_linalg_*``, ``_random_*`` and ``_image_*``; ``F.npx`` holds them
under the names of MXNet's NumPy extension (``F.npx.relu``, ``F.npx.fully_connected``).
"""
from __future__ import annotations

from typing import Any, Callable

import jax.numpy as jnp
import numpy as np

from ._registry import OPERATORS, Attrs, Op, OpContext

__all__ = ["F", "Namespace"]

_IGNORED = frozenset(("name", "ctx", "out", "attr"))
_CONVERT = (int, float, bool, np.ndarray, np.generic, list, tuple)
_INFERENCE = OpContext(False)


def _as_input(value: Any) -> Any:
    return jnp.asarray(value) if isinstance(value, _CONVERT) else value


def _required(op: Op) -> int:
    return len(op.inputs) - op.optional


def make_caller(op: Op, label: str) -> Callable[..., Any]:
    """The Python function ``F.<label>``: binds arguments by the op's precomputed input names."""
    names = op.inputs
    count, required = len(names), _required(op)
    index = {name: i for i, name in enumerate(names)}
    order = op.attr_order
    where = f"F.{label}"
    variadic, fn, needs_ctx = op.variadic, op.fn, op.needs_ctx

    def call(*args: Any, **kwargs: Any) -> Any:
        if variadic:
            ins = [_as_input(a) for a in args]
            extra: tuple = ()
        else:
            ins = [None] * count
            for i, value in enumerate(args[:count]):
                ins[i] = _as_input(value)
            extra = args[count:]
        attrs: dict[str, Any] = {}
        if extra:
            if len(extra) > len(order):
                raise TypeError(f"{where}() takes {count} input(s) {list(names)} and {len(order)} positional "
                                f"attribute(s) {list(order)}; got {len(args)} positional arguments")
            attrs.update(zip(order, extra))
        for key, value in kwargs.items():
            i = index.get(key)
            if i is not None:
                ins[i] = _as_input(value)
            elif key not in _IGNORED:
                attrs[key] = value
        if variadic:
            if not ins and names:  # an op declaring no input names takes its inputs by keyword too
                raise TypeError(f"{where}() needs at least one input array")
        else:
            for i in range(required):
                if ins[i] is None:
                    raise TypeError(f"{where}() missing input {names[i]!r} (inputs: {list(names)})")
        if needs_ctx:
            from ... import autograd
            ctx = OpContext(autograd.is_training())
        else:
            ctx = _INFERENCE
        outs = fn(ins, Attrs(attrs, where), ctx)
        return outs[0] if len(outs) == 1 else outs

    call.__name__ = call.__qualname__ = label.rsplit(".", 1)[-1]
    call.__doc__ = f"MXNet operator {op.name} (inputs {list(names)}{', variadic' if variadic else ''})."
    return call


class Namespace:
    """A namespace of MXNet operators whose registry names start with ``prefix``."""

    def __init__(self, prefix: str = "", label: str = "", **children: "Namespace"):
        self._prefix, self._label = prefix, label
        self.__dict__.update(children)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        op = OPERATORS.get(self._prefix + name)
        if op is None:
            where = f"F.{self._label}{name}"
            raise AttributeError(f"{where}: {name!r} is not among the supported MXNet operators "
                                 "(hybrid.mxnet.ops.OPERATORS lists them)")
        caller = make_caller(op, self._label + name)
        self.__dict__[name] = caller  # later lookups are plain attribute reads
        return caller

    def __dir__(self) -> list[str]:
        n = len(self._prefix)
        names = {k[n:] for k in OPERATORS if k.startswith(self._prefix)}
        return sorted(names | set(self.__dict__) - {"_prefix", "_label"})

    def __repr__(self) -> str:
        return f"<MXNet operator namespace F{'.' + self._label.rstrip('.') if self._label else ''}>"


# MXNet's NumPy-extension name (``npx.relu``, ``F.npx.fully_connected``) -> the operator of the table
NPX_OPERATORS = {
    "relu": "relu", "sigmoid": "sigmoid", "softmax": "softmax", "log_softmax": "log_softmax", "one_hot": "one_hot",
    "pick": "pick", "batch_dot": "batch_dot", "sequence_mask": "SequenceMask", "embedding": "Embedding",
    "fully_connected": "FullyConnected", "convolution": "Convolution", "deconvolution": "Deconvolution",
    "pooling": "Pooling", "batch_norm": "BatchNorm", "layer_norm": "LayerNorm", "group_norm": "GroupNorm",
    "instance_norm": "InstanceNorm", "dropout": "Dropout", "topk": "topk", "gather_nd": "gather_nd",
    "scatter_nd": "scatter_nd", "activation": "Activation", "leaky_relu": "LeakyReLU", "smooth_l1": "smooth_l1",
    "erf": "erf", "erfinv": "erfinv", "gamma": "gamma", "gammaln": "gammaln", "reshape_like": "reshape_like",
    "broadcast_like": "broadcast_like", "stop_gradient": "BlockGrad", "sequence_last": "SequenceLast",
    "sequence_reverse": "SequenceReverse", "roi_pooling": "ROIPooling", "slice_channel": "split",
    "softmax_cross_entropy": "softmax_cross_entropy", "cast": "Cast", "sign": "sign", "shape_array": "shape_array",
}


class _NpxNamespace(Namespace):
    """``F.npx``: the operators under MXNet's NumPy-extension names, as ``hybrid_forward`` code written for
    ``npx.set_np()`` calls them (``F.npx.relu(x)``)."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        target = NPX_OPERATORS.get(name)
        if target is None or target not in OPERATORS:
            raise AttributeError(f"F.npx.{name}: not an operator of MXNet's NumPy extension that hybrid has "
                                 f"(it has {', '.join(sorted(NPX_OPERATORS))})")
        caller = make_caller(OPERATORS[target], "npx." + name)
        self.__dict__[name] = caller
        return caller

    def __dir__(self) -> list[str]:
        return sorted(NPX_OPERATORS)


F = Namespace("", "", contrib=Namespace("_contrib_", "contrib."), linalg=Namespace("_linalg_", "linalg."),
              random=Namespace("_random_", "random."), image=Namespace("_image_", "image."),
              npx=_NpxNamespace("", "npx."))
