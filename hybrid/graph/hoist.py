"""Hoisting of parameter-only work out of an inference graph.

Some nodes of an optimised inference graph read only parameters: BatchNorm folded into a conv's
weight, convolution weights moved to the layout the kernel reads. Their results change only when the
parameters do, so they can be computed once and reused across calls. :func:`split_parameter_work`
cuts such a graph in two: a *prepare* graph from the parameters to those results, and a *main* graph
that takes them as extra inputs.
"""
from __future__ import annotations

from dataclasses import dataclass

from .ir import Graph, Value
from .rewrite import Rewriter

# Nodes that only relabel data: hoisting them alone would buy nothing.
_FREE = frozenset({"reshape", "broadcast_in_dim", "squeeze", "expand_dims", "convert_element_type", "copy"})


@dataclass
class HoistedGraphs:
    """``prepare(*params) -> prepared``; ``main(*params, *prepared, *rest)`` equals the original graph
    with inputs ``(*params, *rest)``."""
    prepare: Graph
    main: Graph


def split_parameter_work(graph: Graph, n_params: int) -> HoistedGraphs | None:
    """Split off the nodes that read only the first ``n_params`` inputs (and constants), produce
    no more bytes than they read and have no effects; None if there are none, or if all of them
    only reshape or relabel their input."""
    params = graph.inputs[:n_params]
    static: set[Value] = set(params) | set(graph.consts)
    hoisted = []
    for node in graph.nodes:
        if node.effects or not node.outputs or not all(v in static for v in node.inputs):
            continue
        read = sum(v.nbytes for v in node.inputs if v not in graph.consts)
        if sum(v.nbytes for v in node.outputs) > read:
            continue  # e.g. a broadcast of a bias to an activation's shape: cheaper to recompute
        hoisted.append(node)
        static.update(node.outputs)
    if all(node.op in _FREE for node in hoisted):
        return None
    produced = {v for node in hoisted for v in node.outputs}
    hoisted_set = set(hoisted)
    boundary = list(dict.fromkeys(
        [v for node in graph.nodes if node not in hoisted_set for v in node.inputs if v in produced]
        + [v for v in graph.outputs if v in produced]))
    if not boundary:
        return None
    prepare = Rewriter(graph.copy_with(inputs=list(params), outputs=boundary))
    for node in hoisted:
        prepare.keep(node)
    main = Rewriter(graph)
    fresh = [Value(v.shape, v.dtype) for v in boundary]
    for old, new in zip(boundary, fresh):
        main.replace(old, new)
    for node in graph.nodes:
        if node not in hoisted_set:
            main.keep(node)
    main_graph = main.finish().copy_with(inputs=list(params) + fresh + graph.inputs[n_params:])
    return HoistedGraphs(prepare.finish(), main_graph)
