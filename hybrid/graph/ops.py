"""The big-op registry: layer operations that stay single named nodes in the graph.

A big op is registered with its JAX implementation and a fusion *pattern*
(TVM's vocabulary: ``elementwise``, ``broadcast``, ``injective``, ``reduce``,
``out_elementwise_fusable``, ``opaque``).  Calling :func:`call` runs the op
through a ``jax.jit``-wrapped function whose name encodes the op and its
attributes, so that a trace of any JAX function sees the op as one call and
:mod:`hybrid.graph.trace` can turn it back into a single node.  Eagerly, the
same jitted function runs as one compiled kernel.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Callable

import jax

from . import precision as _precision

__all__ = ["OpDef", "register", "call", "get", "bound_op", "BOUND_NAME"]

PATTERNS = ("elementwise", "broadcast", "injective", "reduce", "out_elementwise_fusable", "opaque")


@dataclass(frozen=True)
class OpDef:
    """A registered big op: ``impl(*inputs, **attrs)``, its fusion pattern and its precision trait
    under mixed precision (``'low'``, ``'float32'`` or ``'follow'``, see :mod:`.precision`)."""

    name: str
    impl: Callable
    pattern: str = "opaque"
    precision: str = "follow"


@dataclass(frozen=True)
class BoundOp:
    """One (op, attrs, input structure) combination, with its jitted function."""

    opdef: OpDef
    attrs: tuple
    in_tree: Any
    fn: Callable


_REGISTRY: dict[str, OpDef] = {}
_BOUND: list[BoundOp] = []
_BOUND_INDEX: dict[tuple, int] = {}
_BIND_LOCK = threading.Lock()
BOUND_NAME = re.compile(r"^hybrid_op_(\d+)__")


def register(name: str, pattern: str = "opaque", precision: str = "follow") -> Callable[[Callable], Callable]:
    """Decorator registering ``impl`` as big op ``name``."""
    if pattern not in PATTERNS:
        raise ValueError(f"unknown fusion pattern {pattern!r}; expected one of {PATTERNS}")
    if precision not in _precision.PRECISIONS:
        raise ValueError(f"unknown precision trait {precision!r}; expected one of {_precision.PRECISIONS}")

    def deco(impl: Callable) -> Callable:
        _REGISTRY[name] = OpDef(name, impl, pattern, precision)
        return impl

    return deco


def get(name: str) -> OpDef:
    """The OpDef registered as ``name``; KeyError names the known ops."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown big op {name!r}; registered: {sorted(_REGISTRY)}") from None


def registered() -> list[str]:
    return sorted(_REGISTRY)


def _hashable(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    return value


def _bind(name: str, attrs: dict, in_tree: Any) -> BoundOp:
    key = (name, tuple(sorted((k, _hashable(v)) for k, v in attrs.items())), in_tree)
    index = _BOUND_INDEX.get(key)
    if index is not None:
        return _BOUND[index]
    with _BIND_LOCK:  # the index in a bound op's name must be its place in _BOUND, whatever other threads do
        index = _BOUND_INDEX.get(key)
        if index is not None:
            return _BOUND[index]
        opdef = get(name)
        frozen = key[1]

        def bound(*leaves):
            return opdef.impl(*jax.tree_util.tree_unflatten(in_tree, leaves), **dict(frozen))

        index = len(_BOUND)
        bound.__name__ = bound.__qualname__ = f"hybrid_op_{index}__{name}"
        entry = BoundOp(opdef, frozen, in_tree, jax.jit(bound))
        _BOUND.append(entry)
        _BOUND_INDEX[key] = index
        return entry


def call(name: str, *inputs: Any, **attrs: Any) -> Any:
    """Run big op ``name`` on ``inputs`` (arrays or pytrees of arrays) with static ``attrs``; under a
    mixed-precision policy, its inputs are cast as its precision trait says."""
    leaves, in_tree = jax.tree_util.tree_flatten(inputs)
    policy = _precision.current()
    if policy is not None:
        leaves = policy.cast(name, get(name).precision, leaves)
    return _bind(name, attrs, in_tree).fn(*leaves)


def bound_op(call_name: str) -> BoundOp | None:
    """The BoundOp behind a traced jit call named ``call_name``, or None if it is not a big op."""
    match = BOUND_NAME.match(call_name)
    if match is None:
        return None
    index = int(match.group(1))
    return _BOUND[index] if index < len(_BOUND) else None

