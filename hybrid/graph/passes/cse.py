"""Common-subexpression elimination: a node computing the same op on the same inputs with the same
attributes as an earlier node is dropped and its outputs read from the earlier one. Small constants with
equal values are merged too. Nodes with side effects are never merged."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..target import Target
from ..ir import Graph
from ..rewrite import Rewriter, const_value
from ._registry import register_pass

_SMALL_CONST = 64


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((k, _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    return value


def node_key(node, inputs) -> tuple | None:
    """A hashable identity of what ``node`` computes, or None if its attributes are not hashable."""
    key = (node.kind, node.op, tuple(id(v) for v in inputs), _freeze(node.attrs))
    try:
        hash(key)
    except TypeError:
        return None
    return key


@register_pass("cse")
def cse(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    rewriter = Rewriter(graph)
    merged_consts = 0
    by_content: dict[tuple, Any] = {}
    for value in graph.consts:
        array = const_value(graph.consts, value)
        if array is None or array.size > _SMALL_CONST:
            continue
        content = (array.dtype.str, array.shape, array.tobytes())
        if content in by_content:
            rewriter.replace(value, by_content[content])
            merged_consts += 1
        else:
            by_content[content] = value
    seen: dict[tuple, Any] = {}
    removed = bytes_saved = 0
    for node in graph.nodes:
        inputs = [rewriter.value(v) for v in node.inputs]
        key = None if node.effects else node_key(node, inputs)
        previous = seen.get(key) if key is not None else None
        if previous is not None:
            for old, new in zip(node.outputs, previous.outputs):
                rewriter.replace(old, new)
            removed += 1
            bytes_saved += sum(v.nbytes for v in node.outputs)
            continue
        kept = rewriter.keep(node)
        if key is not None:
            seen[key] = kept
    return rewriter.finish(), {"nodes_removed": removed, "consts_merged": merged_consts, "bytes_saved": bytes_saved}
