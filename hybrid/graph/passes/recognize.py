"""Raise primitive patterns to big ops: the primitive expansion of ``jax.nn.softmax`` /
``jax.nn.log_softmax`` over one axis becomes a ``softmax`` / ``log_softmax`` node, and calls of
``jax.nn.relu`` / ``relu6`` become ``activation`` nodes, so that later passes (attention, fused
cross-entropy, layout) see user-written code the way they see layer code.

The expansion matched is ``m = max(x, a)`` (optionally ``max(-inf, m)``), broadcast back,
(optionally ``stop_gradient``), ``d = x - m``, ``e = exp(d)``, ``s = sum(e, a)`` broadcast back, then
``e / s`` (softmax) or ``d - log(s)`` (log_softmax). Any other shape of code is left alone.
"""
from __future__ import annotations

from typing import TypeGuard

from ..target import Target
from ..ir import Graph, Node, Value
from ..rewrite import Rewriter, is_scalar_const, make_op_node, types_of
from ._registry import register_pass


def _only_user(users: dict, value: Value, op: str | None = None) -> Node | None:
    nodes = users.get(value, [])
    if len(nodes) != 1 or (op is not None and (nodes[0].op != op or nodes[0].kind != "prim")):
        return None
    return nodes[0]


def _keepdims_broadcast(node: Node | None, source: Value, axis: int, full: Value) -> TypeGuard[Node]:
    if node is None or node.kind != "prim" or node.op != "broadcast_in_dim" or node.inputs[0] is not source:
        return False
    expected = tuple(1 if i == axis else d for i, d in enumerate(full.shape))
    dims = tuple(i for i in range(len(full.shape)) if i != axis)
    return node.outputs[0].shape == expected and tuple(node.attrs["broadcast_dimensions"]) == dims


def match_softmax(start: Node, users: dict, consts: dict) -> tuple[str, Value, int, Value] | None:
    """For a ``reduce_max`` node starting a softmax expansion: (kind, x, axis, output value)."""
    if start.kind != "prim" or start.op != "reduce_max" or len(start.attrs["axes"]) != 1:
        return None
    x = start.inputs[0]
    axis = start.attrs["axes"][0]
    value = start.outputs[0]
    nxt = _only_user(users, value)
    if nxt is not None and nxt.kind == "prim" and nxt.op == "max":
        other = nxt.inputs[0] if nxt.inputs[1] is value else nxt.inputs[1]
        if not is_scalar_const(consts, other, float("-inf")):
            return None
        value, nxt = nxt.outputs[0], _only_user(users, nxt.outputs[0])
    if not _keepdims_broadcast(nxt, value, axis, x):
        return None
    value, nxt = nxt.outputs[0], _only_user(users, nxt.outputs[0])
    if nxt is not None and nxt.kind == "prim" and nxt.op == "stop_gradient":
        value, nxt = nxt.outputs[0], _only_user(users, nxt.outputs[0])
    if nxt is None or nxt.op != "sub" or nxt.inputs != [x, value]:
        return None
    shifted = nxt.outputs[0]
    shifted_users = users.get(shifted, [])
    exp = next((n for n in shifted_users if n.op == "exp" and n.kind == "prim"), None)
    if exp is None:
        return None
    e = exp.outputs[0]
    total = next((n for n in users.get(e, []) if n.op == "reduce_sum" and tuple(n.attrs["axes"]) == (axis,)), None)
    if total is None:
        return None
    back = _only_user(users, total.outputs[0])
    if not _keepdims_broadcast(back, total.outputs[0], axis, x):
        return None
    for user in users.get(back.outputs[0], []):
        if user.op == "div" and user.inputs == [e, back.outputs[0]] and len(shifted_users) == 1 \
                and len(users.get(e, [])) == 2:
            return "softmax", x, axis, user.outputs[0]
        if user.op == "log" and len(shifted_users) == 2 and len(users.get(e, [])) == 1:
            log_users = users.get(user.outputs[0], [])
            if len(log_users) == 1 and log_users[0].op == "sub" and log_users[0].inputs == [shifted, user.outputs[0]]:
                return "log_softmax", x, axis, log_users[0].outputs[0]
    return None


#: ``jax.nn`` functions that trace to a ``custom_jvp_call`` and the activation op computing them.
ACTIVATION_CALLS = {"relu": "relu", "relu6": "relu6"}


def match_activation(node: Node) -> str | None:
    """The activation op name of a ``custom_jvp_call`` of ``jax.nn.relu``-like functions."""
    if node.kind != "prim" or node.op != "custom_jvp_call" or len(node.inputs) != 1 or len(node.outputs) != 1:
        return None
    if node.display_name() == node.op:
        return None
    return ACTIVATION_CALLS.get(node.display_name()[len("custom_jvp_call<"):-1])


@register_pass("recognize")
def recognize(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    users = graph.users()
    found: dict[Value, tuple[str, Value, dict]] = {}
    for node in graph.nodes:
        match = match_softmax(node, users, graph.consts)
        if match is not None:
            kind, x, axis, out = match
            found[out] = (kind, x, {"axis": axis, "temperature": 1.0})
        activation = match_activation(node)
        if activation is not None:
            found[node.outputs[0]] = ("activation", node.inputs[0], {"act_type": activation})
    if not found:
        return graph, {"ops_recognized": 0}
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        kept = rewriter.keep(node)
        for out in node.outputs:
            if out in found:
                kind, x, attrs = found[out]
                new = rewriter.emit(make_op_node(kind, [rewriter.value(x)], node.scope, types_of(out), **attrs))
                rewriter.replace(kept.outputs[0], new.outputs[0])
    return rewriter.finish(), {"ops_recognized": len(found), "nodes_removed": len(found)}
