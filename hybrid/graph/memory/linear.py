"""The training-time view of a forward graph that rematerialisation plans on.

A forward graph's values fall in two classes:

- *weight-only* values, computed from parameters and constants alone (kernels transposed to another
  layout, weights cast to a lower precision): cheap, and recomputed wherever they are needed;
- *activations*, which depend on the batch (or on a random key).

The nodes computing activations, in graph order, are the *linear order* that a plan cuts into
segments. For each of them :class:`Linearised` knows what its backward keeps (the residuals
``jax.vjp`` saves: some of its inputs and outputs, and new arrays) and what it costs to compute.
:func:`peak_bytes` simulates a training step under a plan and returns its peak of live bytes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import jax
import numpy as np

from ..ir import Graph, Node, Value
from .._lower import evaluate_node

__all__ = ["Linearised", "NodeCost", "Segment", "peak_bytes"]


@dataclass(frozen=True)
class NodeCost:
    """What one node's backward keeps and what the node costs.

    ``keeps``: positions in ``inputs + outputs`` of the values its VJP saves; ``new_bytes``: bytes of
    the other arrays it saves; ``flops``: floating-point operations of its forward (matrix products and
    convolutions counted as multiply-adds, other operations as one per output element)."""

    keeps: tuple[int, ...]
    new_bytes: int
    flops: float


@dataclass(frozen=True)
class Segment:
    """Positions ``[start, stop)`` of the linear order; ``recompute``: the segment keeps only its inputs
    in the forward pass and runs again before its backward."""

    start: int
    stop: int
    recompute: bool


def _nbytes(value: Value) -> int:
    return value.nbytes


def _inexact(value: Value) -> bool:
    try:
        return np.issubdtype(np.dtype(value.dtype), np.inexact)
    except TypeError:
        return False


def _node_key(node: Node) -> Any:
    """What determines a node's computation: its op, attributes, input types and any nested graph."""
    attrs = tuple(sorted((k, repr(v)) for k, v in node.attrs.items() if not k.startswith("_")))
    sub = node.attrs.get("_subgraph")
    inner = tuple(map(_node_key, sub.nodes)) if sub is not None else ()
    return (node.kind, node.op, attrs, inner, tuple((v.shape, str(v.dtype)) for v in node.inputs))


def _flops(jaxpr: Any) -> float:
    """Forward floating-point work of a jaxpr, nested calls included."""
    total = 0.0
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        out = sum(math.prod(v.aval.shape) for v in eqn.outvars if hasattr(v.aval, "shape"))
        if name == "dot_general":
            (contract, _), _ = eqn.params["dimension_numbers"]
            lhs = eqn.invars[0].aval.shape
            total += 2.0 * out * math.prod(lhs[d] for d in contract)
        elif name == "conv_general_dilated":
            rhs = eqn.invars[1].aval.shape
            spec = eqn.params["dimension_numbers"].rhs_spec  # (out feature, in feature, *spatial)
            window = math.prod(rhs[d] for d in spec[2:])
            total += 2.0 * out * rhs[spec[1]] * window
        else:
            inner = [p for p in eqn.params.values() if hasattr(p, "eqns") or hasattr(p, "jaxpr")]
            if inner:
                for sub in inner:
                    total += _flops(getattr(sub, "jaxpr", sub))
            else:
                total += out
    return total


_PROBED: dict[Any, NodeCost] = {}


def _cost(node: Node) -> NodeCost:
    """The residuals and flops of ``node``, cached by :func:`_node_key`."""
    key = _node_key(node)
    cost = _PROBED.get(key)
    if cost is None:
        if len(_PROBED) > 4096:
            _PROBED.clear()
        cost = _PROBED[key] = _probe(node)
    return cost


def _probe(node: Node) -> NodeCost:
    specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in node.inputs]
    n_in = len(specs)
    found: dict = {}

    def forward(*args):
        return evaluate_node(node, list(args))

    def probe(*args):
        diff = [i for i, a in enumerate(args) if np.issubdtype(a.dtype, np.inexact)]

        def partial(*diffs):
            full = list(args)
            for i, d in zip(diff, diffs):
                full[i] = d
            return forward(*full)

        outs, vjp_fn = jax.vjp(partial, *[args[i] for i in diff])
        keeps, new = set(), 0
        for leaf in jax.tree_util.tree_leaves(vjp_fn):
            position = next((i for i, a in enumerate(args) if leaf is a), None)
            if position is None:
                position = next((n_in + j for j, o in enumerate(outs) if leaf is o), None)
            if position is None:
                new += int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
            else:
                keeps.add(position)
        found.update(keeps=tuple(sorted(keeps)), new=new)
        return outs

    try:
        jax.make_jaxpr(probe)(*specs)
        flops = _flops(jax.make_jaxpr(forward)(*specs).jaxpr)
    except Exception:  # not differentiable as traced: assume it keeps its inputs
        return NodeCost(tuple(range(n_in)), 0, float(sum(v.nbytes for v in node.outputs)))
    return NodeCost(found["keeps"], found["new"], flops)


