"""The op vocabulary of the graph: big ops and their traits, and the fusion patterns of primitives.

A *big op* is a layer operation that stays one named node in the graph (``dense``, ``convolution``,
``batch_norm``...). It is registered with its JAX implementation and its *traits*: its fusion pattern
(:class:`OpPattern`), its precision under mixed precision, and what the passes need to know to rewrite
it (the axis holding channels, the attribute naming its data layout, whether a per-channel scale of its
output folds into its weight...). Passes ask these traits, never an op's name, so an op registered with
the right traits is handled by every pass without changing them.

How the tracer recognises a big op (the identity trick): :func:`call` runs the op through a
``jax.jit``-wrapped function whose *name* encodes the op and its attributes (``hybrid_op_<index>__<op>``,
the index pointing into a table of bound ops). A trace of any JAX function therefore sees the op as one
call of a jitted function; :mod:`hybrid.graph.trace` reads the name back with :func:`bound_op` and makes
the call one node, keeping the attributes. Eagerly, the same jitted function runs as one compiled kernel.
"""
from __future__ import annotations

import enum
import functools
import inspect
import re
import threading
from dataclasses import dataclass
from typing import Any, Callable, Protocol, cast

import jax

from . import precision as _precision

__all__ = ["OpPattern", "OpDef", "big_op", "register", "call", "get", "bound_op", "pattern_of", "BOUND_NAME"]


class OpPattern(enum.IntEnum):
    """Fusion kinds, ordered as in TVM's operator fusion: a later kind constrains fusion more. The kind
    of a group of ops is the ``max`` of its members' kinds.

    ELEMENTWISE: each output element from the same-index input elements (``add``, ``exp``).
    BROADCAST: elementwise after broadcasting inputs (``broadcast_in_dim``).
    INJECTIVE: each output element from one input element, anywhere (``reshape``, ``transpose``, ``slice``).
    COMM_REDUCE: a commutative reduction (``reduce_sum``, softmax's normaliser).
    OUT_ELEMENTWISE_FUSABLE: an anchor that takes elementwise epilogues (matmul, convolution).
    OPAQUE: never fused (control flow, random numbers, ops with several outputs or effects).
    """

    ELEMENTWISE = 0
    BROADCAST = 1
    INJECTIVE = 2
    COMM_REDUCE = 3
    OUT_ELEMENTWISE_FUSABLE = 4
    OPAQUE = 8


@dataclass(frozen=True)
class OpDef:
    """A registered big op: ``impl(*inputs, **attrs)`` and its traits.

    - ``pattern``: its :class:`OpPattern`.
    - ``precision``: ``'low'``, ``'float32'`` or ``'follow'`` under mixed precision (:mod:`.precision`).
    - ``channel_axis(attrs, out_shape)``: the axis of its first output that holds channels, or None.
    - ``layout_attr``: the attribute naming its data layout (``'NCHW'``...), which a pass may change
      to the channels-last layout; ``weight_layout_attr``: the attribute naming the layout of its weight
      (input 1); ``keeps_layout(attrs, in_shapes, target)``: True where the op must keep its layout on
      ``target`` (a :class:`hybrid.graph.target.Target`).
    - ``channel_axis_attr``: the attribute holding its channel axis, which a pass may move.
    - ``scale_foldable``: a per-channel scale of its output can be folded into its weight (input 1,
      output channels leading) and bias (input 2).
    - ``affine_in_inference``: with ``training=False`` it is the per-channel affine map
      ``(x - mean) * gamma / sqrt(var + eps) + beta`` of inputs ``(x, gamma, beta, mean, var)``.
    - ``group_op``: the op computing several of these ops on one input at once (horizontal fusion).
    - ``random``: it draws random numbers (from a key input); ``stateful``: it also returns new state.
    """

    name: str
    impl: Callable
    pattern: OpPattern = OpPattern.OPAQUE
    precision: str = "follow"
    channel_axis: Callable[[dict, tuple], int] | None = None
    layout_attr: str | None = None
    weight_layout_attr: str | None = None
    keeps_layout: Callable[[dict, list, Any], bool] | None = None
    channel_axis_attr: str | None = None
    scale_foldable: bool = False
    affine_in_inference: bool = False
    group_op: str | None = None
    random: bool = False
    stateful: bool = False


@dataclass(frozen=True)
class BoundOp:
    """One (op, attrs, input structure) combination, with its jitted function (``fn``, named so that
    a trace recognises it) and the same function not jitted (``raw``, for inlined lowering)."""

    opdef: OpDef
    attrs: tuple
    in_tree: Any
    fn: Callable
    raw: Callable


class _BigOp(Protocol):
    """The public function of a big op (see :func:`big_op`); ``impl`` is its registered implementation."""

    impl: Callable[..., Any]

    def __call__(self, *args: Any, **kwargs: Any) -> Any: ...


_REGISTRY: dict[str, OpDef] = {}
_BOUND: list[BoundOp] = []
_BOUND_INDEX: dict[tuple, int] = {}
_BIND_LOCK = threading.Lock()
BOUND_NAME = re.compile(r"^hybrid_op_(\d+)__")


