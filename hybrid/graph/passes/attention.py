"""Attention rewrite: ``softmax(q·k * scale) · v`` written with matmuls/einsums becomes one
``attention_general`` node that calls ``jax.nn.dot_product_attention`` (the fused cuDNN kernel on GPU,
XLA's implementation on CPU).

Matched: ``s = dot_general(q, k)`` contracting one head axis with any batch axes, an optional scalar
scaling (``s * c``, ``s / c`` or ``q * c``), a ``softmax`` over the key axis (a ``softmax`` node;
the ``recognize`` pass turns ``jax.nn.softmax`` into one), and ``dot_general`` of the probabilities with
``v`` (either operand order). Fires only when every intermediate has no other reader, each operand has
exactly one free axis, key and value lengths and head sizes agree, and all dtypes are equal. Masks and
biases are not matched (such code is left as written).
"""
from __future__ import annotations

from ..target import Target
from ..ir import Graph, Node, Value
from ..rewrite import Rewriter, const_value, is_scalar_const, make_op_node, types_of, use_counts
from ._registry import register_pass


def _single(counts: dict, value: Value) -> Node | None:
    return value.producer if value.producer is not None and counts.get(value, 0) == 1 else None


def _scalar(consts: dict, value: Value) -> float | None:
    array = const_value(consts, value)
    if array is None or not is_scalar_const(consts, value):
        return None
    return float(array.reshape(-1)[0])


def _free_axis(ndim: int, used: tuple[int, ...]) -> int | None:
    free = [i for i in range(ndim) if i not in used]
    return free[0] if len(free) == 1 else None


def _unscale(node: Node | None, consts: dict, counts: dict) -> tuple[Value | None, float]:
    """If ``node`` multiplies/divides by a scalar constant: (the other operand, factor)."""
    if node is None or node.kind != "prim" or node.op not in ("mul", "div"):
        return None, 1.0
    a, b = node.inputs
    factor = _scalar(consts, b)
    if factor is not None and factor != 0:
        return a, (factor if node.op == "mul" else 1.0 / factor)
    factor = _scalar(consts, a) if node.op == "mul" else None
    if factor is not None:
        return b, factor
    return None, 1.0


def match_attention(out_dot: Node, counts: dict, consts: dict) -> dict | None:
    """The ``attention_general`` inputs and attributes replacing ``out_dot``, or None."""
    if out_dot.kind != "prim" or out_dot.op != "dot_general":
        return None
    (lc, rc), (lb, rb) = out_dot.attrs["dimension_numbers"]
    for p_side in (0, 1):
        probs, v = out_dot.inputs[p_side], out_dot.inputs[1 - p_side]
        softmax = _single(counts, probs)
        if softmax is None or softmax.kind != "op" or softmax.op != "softmax" \
                or softmax.attrs.get("temperature", 1.0) != 1.0:
            continue
        scores = softmax.inputs[0]
        nb = len(scores.shape) - 2
        if nb < 1 or softmax.attrs["axis"] % len(scores.shape) != nb + 1:
            continue
        pc, vc = (lc, rc) if p_side == 0 else (rc, lc)
        pb, vb = (lb, rb) if p_side == 0 else (rb, lb)
        if tuple(pc) != (nb + 1,) or len(vc) != 1 or sorted(pb) != list(range(nb)) or len(v.shape) != nb + 2:
            continue
        v_free = _free_axis(nb + 2, tuple(vb) + tuple(vc))
        source = _single(counts, scores)
        inner, scale = _unscale(source, consts, counts)
        if inner is not None:
            source = _single(counts, inner)
        if source is None or source.kind != "prim" or source.op != "dot_general":
            continue
        (qc, kc), (qb, kb) = source.attrs["dimension_numbers"]
        q, k = source.inputs
        if len(qc) != 1 or len(q.shape) != nb + 2 or len(k.shape) != nb + 2:
            continue
        q_free, k_free = _free_axis(nb + 2, tuple(qb) + tuple(qc)), _free_axis(nb + 2, tuple(kb) + tuple(kc))
        if v_free is None or q_free is None or k_free is None:
            continue
        q_base, q_scale = _unscale(_single(counts, q), consts, counts)
        if q_base is not None:
            q, scale = q_base, scale * q_scale
        v_perm = tuple(vb[list(pb).index(j)] for j in range(nb)) + (vc[0], v_free)
        if k.shape[k_free] != v.shape[vc[0]] or q.shape[qc[0]] != v.shape[v_free]:
            continue
        if len({str(x.dtype) for x in (q, k, v, out_dot.outputs[0])}) != 1:
            continue
        tail = (nb, nb + 1) if p_side == 0 else (nb + 1, nb)
        return {"inputs": [q, k, v], "q_perm": tuple(qb) + (q_free, qc[0]), "k_perm": tuple(kb) + (k_free, kc[0]),
                "v_perm": v_perm, "out_perm": tuple(pb) + tail, "n_batch": nb, "scale": scale}
    return None


@register_pass("attention", requires=("recognize",))
def attention(graph: Graph, target: Target | None = None) -> tuple[Graph, dict]:
    counts = use_counts(graph)
    matches = {}
    for node in graph.nodes:
        match = match_attention(node, counts, graph.consts)
        if match is not None:
            matches[node] = match
    if not matches:
        return graph, {"attentions_rewritten": 0}
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        match = matches.get(node)
        if match is None:
            rewriter.keep(node)
            continue
        inputs = [rewriter.value(v) for v in match.pop("inputs")]
        fused = rewriter.emit(make_op_node("attention_general", inputs, node.scope, types_of(node.outputs[0]), **match))
        rewriter.replace(node.outputs[0], fused.outputs[0])
    return rewriter.finish(), {"attentions_rewritten": len(matches), "nodes_removed": len(matches)}