class Linearised:
    """A forward graph seen as a sequence of activation nodes.

    ``weights``: the graph inputs that stay alive for the whole step anyway (parameters); the other
    inputs are activations (the batch, random keys). Attributes:

    - ``order``: the activation nodes in graph order; ``position[node]`` its index;
    - ``weight_nodes``: the nodes computing weight-only values;
    - ``costs[i]``: the :class:`NodeCost` of ``order[i]``;
    - ``cut_bytes[p]``: bytes of activations computed before position ``p`` and read at or after it
      (a segment starting at ``p`` keeps them), for ``p`` in ``0..len(order)``;
    - ``held_bytes[i]``: bytes of residuals attributed to ``order[i]``: its new arrays plus the outputs
      some node keeps (each value counted once, at its producer).
    """

    def __init__(self, graph: Graph, weights: Iterable[Value]):
        self.graph = graph
        weights = set(weights) | set(graph.consts)
        activation: set[Value] = set(v for v in graph.inputs if v not in weights)
        self.order: list[Node] = []
        self.weight_nodes: set[Node] = set()
        for node in graph.nodes:
            if any(v in activation for v in node.inputs) or not node.inputs and node.effects:
                activation.update(node.outputs)
                self.order.append(node)
            else:
                self.weight_nodes.add(node)
        self.position = {node: i for i, node in enumerate(self.order)}
        self.costs = [_cost(node) for node in self.order]
        n = len(self.order)
        self.outputs = set(graph.outputs)
        # readers[v]: positions of the activation nodes reading v; holders[v]: positions of nodes keeping v
        self.readers: dict[Value, list[int]] = {}
        self.holders: dict[Value, list[int]] = {}
        for i, (node, cost) in enumerate(zip(self.order, self.costs)):
            for value in node.inputs:
                self.readers.setdefault(value, []).append(i)
            both = node.inputs + node.outputs
            for k in cost.keeps:
                self.holders.setdefault(both[k], []).append(i)
        self.produced = [v for node in self.order for v in node.outputs]
        cut = np.zeros(n + 2, np.int64)
        for value in self.produced:
            p = self.position[value.producer]
            last = n if value in self.outputs else max(self.readers.get(value, [p]))
            if last > p:  # live across the cuts p+1 .. last
                cut[p + 1] += value.nbytes
                cut[last + 1] -= value.nbytes
        self.cut_bytes = np.cumsum(cut)[:n + 1]
        held = np.array([cost.new_bytes for cost in self.costs], np.int64)
        for value in self.produced:
            if value in self.holders:
                held[self.position[value.producer]] += value.nbytes
        for value, positions in self.holders.items():  # weight-only values a node keeps
            if value.producer in self.weight_nodes:
                held[min(positions)] += value.nbytes
        self.held_bytes = held
        self.flops = np.array([cost.flops for cost in self.costs], np.float64)
        self.recomputable = np.array([not node.effects for node in self.order], bool)

    def __len__(self) -> int:
        return len(self.order)

    def segment_inputs(self, start: int, stop: int) -> list[Value]:
        """The activations and weight-only values a segment reads from outside itself."""
        inside = set(self.order[start:stop])
        seen, result = set(), []
        for node in self.order[start:stop]:
            for value in node.inputs:
                if value.producer not in inside and value not in seen:
                    seen.add(value)
                    result.append(value)
        return result

    def live_after(self, start: int, stop: int) -> list[Value]:
        """The values computed in ``[start, stop)`` that later nodes or the graph's outputs read."""
        result = []
        for node in self.order[start:stop]:
            for value in node.outputs:
                if value in self.outputs or max(self.readers.get(value, [-1])) >= stop:
                    result.append(value)
        return result


def peak_bytes(lin: Linearised, plan: Sequence[Segment]) -> int:
    """Peak live bytes of activations, residuals and activation gradients over one training step
    under ``plan`` (segments covering the linear order), by simulation.

    Step ``i`` (``0 <= i < n``) runs node ``i`` forward, step ``2n - 1 - i`` runs its backward; a
    recomputed segment ``[a, b)`` runs again at step ``2n - b``. A value lives from its computation to
    its last use: forward readers; the backward of the nodes keeping it in its own segment; for a
    segment that reads it from outside, that segment's recomputation (kept until its backward ends)
    or the backward of its keepers there. A node's new residuals live until its backward; the gradient
    of an activation from the backward of its last reader to that of its producer.
    """
    n = len(lin)
    seg_of = np.empty(n, np.int64)
    for index, segment in enumerate(plan):
        seg_of[segment.start:segment.stop] = index
    total = 2 * n
    diff = np.zeros(total + 2, np.int64)

    def live(start: int, end: int, size: int) -> None:
        if size and end >= start:
            diff[start] += size
            diff[end + 1] -= size

    back = lambda i: total - 1 - i  # noqa: E731
    rec_time = [total - s.stop for s in plan]
    for value in lin.produced:
        size = value.nbytes
        p = lin.position[value.producer]
        own = seg_of[p]
        readers = lin.readers.get(value, [])
        end = n if value in lin.outputs else max(readers, default=p)
        holders = lin.holders.get(value, [])
        own_holders = [h for h in holders if seg_of[h] == own]
        recomputed = plan[own].recompute
        if own_holders:
            if recomputed:
                live(rec_time[own], back(min(own_holders)), size)
            else:
                end = max(end, back(min(own_holders)))
        for s in {seg_of[r] for r in readers} - {own}:
            if plan[s].recompute:
                end = max(end, back(plan[s].start))
            else:
                outside = [h for h in holders if seg_of[h] == s]
                if outside:
                    end = max(end, back(min(outside)))
        live(p, end, size)
        if _inexact(value):
            last = n - 1 if value in lin.outputs else max(readers, default=p)
            live(back(last), back(p), size)
    for i, cost in enumerate(lin.costs):
        s = seg_of[i]
        live(rec_time[s] if plan[s].recompute else i, back(i), cost.new_bytes)
    for value, holders in lin.holders.items():  # weight-only values kept by a node
        if value.producer is None or value.producer not in lin.weight_nodes:
            continue
        for s in {seg_of[h] for h in holders}:
            mine = [h for h in holders if seg_of[h] == s]
            live(rec_time[s] if plan[s].recompute else min(mine), back(min(mine)), value.nbytes)
    return int(np.cumsum(diff).max())
