"""Live intervals of a graph's values under a schedule, and live bytes over time.

Step ``s`` is the execution of ``schedule[s]``.  A value is live on the closed
interval ``[start, end]``: ``start`` is the step of its producer (step 0 for
graph inputs), ``end`` the step of its last reader (the last step for graph
outputs; ``start`` for a value nobody reads).  An operation's inputs and outputs
are therefore live together at its step.  Constants live in the executable and
values of zero bytes (PRNG keys, empty arrays) take no memory: neither is tracked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

import numpy as np

from ..ir import Graph, GraphError, Node, Value

__all__ = ["Buffer", "Liveness", "liveness", "live_bytes", "nbytes"]

_ITEMSIZE: dict[Any, int] = {}


def nbytes(value: Value) -> int:
    """``value.nbytes`` with the item size cached per dtype (0 for dtypes without one, e.g. PRNG keys)."""
    itemsize = _ITEMSIZE.get(value.dtype)
    if itemsize is None:
        try:
            itemsize = np.dtype(value.dtype).itemsize
        except TypeError:
            itemsize = 0
        _ITEMSIZE[value.dtype] = itemsize
    return math.prod(value.shape) * itemsize


class Buffer(NamedTuple):
    """``size`` bytes in use from step ``start`` to step ``end``, both included."""

    size: int
    start: int
    end: int


def live_bytes(buffers: Sequence[tuple[int, int, int]], n_steps: int | None = None) -> list[int]:
    """Sum of the sizes of the buffers (``(size, start, end)``) live at each step ``0 .. n_steps - 1``.

    ``n_steps`` defaults to one past the last ``end``. Runs in O(len(buffers) + n_steps).
    """
    if n_steps is None:
        n_steps = max((end for _, _, end in buffers), default=-1) + 1
    delta = [0] * (n_steps + 1)
    for size, start, end in buffers:
        delta[start] += size
        delta[end + 1] -= size
    series, running = [], 0
    for step in range(n_steps):
        running += delta[step]
        series.append(running)
    return series


@dataclass
class Liveness:
    """Live intervals of the tracked values of a graph under one schedule.

    ``intermediates`` are the values the arena holds: produced by a node, not a
    graph output, nonzero size, in order of definition.  ``boundary`` are the
    tracked graph inputs and outputs (caller-owned buffers).
    """

    n_steps: int
    intervals: dict[Value, tuple[int, int]]
    sizes: dict[Value, int]
    intermediates: list[Value]
    boundary: list[Value]

    def buffers(self, values: Sequence[Value]) -> list[Buffer]:
        return [Buffer(self.sizes[v], *self.intervals[v]) for v in values]

    def live_bytes(self, with_io: bool = False) -> list[int]:
        """Bytes of intermediates (and with ``with_io`` of inputs/outputs too) live at each step."""
        values = self.intermediates + self.boundary if with_io else self.intermediates
        return live_bytes([(self.sizes[v], *self.intervals[v]) for v in values], self.n_steps)

    def max_live_bytes(self, with_io: bool = False) -> int:
        """The max-live lower bound: the largest number of bytes live at one step."""
        return max(self.live_bytes(with_io), default=0)


def liveness(graph: Graph, schedule: Sequence[Node] | None = None) -> Liveness:
    """Intervals of ``graph``'s values when its nodes run in ``schedule`` (default: ``graph.nodes``).

    Raises GraphError if ``schedule`` is not an ordering of exactly ``graph.nodes`` in
    which every node runs after the producers of its inputs.
    """
    schedule = graph.nodes if schedule is None else list(schedule)
    if len(schedule) != len(graph.nodes) or set(schedule) != set(graph.nodes):
        raise GraphError(f"the schedule has {len(schedule)} nodes ({len(set(schedule))} distinct) but the graph "
                         f"has {len(graph.nodes)}; a schedule must order every node of the graph exactly once")
    consts = graph.consts
    defined: set[Value] = set(graph.inputs)
    sizes: dict[Value, int] = {}
    start: dict[Value, int] = {}
    end: dict[Value, int] = {}
    for value in graph.inputs:
        size = nbytes(value)
        if size:
            sizes[value] = size
            start[value] = end[value] = 0
    produced: list[Value] = []
    for step, node in enumerate(schedule):
        for value in node.inputs:
            if value in consts:
                continue
            if value not in defined:
                raise GraphError(f"schedule step {step} runs {node.display_name()} before {value} is defined")
            if value in sizes:
                end[value] = step
        for value in node.outputs:
            defined.add(value)
            size = nbytes(value)
            if size:
                sizes[value] = size
                start[value] = end[value] = step
                produced.append(value)
    n_steps = max(1, len(schedule))
    outputs = [v for v in dict.fromkeys(graph.outputs) if v in sizes]
    for value in outputs:
        end[value] = n_steps - 1
    output_set = set(outputs)
    intermediates = [v for v in produced if v not in output_set]
    boundary = [v for v in graph.inputs if v in sizes] + [v for v in outputs if v.producer is not None]
    intervals = {v: (start[v], end[v]) for v in sizes}
    return Liveness(n_steps, intervals, sizes, intermediates, boundary)
