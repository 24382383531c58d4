"""Graph -> JAX callable.  ``jax.jit`` of the result is the XLA executable.

Lowering interprets the graph once per trace: big ops call their registered
jitted function (so they stay recognisable if the result is traced again),
primitives are bound again with their original parameters. A graph lowered with
``inline=True`` (for a program that only XLA will see) calls the ops' functions
directly instead: no nested ``jit`` per op or fused group, which saves lowering
and compile time.
"""
from __future__ import annotations

import contextvars
from typing import Any, Callable

import jax

from .ir import Graph, Node

__all__ = ["lower", "evaluate_node", "register_kind", "inlining"]

_KIND_EVALUATORS: dict[str, Callable[[Node, list], list]] = {}
_INLINE = contextvars.ContextVar("hybrid_inline_ops", default=False)


def inlining() -> bool:
    """Whether the graph being evaluated was lowered with ``inline=True`` (evaluators of node kinds
    then run their functions directly rather than as named jitted calls)."""
    return _INLINE.get()


def register_kind(kind: str) -> Callable:
    """Register how nodes of a new ``kind`` (e.g. fused groups) are evaluated."""
    def deco(fn: Callable[[Node, list], list]) -> Callable:
        _KIND_EVALUATORS[kind] = fn
        return fn
    return deco


@register_kind("op")
def _evaluate_op(node: Node, args: list) -> list:
    return jax.tree_util.tree_leaves((node.impl.raw if _INLINE.get() else node.impl.fn)(*args))


@register_kind("prim")
def _evaluate_prim(node: Node, args: list) -> list:
    params = node.impl.get_bind_params(node.attrs)
    subfuns: tuple = ()
    if isinstance(params, tuple):  # older JAX returns (subfuns, params)
        subfuns, params = params
    manager = node.ctx.manager if node.ctx is not None else None
    if manager is not None:
        with manager:
            result = node.impl.bind(*subfuns, *args, **params)
    else:
        result = node.impl.bind(*subfuns, *args, **params)
    return list(result) if node.impl.multiple_results else [result]


def evaluate_node(node: Node, args: list) -> list:
    """Run one node on concrete or traced arrays; returns its outputs as a list."""
    try:
        evaluator = _KIND_EVALUATORS[node.kind]
    except KeyError:
        raise ValueError(f"no evaluator for node kind {node.kind!r} ({node.display_name()})") from None
    return evaluator(node, args)


def lower(graph: Graph, inline: bool = False) -> Callable[..., list]:
    """A function ``run(*inputs) -> list of outputs`` computing ``graph`` with JAX operations;
    ``inline`` for programs that are not traced into a graph again (see the module's docstring)."""
    nodes = graph.nodes
    consts = graph.consts
    inputs = graph.inputs
    outputs = graph.outputs

    def run(*flat_inputs: Any) -> list:
        if len(flat_inputs) != len(inputs):
            raise TypeError(f"graph takes {len(inputs)} inputs, got {len(flat_inputs)}")
        env = dict(consts)
        env.update(zip(inputs, flat_inputs))
        token = _INLINE.set(True) if inline else None  # graphs nested in nodes inherit it
        try:
            for node in nodes:
                results = evaluate_node(node, [env[v] for v in node.inputs])
                env.update(zip(node.outputs, results))
        finally:
            if token is not None:
                _INLINE.reset(token)
        return [env[v] for v in outputs]

    return run
