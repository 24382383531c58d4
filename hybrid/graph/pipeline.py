"""The compiler pipeline: passes over a traced graph, with per-pass statistics and timings."""
from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .ir import Graph
from .passes import PASSES
from .target import Target

__all__ = ["DEFAULT_PASSES", "PassStat", "Target", "default_passes", "resolve_passes", "run_passes", "format_stats"]

#: The default pipeline, in order (see docs/passes.md). ``hybridize()`` runs it minus the passes its
#: :class:`Target` skips on the current backend. Dead-code elimination also runs after every pass
#: that reports removed nodes.
DEFAULT_PASSES: tuple[str, ...] = ("dce", "cse", "fold", "simplify", "recognize", "softmax_ce", "attention",
                                   "bn_fold", "horizontal_fusion", "layout", "fuse")


def default_passes(target: Target | str | None = None) -> tuple[str, ...]:
    """The default pipeline for ``target`` (a Target or a backend name; default: JAX's default backend)."""
    target = _target(target)
    return tuple(p for p in DEFAULT_PASSES if p not in target.skipped_passes)


def _target(target: Target | str | None) -> Target:
    return target if isinstance(target, Target) else Target.for_backend(target)


@dataclass
class PassStat:
    """What one pass did: node counts before/after, wall time, pass-specific details."""

    name: str
    nodes_before: int
    nodes_after: int
    seconds: float
    details: dict = field(default_factory=dict)


def resolve_passes(spec: str | Iterable[str] | None, target: Target | str | None = None) -> tuple[str, ...]:
    """``None`` -> the default pipeline; a name or list of names -> validated tuple.

    Raises ValueError naming unknown passes (and listing the known ones), a pass placed before one it
    requires, or a pass placed after one that must be last.
    """
    if spec is None:
        return default_passes(target)
    names = (spec,) if isinstance(spec, str) else tuple(spec)
    unknown = [n for n in names if n not in PASSES]
    if unknown:
        raise ValueError(f"unknown pass(es) {unknown}; available passes: {sorted(PASSES)}")
    for i, name in enumerate(names):
        info = PASSES[name]
        late = [r for r in info.requires if r in names[i + 1:]]
        if late:
            raise ValueError(f"pass {name!r} must run after {late}, but comes before them in {list(names)}")
        if info.last and any(n != "dce" for n in names[i + 1:]):
            raise ValueError(f"pass {name!r} must be the last pass, but {list(names[i + 1:])} follow it")
    return names


def run_passes(graph: Graph, passes: Sequence[str], target: Target | str | None = None) -> tuple[Graph, list[PassStat]]:
    """Run ``passes`` in order for ``target`` (default: JAX's default backend), verifying the graph after
    each, with dead-code elimination after each pass that reports removed nodes; return the graph and
    the stats (a pass's stats include the dead code removed after it)."""
    target = _target(target)
    dce = PASSES["dce"].fn
    collecting = gc.isenabled()
    gc.disable()  # passes allocate many short-lived objects and no cycles: skip collector pauses
    try:
        graph.verify()
        stats = []
        for name in resolve_passes(passes, target):
            before = len(graph.nodes)
            start = time.perf_counter()
            graph, details = PASSES[name].fn(graph, target)
            if name != "dce" and details.get("nodes_removed"):
                graph, cleaned = dce(graph, target)
                details = dict(details, dead_nodes_removed=cleaned["nodes_removed"])
            elapsed = time.perf_counter() - start
            graph.verify()
            stats.append(PassStat(name, before, len(graph.nodes), elapsed, details))
        return graph, stats
    finally:
        if collecting:
            gc.enable()


def format_stats(stats: Sequence[PassStat], target: Target | None = None) -> str:
    """A small table of pass statistics, headed by the target when given."""
    lines = [str(target)] if target is not None else []
    lines.append(f"{'pass':<16}{'nodes':>14}{'ms':>10}  details")
    for s in stats:
        details = ", ".join(f"{k}={v}" for k, v in s.details.items() if v)
        lines.append(f"{s.name:<16}{s.nodes_before:>6} -> {s.nodes_after:<6}{s.seconds * 1e3:>8.2f}  {details}")
    return "\n".join(lines)
