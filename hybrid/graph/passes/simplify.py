"""Algebraic simplification: identities that leave values and derivatives unchanged.

``x*1``, ``1*x``, ``x/1``, ``x+0``, ``0+x``, ``x-0``, ``-(-x)``, converts to the same dtype, reshapes and
broadcasts to the same shape, identity transposes, ``select(p, a, a)``, reductions over no axes;
``transpose(transpose(x))`` and ``reshape(reshape(x))`` become one op. ``stop_gradient`` is never removed: the
graph is differentiated after the passes.
"""
from __future__ import annotations


from ..target import Target
from ..ir import Graph, Node, Value
from ..rewrite import Rewriter, is_scalar_const
from ._registry import register_pass

_IDENTITY_RIGHT = {"mul": 1, "div": 1, "add": 0, "sub": 0}
_IDENTITY_LEFT = {"mul": 1, "add": 0}


def _same_type(a: Value, b: Value) -> bool:
    return a.shape == b.shape and str(a.dtype) == str(b.dtype)


def _identity_of(node: Node, inputs: list[Value], consts: dict) -> Value | None:
    """The input ``node`` passes through unchanged, if it is an identity."""
    if node.kind != "prim" or len(node.outputs) != 1:
        return None
    op, out = node.op, node.outputs[0]
    if op in _IDENTITY_RIGHT and is_scalar_const(consts, inputs[1], _IDENTITY_RIGHT[op]) \
            and _same_type(inputs[0], out):
        return inputs[0]
    if op in _IDENTITY_LEFT and is_scalar_const(consts, inputs[0], _IDENTITY_LEFT[op]) \
            and _same_type(inputs[1], out):
        return inputs[1]
    # same rank and shape forces broadcast_dimensions to be the identity
    if op in ("convert_element_type", "reshape", "broadcast_in_dim", "copy", "copy_p") \
            and _same_type(inputs[0], out) and not node.attrs.get("sharding"):
        return inputs[0]
    if op == "transpose" and tuple(node.attrs["permutation"]) == tuple(range(len(out.shape))):
        return inputs[0]
    if op in ("reduce_sum", "reduce_max", "reduce_min", "reduce_prod") and tuple(node.attrs["axes"]) == () \
            and _same_type(inputs[0], out):
        return inputs[0]
    if op == "select_n" and len(inputs) > 2 and all(v is inputs[1] for v in inputs[2:]):
        return inputs[1]
    if op == "neg" and inputs[0].producer is not None and inputs[0].producer.op == "neg" \
            and inputs[0].producer.kind == "prim":
        return inputs[0].producer.inputs[0]
    return None


def _merged(node: Node, inputs: list[Value]) -> Node | None:
    """``transpose(transpose(x))`` / ``reshape(reshape(x))`` as one node reading ``x``."""
    inner = inputs[0].producer if inputs else None
    if node.kind != "prim" or inner is None or inner.kind != "prim" or inner.op != node.op:
        return None
    if node.op == "transpose":
        outer_perm, inner_perm = node.attrs["permutation"], inner.attrs["permutation"]
        attrs = dict(node.attrs, permutation=tuple(inner_perm[i] for i in outer_perm))
        return node.with_inputs([inner.inputs[0]], attrs)
    if node.op == "reshape" and node.attrs.get("dimensions") is None and inner.attrs.get("dimensions") is None:
        return node.with_inputs([inner.inputs[0]])
    return None


@register_pass("simplify")
def simplify(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    rewriter = Rewriter(graph)
    removed = merged = 0
    for node in graph.nodes:
        inputs = [rewriter.value(v) for v in node.inputs]
        same = _identity_of(node, inputs, rewriter.consts)
        if same is not None:
            rewriter.replace(node.outputs[0], same)
            removed += 1
            continue
        combined = _merged(node, inputs)
        if combined is not None:
            identity = _identity_of(combined, combined.inputs, rewriter.consts)
            if identity is not None:
                rewriter.replace(node.outputs[0], identity)
            else:
                rewriter.emit(combined)
                rewriter.replace(node.outputs[0], combined.outputs[0])
            merged += 1
            continue
        rewriter.keep(node)
    return rewriter.finish(), {"nodes_removed": removed, "nodes_merged": merged}
