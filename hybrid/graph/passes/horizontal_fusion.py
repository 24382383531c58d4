"""Horizontal fusion: nodes of an op with a ``group_op`` trait reading the same input (e.g. the ``dense``
Q, K and V projections of attention) become one node of the group op (``dense_group``): the weights are
concatenated, one matmul runs, and the result is split into the original outputs.

A node joins a group only when its weight and bias are defined before the group's first member (so
the group can run there) and it has the same attributes and dtype as the others.
"""
from __future__ import annotations

from .. import ops
from ..ir import Graph, Node
from ..rewrite import Rewriter, make_op_node, positions, types_of
from ..target import Target
from ._registry import register_pass


def find_groups(graph: Graph) -> list[list[Node]]:
    """Groups (in graph order) of two or more nodes that can share one matmul."""
    where = positions(graph)
    index = {node: i for i, node in enumerate(graph.nodes)}
    candidates: dict[tuple, list[Node]] = {}
    for node in graph.nodes:
        if node.kind == "op" and ops.get(node.op).group_op is not None:
            attrs = tuple(sorted((k, v) for k, v in node.attrs.items() if not k.startswith("_")))
            key = (node.op, node.inputs[0], attrs, str(node.inputs[1].dtype))
            candidates.setdefault(key, []).append(node)
    groups = []
    for members in candidates.values():
        first = index[members[0]]
        group = [members[0]] + [m for m in members[1:] if all(where[v] < first for v in m.inputs[1:])]
        if len(group) > 1:
            groups.append(group)
    return groups


@register_pass("horizontal_fusion")
def horizontal_fusion(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    groups = find_groups(graph)
    if not groups:
        return graph, {"groups": 0, "nodes_fused": 0}
    leader = {group[0]: group for group in groups}
    absorbed = {node for group in groups for node in group[1:]}
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        if node in absorbed:
            continue
        group = leader.get(node)
        if group is None:
            rewriter.keep(node)
            continue
        x = rewriter.value(node.inputs[0])
        args, units, has_bias = [x], [], []
        for member in group:
            weight, *bias = [rewriter.value(v) for v in member.inputs[1:]]
            args += [weight] + bias
            units.append(weight.shape[0])
            has_bias.append(bool(bias))
        attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
        group_op = ops.get(node.op).group_op
        assert group_op is not None  # find_groups groups only ops with a group_op
        fused = rewriter.emit(make_op_node(group_op, args, node.scope,
                                           types_of(*(m.outputs[0] for m in group)), units=tuple(units),
                                           has_bias=tuple(has_bias), **attrs))
        for member, out in zip(group, fused.outputs):
            rewriter.replace(member.outputs[0], out)
    fused_count = sum(len(g) for g in groups)
    return rewriter.finish(), {"groups": len(groups), "nodes_fused": fused_count,
                               "nodes_removed": fused_count - len(groups)}
