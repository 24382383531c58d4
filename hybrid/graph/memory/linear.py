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

import bisect
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
    in the forward pass and runs again before its backward; ``inner``: how that recomputation is itself
    cut into segments (covering ``[start, stop)``; empty: one segment, not recomputed again)."""

    start: int
    stop: int
    recompute: bool
    inner: tuple["Segment", ...] = ()


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
            total += 2.0 * out * rhs[spec[1]] * math.prod(rhs[d] for d in spec[2:])
        else:
            inner = [p for p in eqn.params.values() if hasattr(p, "eqns") or hasattr(p, "jaxpr")]
            for sub in inner:
                total += _flops(getattr(sub, "jaxpr", sub))
            if not inner:
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
    """Trace ``jax.vjp`` of the node alone on abstract inputs and sort what it saves."""
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
        keeps, new, large = set(), 0, False
        biggest = max((int(np.prod(o.shape)) for o in outs), default=0)
        for leaf in jax.tree_util.tree_leaves(vjp_fn):
            position = next((i for i, a in enumerate(args) if leaf is a), None)
            if position is None:
                position = next((n_in + j for j, o in enumerate(outs) if leaf is o), None)
            if position is not None:
                keeps.add(position)
            elif 2 * int(np.prod(leaf.shape)) >= biggest:
                large = True
            else:
                new += int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize
        # Arrays as large as the output that the backward keeps are elementwise functions of the op's
        # inputs or outputs (a normalised input, an activation's derivative), which XLA fuses into the
        # backward instead of storing: the op keeps an input it already keeps, else its output.
        if large and not any(p < n_in and args[p].ndim for p in keeps):
            keeps.add(n_in)
        found.update(keeps=tuple(sorted(keeps)), new=new)
        return outs

    try:
        flops = _flops(jax.make_jaxpr(forward)(*specs).jaxpr)
        jax.make_jaxpr(probe)(*specs)
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
        self.weights = set(weights)
        weights = self.weights | set(graph.consts)
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
            assert value.producer is not None  # an output of a node of order
            p = self.position[value.producer]
            last = n if value in self.outputs else max(self.readers.get(value, [p]))
            if last > p:  # live across the cuts p+1 .. last
                cut[p + 1] += value.nbytes
                cut[last + 1] -= value.nbytes
        self.cut_bytes = np.cumsum(cut)[:n + 1]
        held = np.array([cost.new_bytes for cost in self.costs], np.int64)
        for value in self.produced:
            if value in self.holders:
                assert value.producer is not None
                held[self.position[value.producer]] += value.nbytes
        for value, positions in self.holders.items():  # weight-only values a node keeps
            if value.producer in self.weight_nodes:
                held[min(positions)] += value.nbytes
        self.held_bytes = held
        self.flops = np.array([cost.flops for cost in self.costs], np.float64)
        # the backward of an operation doing more than elementwise work (a matrix product, a convolution,
        # a normalisation) holds its activation inputs, its output's gradient and the gradients it makes
        # (in other layouts too, on XLA:CPU) for the time it runs
        self.backward_bytes = np.zeros(n, np.int64)
        for i, (node, cost) in enumerate(zip(self.order, self.costs)):
            if cost.flops > 2 * sum(math.prod(v.shape) for v in node.outputs):
                inputs = sum(v.nbytes for v in node.inputs if v in activation)
                self.backward_bytes[i] = inputs + sum(v.nbytes for v in node.outputs)
        self.recomputable = np.array([not node.effects for node in self.order], bool)
        # each floating-point weight's gradient appears at the backward of the last node reading it
        # (directly or through weight-only work) and is kept to the end of the step
        last_reader: dict[Value, int] = {}
        for i, node in enumerate(self.order):
            stack = list(node.inputs)
            while stack:
                value = stack.pop()
                if value in self.weights:
                    last_reader[value] = i
                elif value.producer in self.weight_nodes:
                    stack.extend(value.producer.inputs)
        self.gradients = [(i, value.nbytes) for value, i in last_reader.items() if _inexact(value)]

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
    """Peak live bytes of activations, residuals and gradients over one training step
    under ``plan`` (segments covering the linear order, each possibly with an inner plan), by simulation.

    Step ``i`` (``0 <= i < n``) runs node ``i`` forward, step ``2n - 1 - i`` runs its backward; a
    recomputed segment ``[a, b)`` runs again at step ``2n - b`` (its inner segments then keep only their
    inputs, and run a third time at their own step); values a recomputation makes and nothing keeps are
    freed as it goes and not counted. A value lives from its computation to its last use:
    forward readers; the backward of the nodes keeping it in its own segment; for a segment that reads it
    from outside, that segment's recomputation (kept until its backward ends) or the backward of its
    keepers there. A node's new residuals live from its last computation until its backward; the gradient
    of an activation from the backward of its last reader to that of its producer, the gradient of a
    weight from the backward of its last reader to the end.
    """
    n = len(lin)
    total = 2 * n
    diff = np.zeros(total + 2, np.int64)

    def live(start: int, end: int, size: int) -> None:
        if size and end >= start:
            diff[start] += size
            diff[end + 1] -= size

    def back(i: int) -> int:
        return total - 1 - i

    def children(segment: Segment) -> Sequence[Segment]:
        return segment.inner or (Segment(segment.start, segment.stop, False),)

    def copy(level: Sequence[Segment], p: int, made: int, end: int | None, uses: list[int], holders: list[int],
             size: int) -> None:
        """The copy of a value made at step ``made`` in ``level`` (segments covering the enclosing range),
        live until ``end`` at least; a copy made by a recomputation that nothing keeps (``end`` None) is
        transient: the recomputation frees it as it goes, and it is not counted."""
        starts = [s.start for s in level]
        own = level[bisect.bisect_right(starts, p) - 1]
        for segment in {level[bisect.bisect_right(starts, u) - 1] for u in uses}:
            kept = [h for h in holders if segment.start <= h < segment.stop]
            if segment is own:
                if own.recompute and kept:
                    inside = [u for u in uses if own.start <= u < own.stop]
                    copy(children(own), p, total - own.stop, None, inside, kept, size)
                elif kept:
                    end = max(end or made, back(min(kept)))
            elif segment.recompute:
                end = max(end or made, back(segment.start))
            elif kept:
                end = max(end or made, back(min(kept)))
        if end is not None:
            live(made, end, size)

    def made_last(i: int) -> int:
        """The step of node ``i``'s last forward computation (in the innermost recomputed segment)."""
        step, level = i, plan
        while True:
            segment = level[bisect.bisect_right([s.start for s in level], i) - 1]
            if not segment.recompute:
                return step
            step, level = total - segment.stop, children(segment)

    for value in lin.produced:
        size = value.nbytes
        assert value.producer is not None  # an output of a node of lin.order
        p = lin.position[value.producer]
        readers = lin.readers.get(value, [])
        holders = lin.holders.get(value, [])
        end = n if value in lin.outputs else max(readers, default=p)
        copy(plan, p, p, end, sorted(set(readers) | set(holders)), holders, size)
        if _inexact(value):
            last = n - 1 if value in lin.outputs else max(readers, default=p)
            live(back(last), back(p), size)
    for i, cost in enumerate(lin.costs):
        live(made_last(i), back(i), cost.new_bytes)
        live(back(i), back(i), int(lin.backward_bytes[i]))
    for i, size in lin.gradients:
        live(back(i), total - 1, size)
    for value, holders in lin.holders.items():  # weight-only values kept by a node, made where needed
        if value.producer is None or value.producer not in lin.weight_nodes:
            continue
        made: dict[int, int] = {}
        for h in holders:
            step = made_last(h)
            made[step] = min(made.get(step, h), h)
        for step, first in made.items():
            live(step, back(first), value.nbytes)
    return int(np.cumsum(diff).max())
