"""Constant folding: a node whose inputs are all constants is evaluated once at compile time and
replaced by its result, unless the result would be much larger than its inputs (broadcasts of
scalars stay in the graph, where XLA materialises them lazily)."""
from __future__ import annotations

import math

import jax
import numpy as np

from ..target import Target
from ..ir import Graph
from .._lower import evaluate_node
from ..rewrite import Rewriter
from ._registry import register_pass

_SMALL = 4096  # elements: results up to this size are always folded


def _numeric(dtype) -> bool:
    try:
        np.dtype(dtype)
        return True
    except TypeError:
        return False


@register_pass("fold")
def fold(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    rewriter = Rewriter(graph)
    folded = 0
    for node in graph.nodes:
        inputs = [rewriter.value(v) for v in node.inputs]
        foldable = (not node.effects and node.kind in ("prim", "op")
                    and all(v in rewriter.consts for v in inputs)
                    and all(_numeric(v.dtype) for v in node.outputs))
        if foldable:
            out_size = sum(math.prod(v.shape) for v in node.outputs)
            in_size = max((math.prod(v.shape) for v in inputs), default=0)
            foldable = out_size <= max(_SMALL, in_size)
        if not foldable:
            rewriter.keep(node)
            continue
        with jax.ensure_compile_time_eval():
            results = evaluate_node(node, [rewriter.consts[v] for v in inputs])
        for old, result in zip(node.outputs, results):
            rewriter.replace(old, rewriter.add_const(np.asarray(result)))
        folded += 1
    return rewriter.finish(), {"nodes_folded": folded, "nodes_removed": folded}
