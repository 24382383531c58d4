"""Channels-last layout: convolutions, BatchNorm and pooling written for channels-first data (Gluon's
default NCHW) run on channels-last data (NHWC), the layout XLA:CPU's convolutions and most GPU
kernels use natively, so that XLA does not transpose the activations around every convolution.

Each channels-first op is rewritten as transpose -> channels-last op -> transpose back; convolution
weights get an explicit transpose to the kernel's layout (HWIO), which reads only parameters, so
inference graphs compute it once per parameter change (:mod:`hybrid.graph.hoist`). Transposes are then
pushed forward through elementwise operations, and a transpose meeting its inverse disappears, so a
conv-BN-ReLU-pool stack keeps one transpose at its entry and one where the data leaves it (e.g. before
a flatten).

Depthwise convolutions that run as shifted products (on XLA:CPU) stay channels-first, where those are
fastest. If the rewrite would leave more activation transposes than it converts convolutions (short
channels-last regions, e.g. alternating depthwise and pointwise convolutions), the graph is left as it was.
"""
from __future__ import annotations

import jax

from .. import layer_ops
from ..ir import Graph, Node, Value
from ..rewrite import Rewriter, make_op_node, types_of
from .fuse import pattern
from . import register_pass

_CHANNELS_FIRST = {"NCW": "NWC", "NCHW": "NHWC", "NCDHW": "NDHWC"}


def _to_last(ndim: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, ndim)) + (1,)


def _to_first(ndim: int) -> tuple[int, ...]:
    return (0, ndim - 1) + tuple(range(1, ndim - 1))


def transpose_node(value: Value, permutation: tuple[int, ...], scope: str) -> Node:
    shape = tuple(value.shape[i] for i in permutation)
    return Node("transpose", "prim", [value], [(shape, value.dtype)], {"permutation": tuple(permutation)},
                jax.lax.transpose_p, scope)


def _channels_last(node: Node) -> dict | None:
    """The attributes of ``node`` as a channels-last op, or None if it is not a channels-first op."""
    if node.kind != "op":
        return None
    attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
    layout = attrs.get("layout")
    if node.op == "convolution" and layout in _CHANNELS_FIRST:
        weight_layout = attrs.get("weight_layout") or "OI" + layout[2:]
        x, weight = node.inputs[0], node.inputs[1]
        if layer_ops.depthwise_runs_shifted(x.shape, weight.shape, attrs["groups"], layout, weight_layout):
            return None  # computed as shifted products, which are fastest channels-first
        return dict(attrs, layout=_CHANNELS_FIRST[layout], weight_layout=weight_layout)
    if node.op in ("pooling", "global_pooling") and layout in _CHANNELS_FIRST:
        return dict(attrs, layout=_CHANNELS_FIRST[layout])
    ndim = len(node.inputs[0].shape)
    if node.op == "batch_norm" and ndim >= 3 and attrs["axis"] % ndim == 1:
        return dict(attrs, axis=ndim - 1)
    return None


@register_pass("layout")
def channels_last(graph: Graph) -> tuple[Graph, dict]:
    rewriter = Rewriter(graph)
    converted = weight_moves = 0
    for node in graph.nodes:
        attrs = _channels_last(node)
        if attrs is None:
            rewriter.keep(node)
            continue
        inputs = [rewriter.value(v) for v in node.inputs]
        ndim = len(inputs[0].shape)
        if node.op == "convolution":  # weights to the kernel's own layout (HWIO); hoisted in inference
            target = attrs["layout"][1:-1] + "IO"
            perm = tuple(attrs["weight_layout"].index(c) for c in target)
            inputs[1] = rewriter.emit(transpose_node(inputs[1], perm, node.scope)).outputs[0]
            attrs["weight_layout"] = target
            weight_moves += 1
        entry = rewriter.emit(transpose_node(inputs[0], _to_last(ndim), node.scope))
        first_out = node.outputs[0]
        last_shape = tuple(first_out.shape[i] for i in _to_last(ndim))
        out_types = [(last_shape, first_out.dtype)] + types_of(*node.outputs[1:])
        new = rewriter.emit(make_op_node(node.op, [entry.outputs[0]] + inputs[1:], node.scope, out_types, **attrs))
        back = rewriter.emit(transpose_node(new.outputs[0], _to_first(ndim), node.scope))
        rewriter.replace(first_out, back.outputs[0])
        for old, value in zip(node.outputs[1:], new.outputs[1:]):
            rewriter.replace(old, value)
        converted += 1
    if not converted:
        return graph, {"ops_converted": 0}
    result, sunk = sink_transposes(rewriter.finish())
    from .dce import dead_code_elimination
    from .simplify import algebraic_simplification
    result, _ = algebraic_simplification(result)
    result, _ = dead_code_elimination(result)
    added = _transposes(result) - _transposes(graph) - weight_moves
    convolutions = sum(1 for n in graph.nodes if n.op == "convolution" and _channels_last(n) is not None)
    if added > max(convolutions, 1):
        # the channels-last regions are too short: transposing between them costs what they save
        return graph, {"ops_converted": 0, "transposes_needed": added, "convolutions": convolutions}
    return result, {"ops_converted": converted, "transposes_moved": sunk, "transposes_added": added}


def _transposes(graph: Graph) -> int:
    return sum(1 for n in graph.nodes if n.kind == "prim" and n.op == "transpose" and len(n.outputs[0].shape) >= 3)


def _is_scalar(value: Value, consts: dict) -> bool:
    return value in consts and value.shape == ()


def _shape_free(node: Node) -> bool:
    """Whether the node can run on inputs of another shape (no traced body fixes its shapes)."""
    return not any(key in node.attrs for key in ("call_jaxpr", "jaxpr", "shape"))


def sink_transposes(graph: Graph) -> tuple[Graph, int]:
    """Move transposes below elementwise nodes whose other inputs are scalars or the same transpose,
    so that a transpose and its inverse meet (and the simplify pass removes both)."""
    rewriter = Rewriter(graph)
    transposed: dict[Value, tuple[Value, tuple]] = {}  # value -> (source, permutation) of its transpose
    moved = 0
    for node in graph.nodes:
        inputs = [rewriter.value(v) for v in node.inputs]
        if node.kind == "prim" and node.op == "transpose":
            kept = rewriter.keep(node)
            transposed[kept.outputs[0]] = (kept.inputs[0], tuple(kept.attrs["permutation"]))
            continue
        sources = [transposed.get(v) for v in inputs]
        perms = {s[1] for s in sources if s is not None}
        if (pattern(node) == "elementwise" and _shape_free(node) and len(perms) == 1 and len(node.outputs) == 1
                and all(s is not None or _is_scalar(v, rewriter.consts) for s, v in zip(sources, inputs))):
            permutation = perms.pop()
            new_inputs = [s[0] if s is not None else v for s, v in zip(sources, inputs)]
            out = node.outputs[0]
            inverse = tuple(sorted(range(len(permutation)), key=permutation.__getitem__))
            shape = tuple(out.shape[i] for i in inverse)
            moved_node = Node(node.op, node.kind, new_inputs, [(shape, out.dtype)], node.attrs, node.impl,
                              node.scope, node.effects, node.ctx)
            rewriter.emit(moved_node)
            back = rewriter.emit(transpose_node(moved_node.outputs[0], permutation, node.scope))
            rewriter.replace(out, back.outputs[0])
            transposed[back.outputs[0]] = (moved_node.outputs[0], permutation)
            moved += 1
            continue
        rewriter.keep(node)
    return rewriter.finish(), moved
