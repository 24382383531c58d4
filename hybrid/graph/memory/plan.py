"""``plan_memory(graph)``: schedule, liveness, in-place reuse and arena offsets, with statistics."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

from ..ir import Graph, Node, Value
from .assignment import Assignment, check_assignment, greedy_by_size, shared_objects
from .exact import exact
from .inplace import inplace_pairs, merge_inplace
from .liveness import Buffer, live_bytes, liveness
from .schedule import SCHEDULES

__all__ = ["MemoryPlan", "plan_memory", "STRATEGIES", "format_bytes"]

STRATEGIES: dict[str, Callable[[Sequence[Buffer]], Assignment]] = {
    "greedy_by_size": greedy_by_size, "shared_objects": shared_objects, "exact": exact}
_COMPARE_EXPANSIONS = 50_000  # search budget of the exact arena shown next to another strategy


def format_bytes(n: int | None) -> str:
    if n is None:
        return "-"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n / scale:.2f} {unit}"
    return f"{n} B"


@dataclass
class MemoryPlan:
    """Where every intermediate of a graph lives in one arena, and how much memory that takes.

    - ``schedule``: the node order planned for; ``schedule_name`` how it was chosen.
    - ``intervals``: ``[start, end]`` steps of every tracked value (inputs, outputs, intermediates).
    - ``offsets``: byte offset in the arena of every intermediate (the ``strategy``'s assignment).
    - ``inplace``: ``(input, output)`` pairs where the output is written over the input.
    - ``no_sharing_bytes``: sum of the intermediates' sizes (one buffer each, no reuse).
    - ``max_live_bytes``: the max-live lower bound of the arena: the most bytes of intermediates
      live at one step (an in-place pair counts once); ``max_live_with_io_bytes`` adds the graph's
      inputs (live from the start) and outputs (live to the end).
    - ``arena_by_strategy``: arena bytes of each strategy computed (None: not computed or too
      large for the exact search).
    - ``live_bytes`` / ``live_bytes_with_io``: bytes live at each step (memory over time).
    """

    schedule: list[Node]
    schedule_name: str
    strategy: str
    intervals: dict[Value, tuple[int, int]]
    offsets: dict[Value, int]
    inplace: list[tuple[Value, Value]]
    no_sharing_bytes: int
    max_live_bytes: int
    max_live_with_io_bytes: int
    arena_by_strategy: dict[str, int | None]
    live_bytes: list[int]
    live_bytes_with_io: list[int]
    xla_bytes: int | None = None

    @property
    def arena_bytes(self) -> int:
        """Arena size of the chosen strategy."""
        arena = self.arena_by_strategy[self.strategy]
        assert arena is not None  # only a strategy computed for comparison may lack an arena
        return arena

    def summary(self) -> str:
        """A text table of the statistics and of each strategy's arena against the lower bound."""
        bound = self.max_live_bytes
        lines = [f"memory plan: {len(self.schedule)} nodes, schedule={self.schedule_name}, strategy={self.strategy}",
                 f"  intermediates          {len(self.offsets):>12}  (in-place pairs: {len(self.inplace)})",
                 f"  no sharing             {format_bytes(self.no_sharing_bytes):>12}",
                 f"  max-live lower bound   {format_bytes(bound):>12}",
                 f"  with inputs/outputs    {format_bytes(self.max_live_with_io_bytes):>12}",
                 f"  {'strategy':<22} {'arena':>12}  {'/ bound':>8}"]
        for name, arena in self.arena_by_strategy.items():
            ratio = f"{arena / bound:.3f}" if arena is not None and bound else "-"
            mark = "  *" if name == self.strategy else ""
            lines.append(f"  {name:<22} {format_bytes(arena):>12}  {ratio:>8}{mark}")
        if self.xla_bytes is not None:
            lines.append(f"  XLA, compiled program  {format_bytes(self.xla_bytes):>12}  "
                         "(temp + arguments + outputs - aliased)")
        return "\n".join(lines)

    def plot(self, path: str) -> None:
        """Write a chart of live bytes per step, with the arena and the bound, to ``path`` (png, svg, pdf...).

        Raises ImportError if matplotlib is missing.
        """
        try:
            from matplotlib.figure import Figure
        except ImportError:
            raise ImportError("MemoryPlan.plot needs matplotlib: pip install 'hybrid[plot]' "
                              "(or pip install matplotlib)") from None
        peak = max(self.live_bytes_with_io, default=0)
        unit, scale = next((u, float(s)) for u, s in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10), ("B", 1))
                           if peak >= s or s == 1)
        steps = range(len(self.live_bytes) + 1)  # each step's value spans [step, step + 1)
        figure = Figure(figsize=(8, 4), layout="tight")
        axes = figure.add_subplot()
        for series, label in ((self.live_bytes_with_io, "with inputs/outputs"), (self.live_bytes, "intermediates")):
            axes.step(steps, [b / scale for b in series + series[-1:]], where="post", label=label)
        axes.axhline(self.arena_bytes / scale, linestyle="--", color="black", label=f"arena ({self.strategy})")
        axes.set_xlabel("schedule step")
        axes.set_ylabel(f"live {unit}")
        axes.set_title(f"memory over time ({self.schedule_name} schedule)")
        axes.legend()
        figure.savefig(path)


