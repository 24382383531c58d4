"""Helpers for writing passes: a rewriter that rebuilds a graph without mutating the old one,
builders for new big-op nodes, and queries on constants and uses.

Passes never edit Nodes in place (the graph before a pass stays intact for inspection): a node
whose inputs change is copied with :meth:`Node.with_inputs`, and a replaced value is recorded in
a substitution map that later nodes are read through.
"""
from __future__ import annotations

from typing import Any

import jax
import numpy as np

from . import ops
from .ir import Graph, Node, Value

__all__ = ["Rewriter", "make_op_node", "types_of", "const_value", "is_scalar_const", "use_counts", "positions",
           "extract_subgraph"]


class Rewriter:
    """Rebuilds ``graph`` node by node: ``keep`` (possibly re-wired), ``emit`` new nodes, ``replace`` values."""

    def __init__(self, graph: Graph):
        self.graph = graph
        self.nodes: list[Node] = []
        self.subst: dict[Value, Value] = {}
        self.consts = dict(graph.consts)

    def value(self, value: Value) -> Value:
        """The current stand-in for ``value`` (after replacements)."""
        seen = self.subst.get(value)
        while seen is not None:
            value = seen
            seen = self.subst.get(value)
        return value

    def keep(self, node: Node) -> Node:
        """Append ``node``, copying it if any of its inputs were replaced; returns the node used."""
        inputs = [self.value(v) for v in node.inputs]
        if all(a is b for a, b in zip(inputs, node.inputs)):
            self.nodes.append(node)
            return node
        copy = node.with_inputs(inputs)
        for old, new in zip(node.outputs, copy.outputs):
            self.subst[old] = new
        self.nodes.append(copy)
        return copy

    def emit(self, node: Node) -> Node:
        """Append a new node (its inputs must already be current values)."""
        self.nodes.append(node)
        return node

    def replace(self, old: Value, new: Value) -> None:
        """Every later read of ``old`` reads ``new`` instead (same shape and dtype)."""
        if old.shape != new.shape or str(old.dtype) != str(new.dtype):
            raise ValueError(f"cannot replace {old} by {new}: types differ")
        if old is not new:
            self.subst[old] = new

    def add_const(self, array: Any) -> Value:
        value = Value(np.shape(array), array.dtype)
        self.consts[value] = array
        return value

    def finish(self) -> Graph:
        """The rebuilt graph (unused constants are dropped)."""
        outputs = [self.value(v) for v in self.graph.outputs]
        used = {v for node in self.nodes for v in node.inputs} | set(outputs)
        consts = {v: a for v, a in self.consts.items() if v in used}
        return Graph(self.graph.inputs, outputs, self.nodes, consts)


def make_op_node(name: str, inputs: list[Value], scope: str = "", out_types: list[tuple] | None = None,
                 **attrs: Any) -> Node:
    """A big-op node ``name(*inputs, **attrs)``.

    ``out_types`` ((shape, dtype) per output) is computed by abstract evaluation when not given;
    passes that know the result types pass them to keep compile time low."""
    in_tree = jax.tree_util.tree_structure(tuple(range(len(inputs))))
    bound = ops._bind(name, attrs, in_tree)
    if out_types is None:
        specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in inputs]
        out = jax.eval_shape(bound.fn, *specs)
        out_types = [(o.shape, o.dtype) for o in jax.tree_util.tree_leaves(out)]
    node_attrs = dict(bound.attrs)
    node_attrs["_in_tree"] = in_tree
    return Node(name, "op", inputs, out_types, node_attrs, bound, scope)


def types_of(*values: Value) -> list[tuple]:
    """``(shape, dtype)`` of each value, the form ``make_op_node(out_types=...)`` takes."""
    return [(v.shape, v.dtype) for v in values]


def const_value(graph_consts: dict, value: Value) -> np.ndarray | None:
    """The NumPy value of a constant Value, or None when it is not a (NumPy-convertible) constant."""
    array = graph_consts.get(value)
    if array is None:
        return None
    try:
        return np.asarray(array)
    except Exception:  # e.g. PRNG key arrays
        return None


def is_scalar_const(graph_consts: dict, value: Value, target: float | None = None) -> bool:
    """True when ``value`` is a constant whose elements are all equal (to ``target`` if given)."""
    array = const_value(graph_consts, value)
    if array is None or array.size == 0:
        return False
    first = array.reshape(-1)[0]
    if not np.all(array == first):
        return False
    return target is None or bool(first == target)


def use_counts(graph: Graph) -> dict[Value, int]:
    """How many times each value is read by nodes or returned by the graph."""
    counts: dict[Value, int] = {}
    for node in graph.nodes:
        for value in node.inputs:
            counts[value] = counts.get(value, 0) + 1
    for value in graph.outputs:
        counts[value] = counts.get(value, 0) + 1
    return counts


def positions(graph: Graph) -> dict[Value, int]:
    """Index of the node defining each value (-1 for inputs and constants)."""
    where: dict[Value, int] = {v: -1 for v in graph.inputs}
    where.update({v: -1 for v in graph.consts})
    for index, node in enumerate(graph.nodes):
        for value in node.outputs:
            where[value] = index
    return where



def extract_subgraph(members: list[Node], consts: dict, outputs: list[Value]) -> tuple[Graph, list[Value]]:
    """``members`` (in order) copied into a standalone Graph returning the copies of ``outputs``, and the
    values of the old graph its inputs stand for (what the members read from outside them, constants
    excepted: those are copied into the subgraph)."""
    inside = {v for node in members for v in node.outputs}
    external: list[Value] = []
    mapping: dict[Value, Value] = {}
    sub_consts = {}
    for node in members:
        for value in node.inputs:
            if value in inside or value in mapping:
                continue
            fresh = mapping[value] = Value(value.shape, value.dtype, value.name)
            if value in consts:
                sub_consts[fresh] = consts[value]
            else:
                external.append(value)
    cloned = []
    for node in members:
        copy = node.with_inputs([mapping[v] for v in node.inputs])
        mapping.update(zip(node.outputs, copy.outputs))
        cloned.append(copy)
    return Graph([mapping[v] for v in external], [mapping[v] for v in outputs], cloned, sub_consts), external