def register(name: str, pattern: OpPattern = OpPattern.OPAQUE, precision: str = "follow",
             **traits: Any) -> Callable[[Callable], Callable]:
    """Decorator registering ``impl`` as big op ``name`` with its traits (see :class:`OpDef`).
    Raises TypeError/ValueError for an unknown pattern, precision or trait."""
    if not isinstance(pattern, OpPattern):
        raise TypeError(f"op {name!r}: pattern must be an OpPattern, got {pattern!r}")
    if precision not in _precision.PRECISIONS:
        raise ValueError(f"unknown precision trait {precision!r}; expected one of {_precision.PRECISIONS}")

    def deco(impl: Callable) -> Callable:
        _REGISTRY[name] = OpDef(name, impl, pattern, precision, **traits)
        return impl

    return deco


def big_op(name: str, pattern: OpPattern = OpPattern.OPAQUE, precision: str = "follow",
           normalize: Callable[..., dict] | None = None, **traits: Any) -> Callable[[Callable], _BigOp]:
    """Decorator defining big op ``name`` once: the decorated function is registered as its implementation
    (with ``pattern``, ``precision`` and ``traits``, see :class:`OpDef`), and the decorator returns the
    public function running it as one node through :func:`call`; ``public.impl`` is the implementation.

    The function's positional parameters are the op's inputs (arrays, None, or pytrees of arrays), its
    keyword-only parameters the op's static attributes, with their defaults. ``normalize(*inputs,
    **attrs)`` returns the attributes in canonical form (tuples for sequences, non-negative axes,
    floats), so that equal calls share one compiled kernel."""
    def deco(impl: Callable) -> _BigOp:
        register(name, pattern, precision, **traits)(impl)
        params = inspect.signature(impl).parameters.values()
        inputs = [(p.name, p.default) for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        attrs = {p.name: p.default for p in params if p.kind is p.KEYWORD_ONLY}
        if len(inputs) + len(attrs) != len(params):
            raise TypeError(f"big op {name!r}: parameters must be positional inputs and keyword-only attributes")

        @functools.wraps(impl)
        def public(*args: Any, **kwargs: Any) -> Any:
            if len(args) > len(inputs):
                raise TypeError(f"{name}() takes {len(inputs)} inputs but {len(args)} were given")
            leaves = list(args)
            for input_name, default in inputs[len(args):]:
                value = kwargs.pop(input_name, default)
                if value is inspect.Parameter.empty:
                    raise TypeError(f"{name}() missing input {input_name!r}")
                leaves.append(value)
            unknown = kwargs.keys() - attrs.keys()
            if unknown:
                raise TypeError(f"{name}() got unexpected keyword arguments {sorted(unknown)}")
            values = {**attrs, **kwargs}
            missing = [k for k, v in values.items() if v is inspect.Parameter.empty]
            if missing:
                raise TypeError(f"{name}() missing keyword arguments {missing}")
            return call(name, *leaves, **(normalize(*leaves, **values) if normalize is not None else values))

        op = cast(_BigOp, public)
        op.impl = impl
        return op

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
        entry = BoundOp(opdef, frozen, in_tree, jax.jit(bound), bound)
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



# -- primitives -----------------------------------------------------------------------------
_PRIM_PATTERNS: dict[str, OpPattern] = {
    **dict.fromkeys("""add sub mul div max min pow integer_pow exp exp2 log log1p expm1 tanh logistic sin cos tan
neg abs sqrt rsqrt cbrt sign floor ceil round erf erfc erf_inv select_n convert_element_type eq ne lt le gt ge and
or not xor is_finite nextafter rem atan2 square clamp stop_gradient asin acos atan sinh cosh asinh acosh
atanh""".split(), OpPattern.ELEMENTWISE),
    "broadcast_in_dim": OpPattern.BROADCAST,
    **dict.fromkeys(("reshape", "transpose", "squeeze", "expand_dims", "slice", "concatenate", "pad", "rev"),
                    OpPattern.INJECTIVE),
    **dict.fromkeys(("reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "argmax", "argmin", "reduce_and",
                     "reduce_or"), OpPattern.COMM_REDUCE),
}
_CALLS = ("pjit", "jit", "closed_call", "custom_jvp_call")


def _jaxpr_is_elementwise(jaxpr: Any) -> bool:
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if _PRIM_PATTERNS.get(name) is OpPattern.ELEMENTWISE:
            continue
        inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
        if name in _CALLS and inner is not None and _jaxpr_is_elementwise(getattr(inner, "jaxpr", inner)):
            continue
        return False
    return True


def pattern_of(node: Any) -> OpPattern:
    """The fusion pattern of a graph node: its big op's trait, its primitive's kind, or OPAQUE (effects,
    several outputs, unknown primitives); a custom-derivative call is ELEMENTWISE when its body is."""
    if node.effects or len(node.outputs) != 1:
        return OpPattern.OPAQUE
    if node.kind == "op":
        return get(node.op).pattern
    if node.kind != "prim":
        return OpPattern.OPAQUE
    if node.op == "custom_jvp_call":
        inner = node.attrs["call_jaxpr"]
        return OpPattern.ELEMENTWISE if _jaxpr_is_elementwise(getattr(inner, "jaxpr", inner)) else OpPattern.OPAQUE
    return _PRIM_PATTERNS.get(node.op, OpPattern.OPAQUE)
