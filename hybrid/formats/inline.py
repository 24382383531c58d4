"""Replace call-like primitives (``custom_jvp_call``, ``custom_vjp_call``, ``checkpoint``) by their bodies.

``jax.nn.relu``, ``softplus``, ``logsumexp`` ... appear in traces of free user
code as ``custom_jvp_call`` nodes holding a sub-program.  Export keeps the
primal computation: the body becomes ordinary primitive nodes.  The custom
derivative rule is dropped, so gradients of the imported graph are those of the
body (they differ only where the rule special-cases a point, e.g. relu at 0).
"""
from __future__ import annotations

from jax.extend import core as jcore

from ..graph.ir import Graph, Node, Value
from ..graph._trace import from_jaxpr
from .prims import INLINED_CALLS

__all__ = ["inline_calls"]

_MAX_ROUNDS = 32


def _body(node: Node):
    body = node.attrs.get(INLINED_CALLS[node.op])
    if body is None:
        return None
    if not hasattr(body, "consts"):  # an open Jaxpr (checkpoint)
        body = jcore.ClosedJaxpr(body, ())
    return body


def _inline_once(graph: Graph) -> tuple[Graph, bool]:
    replace: dict[Value, Value] = {}
    nodes: list[Node] = []
    consts = dict(graph.consts)
    changed = False
    for node in graph.nodes:
        inputs = [replace.get(v, v) for v in node.inputs]
        body = _body(node) if node.kind == "prim" and node.op in INLINED_CALLS and not node.effects else None
        if body is not None:
            sub = from_jaxpr(body)
            binding = dict(zip(sub.inputs, inputs))
            consts.update(sub.consts)
            for inner in sub.nodes:
                inner.inputs = [binding.get(v, v) for v in inner.inputs]
                inner.scope = inner.scope or node.scope
                nodes.append(inner)
            for old, new in zip(node.outputs, sub.outputs):
                replace[old] = binding.get(new, new)
            changed = True
            continue
        if inputs != node.inputs:
            copy = Node(node.op, node.kind, inputs, [(v.shape, v.dtype) for v in node.outputs], node.attrs,
                        node.impl, node.scope, node.effects, node.ctx)
            replace.update(zip(node.outputs, copy.outputs))
            node = copy
        nodes.append(node)
    outputs = [replace.get(v, v) for v in graph.outputs]
    return Graph(graph.inputs, outputs, nodes, consts), changed


def inline_calls(graph: Graph) -> Graph:
    """A new graph with every inlinable call replaced by its body (nested calls too).

    The input graph is not modified.
    """
    for _ in range(_MAX_ROUNDS):
        graph, changed = _inline_once(graph)
        if not changed:
            return graph
    return graph
