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

from .. import ops
from ..ir import Graph, Node, Value
from ..rewrite import Rewriter, make_op_node, types_of
from ..target import Target
from ._registry import register_pass
from .dce import dce
from .simplify import simplify

_CHANNELS_FIRST = {"NCW": "NWC", "NCHW": "NHWC", "NCDHW": "NDHWC"}


def _to_last(ndim: int) -> tuple[int, ...]:
    return (0,) + tuple(range(2, ndim)) + (1,)


def _to_first(ndim: int) -> tuple[int, ...]:
    return (0, ndim - 1) + tuple(range(1, ndim - 1))


def transpose_node(value: Value, permutation: tuple[int, ...], scope: str) -> Node:
    shape = tuple(value.shape[i] for i in permutation)
    return Node("transpose", "prim", [value], [(shape, value.dtype)], {"permutation": tuple(permutation)},
                jax.lax.transpose_p, scope)


def _channels_last(node: Node, target: Target) -> dict | None:
    """The attributes of ``node`` as a channels-last op, or None if it is not a channels-first op (by its
    op's traits: a channels-first ``layout_attr``, or a ``channel_axis_attr`` of 1)."""
    if node.kind != "op":
        return None
    opdef = ops.get(node.op)
    attrs = {k: v for k, v in node.attrs.items() if not k.startswith("_")}
    if opdef.layout_attr is not None:
        layout = attrs.get(opdef.layout_attr)
        if layout not in _CHANNELS_FIRST:
            return None
        if opdef.keeps_layout is not None and opdef.keeps_layout(attrs, [v.shape for v in node.inputs], target):
            return None
        new = dict(attrs, **{opdef.layout_attr: _CHANNELS_FIRST[layout]})
        if opdef.weight_layout_attr is not None:
            new[opdef.weight_layout_attr] = attrs.get(opdef.weight_layout_attr) or "OI" + layout[2:]
        return new
    ndim = len(node.inputs[0].shape) if node.inputs else 0
    if opdef.channel_axis_attr is not None and ndim >= 3 and attrs[opdef.channel_axis_attr] % ndim == 1:
        return dict(attrs, **{opdef.channel_axis_attr: ndim - 1})
    return None


@register_pass("layout", requires=("bn_fold",))
def layout(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    target = target or Target.for_backend()
    rewriter = Rewriter(graph)
    converted = weight_moves = 0
    for node in graph.nodes:
        attrs = _channels_last(node, target)
        if attrs is None:
            rewriter.keep(node)
            continue
        inputs = [rewriter.value(v) for v in node.inputs]
        ndim = len(inputs[0].shape)
        opdef = ops.get(node.op)
        if opdef.weight_layout_attr is not None:  # weights to the kernel's own layout (HWIO); hoisted in inference
            kernel = attrs[opdef.layout_attr][1:-1] + "IO"
            perm = tuple(attrs[opdef.weight_layout_attr].index(c) for c in kernel)
            inputs[1] = rewriter.emit(transpose_node(inputs[1], perm, node.scope)).outputs[0]
            attrs[opdef.weight_layout_attr] = kernel
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
    result, _ = dce(simplify(result)[0])  # to count the transposes that remain
    added = _transposes(result) - _transposes(graph) - weight_moves
    convolutions = sum(1 for n in graph.nodes if n.kind == "op" and ops.get(n.op).weight_layout_attr is not None
                       and _channels_last(n, target) is not None)
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
        if (ops.pattern_of(node) is ops.OpPattern.ELEMENTWISE and _shape_free(node) and len(perms) == 1
                and len(node.outputs) == 1
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
