"""BatchNorm folding for inference: ``batch_norm(conv(x, w, b))`` with running statistics becomes
``conv(x, w', b')`` where ``w' = w * s`` per output channel, ``b' = (b - mean) * s + beta`` and
``s = gamma / sqrt(var + eps)``.

In the ops' traits (:class:`hybrid.graph.ops.OpDef`): the normalisation is an op that is
``affine_in_inference``; the producer is ``scale_foldable`` (its weight, input 1, leads with the output
channel, as conv kernels and dense weights do); both declare a ``channel_axis``, which must agree.
Parameters are graph inputs, so ``w'`` and ``b'`` are computed in the
graph by one small ``batch_norm_fold`` node (O(parameters) work instead of a pass over the activations).

Fires only when: the BatchNorm uses running statistics (``training=False``), its input is produced by a
scale-foldable op (``convolution``, ``dense``) whose output has no other reader, and it normalises that
op's output channel axis.

Declines when the weight is over half the size of the output (deep convolutions at small batches):
where the folded weight is recomputed at every call (inside ``hybrid.compile`` programs; hybridized
inference computes it once per parameter change, see :mod:`hybrid.graph.hoist`), that read and write
of the weight costs more than the pass over the activations it spares (ResNet-18 at batch 16 measured
8% slower with all its BatchNorms folded).
"""
from __future__ import annotations

from .. import ops
from ..ir import Graph, Node
from ..rewrite import Rewriter, make_op_node, types_of, use_counts
from ..target import Target
from ._registry import register_pass


def channel_axis(node: Node) -> int | None:
    """The axis of ``node``'s first output holding channels, by its op's trait, or None."""
    if node.kind != "op":
        return None
    axis_of = ops.get(node.op).channel_axis
    return None if axis_of is None else axis_of(node.attrs, node.outputs[0].shape)


def foldable(bn: Node, counts: dict) -> bool:
    """Whether ``bn`` can be folded into its producer (see module docstring)."""
    if bn.kind != "op" or not ops.get(bn.op).affine_in_inference or bn.attrs.get("training"):
        return False
    source = bn.inputs[0]
    producer = source.producer
    if producer is None or producer.kind != "op" or not ops.get(producer.op).scale_foldable:
        return False
    if counts.get(source, 0) != 1:
        return False
    axis = channel_axis(producer)
    if axis is None or channel_axis(bn) != axis:
        return False
    return 2 * producer.inputs[1].nbytes <= source.nbytes


@register_pass("bn_fold")
def bn_fold(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    counts = use_counts(graph)
    folds = [bn for bn in graph.nodes if foldable(bn, counts)]
    if not folds:
        return graph, {"batch_norms_folded": 0}
    producers = {bn.inputs[0].producer for bn in folds}
    rewriter = Rewriter(graph)
    bytes_saved = 0
    for node in graph.nodes:
        if node in producers:
            continue  # its only reader is the BatchNorm, which is rebuilt below
        if node not in folds:
            rewriter.keep(node)
            continue
        producer = node.inputs[0].producer
        assert producer is not None  # foldable: a conv or dense op computes the input
        x, weight, *rest = [rewriter.value(v) for v in producer.inputs]
        bias = rest[0] if rest else None
        gamma, beta, mean, var = (rewriter.value(v) for v in node.inputs[1:])
        fold_inputs = [weight, gamma, beta, mean, var] + ([bias] if bias is not None else [])
        bias_type = ((weight.shape[0],), weight.dtype)
        fold = rewriter.emit(make_op_node("batch_norm_fold", fold_inputs, node.scope,
                                          types_of(weight) + [bias_type], eps=node.attrs["eps"], out_axis=0))
        attrs = {k: v for k, v in producer.attrs.items() if not k.startswith("_")}
        fused = rewriter.emit(make_op_node(producer.op, [x, fold.outputs[0], fold.outputs[1]], producer.scope,
                                           types_of(producer.outputs[0]), **attrs))
        rewriter.replace(node.outputs[0], fused.outputs[0])
        bytes_saved += node.outputs[0].nbytes
    return rewriter.finish(), {"batch_norms_folded": len(folds), "bytes_saved": bytes_saved}
