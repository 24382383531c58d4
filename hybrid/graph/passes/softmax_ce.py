"""Fused softmax cross-entropy: ``-pick(log_softmax(x), label)`` becomes one
``softmax_cross_entropy(x, label)`` node computing ``logsumexp(x) - x[label]``, which never writes the
log-probabilities (a tensor the size of the logits) to memory. ``log(softmax(x))`` is first rewritten
as ``log_softmax(x)``.

Fires only when each intermediate (probabilities, log-probabilities, picked values) has no other reader,
the axes agree and no temperature is applied.
"""
from __future__ import annotations

from ..target import Target
from ..ir import Graph, Node, Value
from ..rewrite import Rewriter, make_op_node, types_of, use_counts
from ._registry import register_pass


def _axis(node: Node) -> int:
    return node.attrs["axis"] % len(node.inputs[0].shape)


def _sole_producer(value: Value, counts: dict, op: str, kind: str = "op") -> Node | None:
    node = value.producer
    if node is None or node.op != op or node.kind != kind or counts.get(value, 0) != 1:
        return None
    return node


@register_pass("softmax_ce", requires=("recognize",))
def softmax_ce(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    counts = use_counts(graph)
    log_of_softmax: dict[Node, Node] = {}
    for node in graph.nodes:
        if node.kind == "prim" and node.op == "log":
            softmax = _sole_producer(node.inputs[0], counts, "softmax")
            if softmax is not None and softmax.attrs.get("temperature", 1.0) == 1.0:
                log_of_softmax[node] = softmax
    cross_entropy: dict[Node, tuple[Value, Value, int]] = {}
    for node in graph.nodes:
        if node.kind != "prim" or node.op != "neg":
            continue
        pick = _sole_producer(node.inputs[0], counts, "pick")
        if pick is None:
            continue
        log_prob = pick.inputs[0]
        source = _sole_producer(log_prob, counts, "log_softmax")
        if source is not None and source.attrs.get("temperature", 1.0) == 1.0 and _axis(source) == _axis(pick):
            cross_entropy[node] = (source.inputs[0], pick.inputs[1], _axis(pick))
            continue
        log = _sole_producer(log_prob, counts, "log", "prim")
        if log in log_of_softmax and _axis(log_of_softmax[log]) == _axis(pick):
            cross_entropy[node] = (log_of_softmax[log].inputs[0], pick.inputs[1], _axis(pick))
            del log_of_softmax[log]
    if not cross_entropy and not log_of_softmax:
        return graph, {"cross_entropies_fused": 0, "log_softmax_formed": 0}
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        if node in cross_entropy:
            logits, label, axis = cross_entropy[node]
            fused = rewriter.emit(make_op_node("softmax_cross_entropy", [rewriter.value(logits), rewriter.value(label)],
                                               node.scope, types_of(node.outputs[0]), axis=axis))
            rewriter.replace(node.outputs[0], fused.outputs[0])
        elif node in log_of_softmax:
            softmax = log_of_softmax[node]
            new = rewriter.emit(make_op_node("log_softmax", [rewriter.value(softmax.inputs[0])], node.scope,
                                             types_of(node.outputs[0]), axis=_axis(softmax), temperature=1.0))
            rewriter.replace(node.outputs[0], new.outputs[0])
        else:
            rewriter.keep(node)
    return rewriter.finish(), {"cross_entropies_fused": len(cross_entropy), "log_softmax_formed": len(log_of_softmax),
                               "nodes_removed": len(cross_entropy) + len(log_of_softmax)}
