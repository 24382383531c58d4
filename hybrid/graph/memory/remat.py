"""Rematerialisation of any training graph: segments that keep only their inputs and run again in the
backward pass.

A plan (see :mod:`.segment_plans`) cuts the graph's activation nodes into segments, and each segment
becomes one ``remat_segment`` node holding it as a subgraph, together with the weight-only work it reads
(layout transposes and casts of parameters are recomputed too, so that no transformed copy of a weight
stays alive between the forward and the backward pass). A recomputed segment lowers to a
``jax.custom_vjp`` function whose forward pass keeps the segment's inputs only, and whose backward pass
runs the segment again (its own inner segments nested the same way), then differentiates it. Two
optimisation barriers order the program: the recomputation waits for the gradients of the segment's
outputs, and the segment's weight-only work waits for its activations.

XLA:CPU removes such barriers before its common-subexpression pass unless told otherwise, which merges
the recomputation back into the forward pass; every program hybrid compiles therefore gets
:attr:`hybrid.graph.Target.compiler_options`, which keeps them.

Recomputing a segment is exact: it reads the same inputs, including random keys (a dropout mask is the
same), and the state it computes again (BatchNorm running statistics) is dropped, so state is updated
once per step.
"""
from __future__ import annotations

import os
import sys
import time
import warnings
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterable, Sequence

import jax
import numpy as np

from ..ir import Graph, Node, Value
from .._lower import lower, register_kind
from ..passes.dce import dce
from ..rewrite import Rewriter, extract_subgraph
from .linear import Linearised, Segment
from .segment_plans import (SegmentPlan, candidate_plans, even_plan, least_memory, least_memory_plan, no_plan,
                            sqrt_count)

__all__ = ["RematPlan", "choose_plan", "apply_plan", "check_spec", "BudgetWarning"]


LEAST_MEMORY_CHECKS = 3  # plans compiled to find the least memory when no plan fits a budget


class BudgetWarning(UserWarning):
    """A ``remat=<bytes>`` budget that no plan meets."""


@dataclass(frozen=True)
class RematPlan:
    """An explicit plan: ``segments`` segments of about equal residual bytes, all but the last
    recomputed (``segments=1`` recomputes nothing)."""

    segments: int

    def __post_init__(self):
        if not isinstance(self.segments, (int, np.integer)) or self.segments < 1:
            raise ValueError(f"RematPlan: segments must be a positive int, got {self.segments!r}")


def check_spec(spec: Any, where: str) -> None:
    """Raise ValueError unless ``spec`` is a valid ``remat=`` value (``where`` names the caller)."""
    if spec is None or spec in ("sqrt", "auto") or isinstance(spec, RematPlan):
        return
    if isinstance(spec, (int, np.integer)) and not isinstance(spec, bool) and spec > 0:
        return
    raise ValueError(f"{where}: remat must be None, 'sqrt', 'auto', a positive byte budget (int) or a "
                     f"RematPlan, got {spec!r}")


def choose_plan(graph: Graph, spec: Any, weights: Iterable[Value],
                measure: Callable[[Graph], int] | None = None) -> tuple[Graph, SegmentPlan | None, dict]:
    """Apply the ``remat=`` option ``spec`` to ``graph``; returns the new graph, the plan (None when
    nothing is recomputed) and statistics.

    ``weights``: the graph inputs alive for the whole step (parameters). ``measure(graph)`` returns
    XLA's memory figure for the training step of a graph; only byte budgets call it: the plan is chosen
    on the simulated peak, scaled to XLA's figure of the unrecomputed graph, and checked against XLA's
    figure for the chosen plan (tightened up to three times when over budget). When none fits, the plans
    simulated to need least (and ``'auto'``'s) are compiled, and the one XLA gives least memory is used,
    with a :class:`BudgetWarning` naming its figure.
    """
    check_spec(spec, "hybridize")
    if spec is None:
        return graph, None, {}
    start = time.perf_counter()
    weights = list(weights)
    lin = Linearised(graph, weights)
    if len(lin) < 2:
        note = "fewer than two operations on activations: nothing to recompute"
        warnings.warn(f"hybridize(remat={spec!r}): {note}", stacklevel=_user_stacklevel())
        return graph, None, {"note": note}
    baseline = no_plan(lin)
    stats: dict = {"nodes": len(lin), "modeled_unoptimised_bytes": baseline.peak_bytes}
    if isinstance(spec, RematPlan):
        plan = even_plan(lin, spec.segments) if spec.segments > 1 else baseline
    elif spec == "sqrt":
        plan = even_plan(lin, sqrt_count(lin))
    elif spec == "auto":
        plan = least_memory_plan(lin)
    else:
        plan, budget_stats = _within_budget(graph, lin, int(spec), measure)
        stats.update(budget_stats)
    stats.update(plan=plan.describe(), segments=len(plan.segments), recomputed=plan.recomputed,
                 recompute_fraction=round(plan.recompute_fraction, 3), modeled_peak_bytes=plan.peak_bytes,
                 planning_seconds=round(time.perf_counter() - start, 3))
    if not plan.recomputed:
        return graph, None, stats
    return apply_plan(lin, plan.segments), plan, stats


