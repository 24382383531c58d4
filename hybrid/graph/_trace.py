"""JAX function -> Graph, through ``jax.make_jaxpr``.

Big ops (jit calls named by :mod:`hybrid.graph.ops`) become single ``kind='op'``
nodes; other ``jit`` calls are inlined; every other equation becomes a
``kind='prim'`` node that keeps its primitive and parameters, so lowering can
bind it again unchanged (control flow, custom derivatives and effects included).
"""
from __future__ import annotations

import functools
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax.extend import core as jcore

from . import ops
from .ir import Graph, Node, Value

__all__ = ["trace", "from_jaxpr"]

_INLINED_CALLS = ("pjit", "jit", "closed_call", "core_call")


def trace(fn: Callable, *args: Any, input_names: Sequence[str] | None = None) -> Graph:
    """Trace ``fn(*args)`` (args: arrays or ShapeDtypeStructs, possibly nested) into a Graph.

    Graph inputs are the flattened ``args`` leaves; outputs the flattened results.
    """
    closed = jax.make_jaxpr(fn)(*args)
    return from_jaxpr(closed, input_names)


def from_jaxpr(closed: Any, input_names: Sequence[str] | None = None) -> Graph:
    """Convert a ClosedJaxpr into a Graph (one node per equation, big ops recognised)."""
    jaxpr = closed.jaxpr
    names = list(input_names) if input_names is not None else [f"in{i}" for i in range(len(jaxpr.invars))]
    if len(names) != len(jaxpr.invars):
        raise ValueError(f"{len(names)} input names for {len(jaxpr.invars)} inputs")
    env: dict[Any, Value] = {}
    inputs = []
    for var, name in zip(jaxpr.invars, names):
        value = Value(var.aval.shape, var.aval.dtype, name)
        env[var] = value
        inputs.append(value)
    builder = _Builder()
    for var, const in zip(jaxpr.constvars, closed.consts):
        env[var] = builder.const(const, var.aval)
    builder.convert(jaxpr, env, "")
    outputs = [builder.read(env, atom) for atom in jaxpr.outvars]
    return Graph(inputs, outputs, builder.nodes, builder.consts)


class _Builder:
    def __init__(self):
        self.nodes: list[Node] = []
        self.consts: dict[Value, Any] = {}

    def const(self, array: Any, aval: Any) -> Value:
        value = Value(aval.shape, aval.dtype)
        if not aval.shape and not isinstance(array, jax.Array):
            array = np.asarray(array, dtype=aval.dtype)  # literals: cheap to inspect in passes
        self.consts[value] = array
        return value

    def read(self, env: dict, atom: Any) -> Value:
        if isinstance(atom, jcore.Literal):
            return self.const(atom.val, atom.aval)
        return env[atom]

    def convert(self, jaxpr: Any, env: dict, outer_scope: str) -> None:
        for eqn in jaxpr.eqns:
            name = eqn.primitive.name
            inputs = [self.read(env, atom) for atom in eqn.invars]
            scope = _join_scope(outer_scope, str(eqn.source_info.name_stack).replace("/", "."))
            out_types = [(v.aval.shape, v.aval.dtype) for v in eqn.outvars]
            if name in _INLINED_CALLS:
                inner = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
                bound = ops.bound_op(eqn.params.get("name", ""))
                if bound is not None and _matches(bound, eqn):
                    attrs = dict(bound.attrs)
                    attrs["_in_tree"] = bound.in_tree
                    node = Node(bound.opdef.name, "op", inputs, out_types, attrs, bound, scope)
                    self._emit(node, eqn.outvars, env)
                    continue
                if inner is not None and not eqn.effects:
                    self._inline(inner, inputs, eqn.outvars, env, scope)
                    continue
            node = Node(name, "prim", inputs, out_types, dict(eqn.params), eqn.primitive, scope,
                        eqn.effects, eqn.ctx)
            self._emit(node, eqn.outvars, env)

    def _emit(self, node: Node, outvars: Sequence[Any], env: dict) -> None:
        self.nodes.append(node)
        for var, value in zip(outvars, node.outputs):
            env[var] = value

    def _inline(self, inner: Any, inputs: list[Value], outvars: Sequence[Any], env: dict, scope: str) -> None:
        jaxpr = inner.jaxpr if hasattr(inner, "jaxpr") else inner
        consts = inner.consts if hasattr(inner, "consts") else ()
        inner_env: dict[Any, Value] = dict(zip(jaxpr.invars, inputs))
        for var, const in zip(jaxpr.constvars, consts):
            inner_env[var] = self.const(const, var.aval)
        self.convert(jaxpr, inner_env, scope)
        for var, atom in zip(outvars, jaxpr.outvars):
            env[var] = self.read(inner_env, atom)


@functools.lru_cache(maxsize=4096)
def _output_types(bound: Any, in_types: tuple) -> tuple | None:
    specs = [jax.ShapeDtypeStruct(shape, dtype) for shape, dtype in in_types]
    try:
        out = jax.eval_shape(bound.fn, *specs)
    except Exception:  # inputs of another shape: not this op
        return None
    return tuple((o.shape, o.dtype) for o in jax.tree_util.tree_leaves(out))


def _matches(bound: Any, eqn: Any) -> bool:
    """Whether a jit call named after a big op is that op itself, not a piece of it that
    differentiation split off (same name, other inputs/outputs)."""
    if len(eqn.invars) != bound.in_tree.num_leaves:
        return False
    in_types = tuple((v.aval.shape, v.aval.dtype) for v in eqn.invars)
    return _output_types(bound, in_types) == tuple((v.aval.shape, v.aval.dtype) for v in eqn.outvars)


def _join_scope(outer: str, inner: str) -> str:
    if outer and inner and not inner.startswith(outer):
        return f"{outer}.{inner}"
    return inner or outer
