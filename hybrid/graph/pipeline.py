"""The compiler pipeline: passes over a traced graph, with per-pass statistics and timings."""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

import jax

from .ir import Graph
from .passes import PASSES

__all__ = ["DEFAULT_PASSES", "UNPROFITABLE", "PassStat", "default_passes", "resolve_passes", "run_passes",
           "format_stats"]

#: The default pipeline, in order (see docs/passes.md). ``hybridize()`` runs it minus the passes
#: measured not to pay off on the current backend (:data:`UNPROFITABLE`).
DEFAULT_PASSES: tuple[str, ...] = ("dce", "cse", "fold", "simplify", "recognize", "softmax_ce", "attention",
                                   "bn_fold", "horizontal_fusion", "layout", "dce", "fuse")

#: Passes left out of the default pipeline per backend: on XLA:CPU, splitting the output of one
#: wide matmul costs more than the kernel launches horizontal fusion saves (docs/passes.md).
UNPROFITABLE: dict[str, tuple[str, ...]] = {"cpu": ("horizontal_fusion",)}


def default_passes(backend: str | None = None) -> tuple[str, ...]:
    """The default pipeline for ``backend`` (default: JAX's default backend)."""
    backend = backend or jax.default_backend()
    return tuple(p for p in DEFAULT_PASSES if p not in UNPROFITABLE.get(backend, ()))


@dataclass
class PassStat:
    """What one pass did: node counts before/after, wall time, pass-specific details."""

    name: str
    nodes_before: int
    nodes_after: int
    seconds: float
    details: dict = field(default_factory=dict)


def resolve_passes(spec: str | Iterable[str] | None) -> tuple[str, ...]:
    """``None`` -> the default pipeline; a name or list of names -> validated tuple.

    Raises ValueError naming unknown passes and listing the known ones.
    """
    if spec is None:
        return default_passes()
    names = (spec,) if isinstance(spec, str) else tuple(spec)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass(es) {unknown}; available passes: {sorted(PASSES)}")
    return names


def run_passes(graph: Graph, passes: Sequence[str]) -> tuple[Graph, list[PassStat]]:
    """Run ``passes`` in order, verifying the graph after each; return the graph and stats."""
    collecting = gc.isenabled()
    gc.disable()  # passes allocate many short-lived objects and no cycles: skip collector pauses
    try:
        graph.verify()
        stats = []
        for name in passes:
            before = len(graph.nodes)
            start = time.perf_counter()
            graph, details = PASSES[name](graph)
            elapsed = time.perf_counter() - start
            graph.verify()
            stats.append(PassStat(name, before, len(graph.nodes), elapsed, details))
        return graph, stats
    finally:
        if collecting:
            gc.enable()


def format_stats(stats: Sequence[PassStat]) -> str:
    """A small table of pass statistics."""
    lines = [f"{'pass':<16}{'nodes':>14}{'ms':>10}  details"]
    for s in stats:
        details = ", ".join(f"{k}={v}" for k, v in s.details.items() if v)
        lines.append(f"{s.name:<16}{s.nodes_before:>6} -> {s.nodes_after:<6}{s.seconds * 1e3:>8.2f}  {details}")
    return "\n".join(lines)
