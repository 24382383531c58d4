"""Elementwise fusion: chains of elementwise, broadcast and injective operations are grouped into
``fused`` nodes, each lowered as one unit (a named sub-computation), by rules in the vocabulary of
TVM's operator fusion (:class:`hybrid.graph.ops.OpPattern`, ordered; a group's kind is the max of its
members'):

- elementwise/broadcast ops join their producer's group (a matmul/convolution *anchor* takes them as
  its epilogue);
- injective ops (reshape, transpose, slice, ...) join groups without an anchor;
- a reduction joins a group of elementwise/injective ops and becomes its root; only elementwise ops may
  follow it;
- opaque ops (convolutions' inputs, control flow, random numbers, custom derivatives, ...) are never fused.

A node joins its producer's group only when the producer's output has no other reader and every other
input of the node is defined before the group starts, so groups never form cycles.
"""
from __future__ import annotations

import itertools

import jax

from ..ir import Graph, Node, Value
from .._lower import inlining, lower, register_kind
from ..ops import OpPattern, pattern_of
from ..rewrite import Rewriter, extract_subgraph, use_counts
from ..target import Target
from ._registry import register_pass


class _Group:
    """Nodes fused together; ``kind`` is the max of their patterns."""

    __slots__ = ("nodes", "start", "kind")

    def __init__(self, node: Node, kind: OpPattern, start: int):
        self.nodes = [node]
        self.start = start
        self.kind = kind

    def accepts(self, kind: OpPattern) -> bool:
        """Elementwise and broadcast ops join any group; injective ops and a reduction join groups that
        hold neither an anchor nor a reduction."""
        return kind <= OpPattern.BROADCAST or (self.kind <= OpPattern.INJECTIVE and kind <= OpPattern.COMM_REDUCE)

    def add(self, node: Node, kind: OpPattern) -> None:
        self.nodes.append(node)
        self.kind = max(self.kind, kind)


def plan_groups(graph: Graph) -> list[list[Node]]:
    """Groups of two or more nodes to fuse, each in graph order."""
    counts = use_counts(graph)
    position = {node: i for i, node in enumerate(graph.nodes)}
    group_of: dict[Node, _Group] = {}
    groups: list[_Group] = []
    for index, node in enumerate(graph.nodes):
        kind = pattern_of(node)
        if kind is OpPattern.OPAQUE:
            continue
        target = None
        for value in node.inputs:
            group = group_of.get(value.producer) if value.producer is not None else None
            if group is None or counts.get(value, 0) != 1 or not group.accepts(kind):
                continue
            others = [v.producer for v in node.inputs
                      if v.producer is not None and group_of.get(v.producer) is not group]
            if all(position[p] < group.start for p in others):
                target = group
                break
        if target is not None:
            target.add(node, kind)
        else:
            target = _Group(node, kind, index)
            groups.append(target)
        group_of[node] = target
    return [g.nodes for g in groups if len(g.nodes) > 1]


_fused_ids = itertools.count()


def build_fused(members: list[Node], consts: dict, live_outside: set[Value]) -> tuple[Node, list[Value]]:
    """One ``fused`` node computing ``members`` (in order) with a standalone subgraph, and the
    values of the old graph its outputs replace."""
    outputs = [v for node in members for v in node.outputs if v in live_outside]
    subgraph, external = extract_subgraph(members, consts, outputs)
    names = tuple(n.display_name() for n in members)
    node = Node("fused", "fused", external, [(v.shape, v.dtype) for v in outputs],
                {"name": "+".join(names), "_ops": names, "_subgraph": subgraph}, None, members[0].scope)
    return node, outputs


def _compile_group(subgraph: Graph):
    """The group as one named, jitted sub-computation (built on first use)."""
    run = lower(subgraph)

    def fused(*args):
        return run(*args)

    fused.__name__ = f"fused_{next(_fused_ids)}"
    return jax.jit(fused)


@register_kind("fused")
def _evaluate_fused(node: Node, args: list) -> list:
    if inlining():
        return lower(node.attrs["_subgraph"])(*args)
    if node.impl is None:
        node.impl = _compile_group(node.attrs["_subgraph"])
    return list(node.impl(*args))


@register_pass("fuse", last=True)
def fuse(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    groups = plan_groups(graph)
    if not groups:
        return graph, {"groups": 0, "nodes_fused": 0}
    member_of = {node: i for i, group in enumerate(groups) for node in group}
    live_outside: set[Value] = set(graph.outputs)  # values read outside the group computing them
    for node in graph.nodes:
        for value in node.inputs:
            producer = value.producer
            if producer in member_of and member_of.get(node) != member_of[producer]:
                live_outside.add(value)
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        g = member_of.get(node)
        if g is None:
            rewriter.keep(node)
        elif node is groups[g][0]:  # a group is emitted where its first member was
            fused, replaced = build_fused(groups[g], graph.consts, live_outside)
            fused = rewriter.emit(fused.with_inputs([rewriter.value(v) for v in fused.inputs]))
            for old, new in zip(replaced, fused.outputs):
                rewriter.replace(old, new)
    fused_nodes = sum(len(g) for g in groups)
    return rewriter.finish(), {"groups": len(groups), "nodes_fused": fused_nodes,
                               "nodes_removed": fused_nodes - len(groups)}
