"""``hybrid.inspect(block, *inputs)``: the graph a block compiles to, before and after the passes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import jax

from .._core import lazy as _lazy
from .. import autograd, compile_log
from .cached_op import LIVE_CACHES, CompiledForward, trace_block
from .compile import LIVE_STEPS
from ..graph._lower import lower
from ..graph.memory import MemoryPlan, plan_memory, training_graph
from ..graph import Graph, Target, format_stats, resolve_passes, run_passes
from ..graph.pipeline import PassStat

__all__ = ["inspect", "Inspection", "memory_plan", "CacheEntry", "compile_caches"]


@dataclass
class Inspection:
    """Traced graph (``before``), optimised graph (``after``) and per-pass statistics."""

    before: Graph
    after: Graph
    stats: list[PassStat]
    passes: tuple[str, ...]
    target: Target

    def __str__(self) -> str:
        return (f"passes: {', '.join(self.passes) or '(none)'}\n{format_stats(self.stats, self.target)}\n\n"
                f"-- before ({len(self.before)} nodes) --\n{self.before}\n\n"
                f"-- after ({len(self.after)} nodes) --\n{self.after}")

    def save_dot(self, path: str, which: str = "after") -> None:
        """Write Graphviz source of the ``'before'`` or ``'after'`` graph (render with ``dot -Tpng``)."""
        graph = {"before": self.before, "after": self.after}[which]
        with open(path, "w") as handle:
            handle.write(graph.to_dot())


def inspect(block: Any = None, *inputs: Any, passes: str | Sequence[str] | None = None,
            training: bool = False) -> Inspection | list[CacheEntry]:
    """Trace ``block`` on ``inputs`` and run ``passes`` (default: the block's pipeline).

    ``training`` selects train-mode behaviour (dropout, batch statistics) and, for a block
    hybridized with ``remat=``, shows the graph that training differentiates: its segments as
    ``remat_segment`` nodes, the plan in the ``remat`` statistics. Parameters with deferred
    shapes are initialised, as at a first call; nothing else changes. Without a block,
    ``inspect()`` lists what the compile caches hold (:func:`compile_caches`).
    """
    if block is None:
        if inputs:
            raise TypeError("hybrid.inspect: inputs were given without a block")
        return compile_caches()
    chosen = resolve_passes(passes) if passes is not None else getattr(block, "_passes", resolve_passes(None))
    with autograd.pause(train_mode=training):
        traced = trace_block(block, (inputs, {}))
    target = Target.for_backend()
    remat = getattr(block, "_remat", None) if training else None
    if remat is None:
        after, stats = run_passes(traced.graph, chosen, target)
        return Inspection(traced.graph, after, stats, tuple(chosen), target)
    entry = CompiledForward(traced, chosen, remat)
    return Inspection(traced.graph, entry.train_graph, entry.pass_stats, tuple(chosen), target)


def memory_plan(block: Any, *inputs: Any, training: bool = True, remat: Any = None,
                passes: str | Sequence[str] | None = None, schedule: str = "topological",
                strategy: str = "greedy_by_size") -> MemoryPlan:
    """The memory plan of ``block`` on ``inputs``: for ``training``, of its forward+backward graph
    (gradients of the trainable parameters), else of its forward graph; with the block's passes and
    the given ``remat`` option. ``plan.summary()`` prints it (with XLA's own figure for the compiled
    program in ``plan.xla_bytes``), ``plan.plot(path)`` draws memory over time (needs matplotlib).
    """
    chosen = resolve_passes(passes) if passes is not None else getattr(block, "_passes", resolve_passes(None))
    with autograd.pause(train_mode=training):
        entry = CompiledForward(trace_block(block, (inputs, {})), chosen, remat)
    graph = entry.train_graph
    if training:
        run = lower(graph)
        specs = [jax.ShapeDtypeStruct(v.shape, v.dtype) for v in graph.inputs]
        trainable = [i for i, p in enumerate(entry.params) if p.grad_req != "null"]
        graph = training_graph(lambda *flat: run(*flat)[:entry.n_outputs], *specs, wrt=trainable,
                               input_names=[v.name for v in entry.graph.inputs])
    plan = plan_memory(graph, schedule=schedule, strategy=strategy)
    if training:
        plan.xla_bytes = entry.training_memory(entry.train_graph)
    return plan


@dataclass(frozen=True)
class CacheEntry:
    """One compiled program held by a cache: ``kind`` is ``'hybridized block'``, ``'compiled step'`` or
    ``'recorded steps'``; ``owner`` names the block or step function; ``signature`` the inputs (for
    recorded steps: how many programs are cached)."""

    kind: str
    owner: str
    signature: str


def compile_caches() -> list[CacheEntry]:
    """What is compiled and cached now: every input signature of every hybridized block and
    ``hybrid.compile`` step alive, and the number of cached programs of recorded steps."""
    entries = []
    for cache in list(LIVE_CACHES):
        owner = compile_log.name_of(cache.block)
        entries += [CacheEntry("hybridized block", owner, e.signature) for e in list(cache.entries.values())]
    for step in list(LIVE_STEPS):
        owner = compile_log.name_of(step._fn)
        entries += [CacheEntry("compiled step", owner, p.signature) for p in list(step._programs.values())]
    if _lazy.cached_programs():
        entries.append(CacheEntry("recorded steps", "autograd.record()", f"{_lazy.cached_programs()} programs"))
    return entries
