"""``hybrid.inspect(block, *inputs)``: the graph a block compiles to, before and after the passes."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from . import autograd
from .cached_op import trace_block
from .graph import Graph, format_stats, resolve_passes, run_passes
from .graph.pipeline import PassStat

__all__ = ["inspect", "Inspection"]


@dataclass
class Inspection:
    """Traced graph (``before``), optimised graph (``after``) and per-pass statistics."""

    before: Graph
    after: Graph
    stats: list[PassStat]
    passes: tuple[str, ...]

    def __str__(self) -> str:
        return (f"passes: {', '.join(self.passes) or '(none)'}\n{format_stats(self.stats)}\n\n"
                f"-- before ({len(self.before)} nodes) --\n{self.before}\n\n"
                f"-- after ({len(self.after)} nodes) --\n{self.after}")

    def save_dot(self, path: str, which: str = "after") -> None:
        """Write Graphviz source of the ``'before'`` or ``'after'`` graph (render with ``dot -Tpng``)."""
        graph = {"before": self.before, "after": self.after}[which]
        with open(path, "w") as handle:
            handle.write(graph.to_dot())


def inspect(block: Any, *inputs: Any, passes: str | Sequence[str] | None = None, training: bool = False) -> Inspection:
    """Trace ``block`` on ``inputs`` and run ``passes`` (default: the block's pipeline).

    ``training`` selects train-mode behaviour (dropout, batch statistics). Parameters
    with deferred shapes are initialised, as at a first call; nothing else changes.
    """
    chosen = resolve_passes(passes) if passes is not None else getattr(block, "_passes", resolve_passes(None))
    with autograd.pause(train_mode=training):
        traced = trace_block(block, (inputs, {}))
    after, stats = run_passes(traced.graph, chosen)
    return Inspection(traced.graph, after, stats, tuple(chosen))
