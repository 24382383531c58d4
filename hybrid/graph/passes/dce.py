"""Dead-code elimination: drop nodes and constants no output depends on.

Nodes with side effects (e.g. ``jax.debug.print``) are always kept.
"""
from __future__ import annotations

from ..ir import Graph
from ..target import Target
from ._registry import register_pass


@register_pass("dce")
def dce(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    live = set(graph.outputs)
    kept = []
    for node in reversed(graph.nodes):
        if node.effects or any(value in live for value in node.outputs):
            kept.append(node)
            live.update(node.inputs)
    kept.reverse()
    consts = {value: array for value, array in graph.consts.items() if value in live}
    removed = len(graph.nodes) - len(kept)
    kept_set = set(kept)
    bytes_saved = sum(v.nbytes for n in graph.nodes if n not in kept_set for v in n.outputs)
    return graph.copy_with(nodes=kept, consts=consts), {
        "nodes_removed": removed,
        "consts_removed": len(graph.consts) - len(consts),
        "bytes_saved": bytes_saved,
    }