def _exact_if_cheap(buffers: list[Buffer], start: Assignment | None, max_buffers: int) -> Assignment | None:
    try:
        return exact(buffers, max_buffers=max_buffers, max_expansions=_COMPARE_EXPANSIONS, start=start)
    except ValueError:
        return None


def plan_memory(graph: Graph, schedule: str | Sequence[Node] = "topological", strategy: str = "greedy_by_size",
                *, inplace: bool = True, compare: bool = True, exact_max_buffers: int = 32) -> MemoryPlan:
    """Plan the memory of ``graph``'s intermediates.

    ``schedule``: ``'topological'``, ``'memory_aware'`` or an explicit list of the graph's nodes.
    ``strategy``: ``'greedy_by_size'``, ``'shared_objects'`` or ``'exact'`` gives the offsets.
    ``inplace``: let elementwise nodes write over inputs that die there.
    ``compare``: also compute the other strategies' arenas for the statistics (exact only when it
    is proven cheaply or has at most ``exact_max_buffers`` buffers). Every assignment is checked.

    Raises ValueError for an unknown schedule or strategy (and from ``'exact'`` on graphs too
    large for it), GraphError for an invalid explicit schedule.
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {sorted(STRATEGIES)}")
    if isinstance(schedule, str):
        if schedule not in SCHEDULES:
            raise ValueError(f"unknown schedule {schedule!r}; expected one of {sorted(SCHEDULES)} or a list of nodes")
        name, order = schedule, SCHEDULES[schedule](graph)
    else:
        name, order = "given", list(schedule)
    live = liveness(graph, order)
    pairs = inplace_pairs(order, live) if inplace else []
    buffers, buffer_of = merge_inplace(live.intermediates, live, pairs)
    assignments: dict[str, Assignment | None] = {}
    for key in STRATEGIES if compare else (strategy,):
        if key != "exact":
            assignments[key] = STRATEGIES[key](buffers)
        elif key == strategy:
            assignments[key] = exact(buffers, start=assignments.get("greedy_by_size"))
        else:
            assignments[key] = _exact_if_cheap(buffers, assignments["greedy_by_size"], exact_max_buffers)
    for assignment in {id(a): a for a in assignments.values() if a is not None}.values():
        check_assignment(buffers, assignment.offsets)
    chosen_assignment = assignments[strategy]
    assert chosen_assignment is not None  # the chosen strategy always gives one (exact raises instead)
    chosen = chosen_assignment.offsets
    boundary = live.buffers(live.boundary)
    series = live_bytes(buffers, live.n_steps)
    series_io = live_bytes(buffers + boundary, live.n_steps)
    return MemoryPlan(
        schedule=order, schedule_name=name, strategy=strategy, intervals=live.intervals,
        offsets={v: chosen[buffer_of[v]] for v in live.intermediates}, inplace=pairs,
        no_sharing_bytes=sum(live.sizes[v] for v in live.intermediates),
        max_live_bytes=max(series, default=0), max_live_with_io_bytes=max(series_io, default=0),
        arena_by_strategy={k: None if a is None else a.arena for k, a in assignments.items()},
        live_bytes=series, live_bytes_with_io=series_io)