def _within_budget(graph: Graph, lin: Linearised, budget: int,
                   measure: Callable[[Graph], int] | None) -> tuple[SegmentPlan, dict]:
    """The plan recomputing least among those whose memory fits ``budget`` bytes of XLA's figure."""
    if measure is None:
        raise ValueError("a byte budget needs a measure of XLA's memory figure")
    plans = candidate_plans(lin, suffixes=True)
    unoptimised = measure(graph)
    stats: dict = {"budget": budget, "unoptimised_xla_bytes": unoptimised}
    if unoptimised <= budget:
        stats["note"] = "fits without rematerialisation"
        return plans[0], stats
    # XLA's figure ~ the graph's inputs (weights, batch) + scale * simulated peak (activations, gradients)
    fixed = sum(v.nbytes for v in graph.inputs)
    scale = max(unoptimised - fixed, 1) / max(plans[0].peak_bytes, 1)
    target = (budget - fixed) / scale
    tried: dict[SegmentPlan, int] = {}
    for _attempt in range(3):
        fitting = [p for p in plans if p.peak_bytes <= target and p not in tried]
        if not fitting:
            break
        plan = min(fitting, key=lambda p: (p.recompute_flops, p.peak_bytes))
        measured = tried[plan] = measure(apply_plan(lin, plan.segments))
        if measured <= budget:
            stats["xla_bytes"] = measured
            return plan, stats
        target *= (budget - fixed) / max(measured - fixed, 1)
    # the least memory reachable, by XLA's figure, among the plans simulated to need least
    lowest = sorted(plans, key=lambda p: (p.peak_bytes, p.recompute_flops))[:LEAST_MEMORY_CHECKS]
    for plan in lowest + [least_memory(plans), least_memory_plan(lin)]:
        if plan not in tried:
            tried[plan] = measure(apply_plan(lin, plan.segments))
    least = min(tried, key=lambda p: (tried[p], p.recompute_flops))
    reached = stats["xla_bytes"] = tried[least]
    if reached > budget:
        stats["note"] = f"budget cannot be met; the least memory reachable is {reached} bytes"
        warnings.warn(f"hybridize(remat={budget}): no plan fits {budget} bytes; the least memory reachable is "
                      f"{reached} bytes ({least.describe()}), which is used", BudgetWarning,
                      stacklevel=_user_stacklevel())
    return least, stats


def _user_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first caller outside the hybrid package."""
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    frame: FrameType | None = sys._getframe(1)
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(package + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def apply_plan(lin: Linearised, segments: Sequence[Segment]) -> Graph:
    """``lin.graph`` with each segment of ``segments`` (covering ``lin``'s linear order) replaced by a
    ``remat_segment`` node (attribute ``recompute``: whether it keeps only its inputs and runs again in
    the backward pass; its subgraph holds its inner segments as nodes of their own)."""
    graph = lin.graph
    first = {lin.order[s.start]: s for s in segments}
    rewriter = Rewriter(graph)
    for node in graph.nodes:
        segment = first.get(node)
        if segment is not None:
            built, replaced = _segment_node(lin, segment)
            built = rewriter.emit(built.with_inputs([rewriter.value(v) for v in built.inputs]))
            for old, new in zip(replaced, built.outputs):
                rewriter.replace(old, new)
        elif node not in lin.position:
            rewriter.keep(node)
    result, _ = dce(rewriter.finish())
    return result


def _segment_node(lin: Linearised, segment: Segment) -> tuple[Node, list[Value]]:
    """The ``remat_segment`` node of ``segment`` and the values it replaces."""
    graph = lin.graph
    members = lin.order[segment.start:segment.stop]
    needed: set[Node] = set()  # the weight-only work the segment reads, recomputed with it
    stack = [v.producer for node in members for v in node.inputs if v.producer in lin.weight_nodes]
    while stack:
        node = stack.pop()
        if node not in needed:
            needed.add(node)
            stack.extend(v.producer for v in node.inputs if v.producer in lin.weight_nodes)
    nodes = [n for n in graph.nodes if n in needed] + members
    outputs = lin.live_after(segment.start, segment.stop)
    subgraph, external = extract_subgraph(nodes, graph.consts, outputs)
    if segment.inner:
        inner = Linearised(subgraph, [sub for sub, v in zip(subgraph.inputs, external) if v in lin.weights])
        subgraph = apply_plan(inner, [_shifted(s, segment.start) for s in segment.inner])
    first, last = members[0].scope or members[0].op, members[-1].scope or members[-1].op
    name = first if first == last else f"{first}..{last}"
    node = Node("remat_segment", "remat_segment", external, [(v.shape, v.dtype) for v in outputs],
                {"name": name, "nodes": len(members), "recompute": segment.recompute, "_subgraph": subgraph}, None,
                members[0].scope)
    return node, outputs


def _shifted(segment: Segment, by: int) -> Segment:
    return Segment(segment.start - by, segment.stop - by, segment.recompute,
                   tuple(_shifted(s, by) for s in segment.inner))


@register_kind("remat_segment")
def _evaluate_segment(node: Node, args: list) -> list:
    run = lower(node.attrs["_subgraph"])

    def forward(*values):
        # weights and activations enter together: the segment's weight-only work (kernel transposes,
        # casts) cannot be scheduled before the segment's activations exist
        return run(*jax.lax.optimization_barrier(values))

    if not node.attrs.get("recompute", True):
        return forward(*args)

    @jax.custom_vjp
    def segment(*values):
        return forward(*values)

    def keep_inputs(*values):
        return forward(*values), values

    def recompute(values, grads):
        # the recomputation waits for the gradients of the segment's outputs: run before them, it would
        # keep the segment's residuals alive through the backward of every later segment
        values, grads = jax.lax.optimization_barrier((values, grads))
        return jax.vjp(forward, *values)[1](grads)

    segment.defvjp(keep_inputs, recompute)
    return segment(*args)
