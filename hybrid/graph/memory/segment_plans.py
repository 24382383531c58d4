"""Plans that cut a :class:`~hybrid.graph.memory.linear.Linearised` graph into segments.

Cuts follow one greedy rule (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost",
section 4.3): walk the linear order, and close a segment before the residuals it keeps exceed a
threshold ``T``, at the position whose cut is smallest among those where the segment keeps at least
``T / 2`` (so segments end where one activation crosses, as after a residual block, rather than where a
skip connection is also live). Every segment but the last is recomputed: it keeps only its inputs in
the forward pass.

- :func:`even_plan`: ``k`` segments of about equal residual bytes, cut where the cut is smallest near
  each ideal place (``'sqrt'`` takes ``k = sqrt(n)``, Chen's plan);
- :func:`candidate_plans`: one level of segments for a range of thresholds, and two levels (each
  recomputed segment cut again into segments that its recomputation keeps only the inputs of; they run
  a third time before their backward), for outer and inner counts up to :data:`MAX_OUTER` and
  :data:`MAX_INNER`;
- :func:`least_memory_plan`: the candidate of lowest simulated peak.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .linear import Linearised, Segment, peak_bytes

__all__ = ["SegmentPlan", "even_plan", "least_memory", "least_memory_plan", "candidate_plans", "no_plan",
           "sqrt_count"]

MAX_OUTER = 8  # two-level plans: at most this many outer segments ...
MAX_INNER = 8  # ... each cut into at most this many


@dataclass(frozen=True)
class SegmentPlan:
    """Segments covering the linear order, with their simulated peak (``peak_bytes``) and the forward
    work they repeat (``recompute_flops``, and as a fraction of one forward pass)."""

    segments: tuple[Segment, ...]
    peak_bytes: int
    recompute_flops: float
    forward_flops: float

    @property
    def recomputed(self) -> int:
        """How many segments are recomputed (at any level)."""
        return sum(s.recompute + sum(i.recompute for i in s.inner) for s in self.segments)

    @property
    def recompute_fraction(self) -> float:
        return self.recompute_flops / self.forward_flops if self.forward_flops else 0.0

    @property
    def levels(self) -> int:
        return 2 if any(s.inner for s in self.segments) else 1 if self.recomputed else 0

    def describe(self) -> str:
        if not self.recomputed:
            return "nothing recomputed"
        inner = sum(len(s.inner) for s in self.segments)
        nested = f", {inner} inner segments" if inner else ""
        return (f"{len(self.segments)} segments{nested}, {self.recomputed} recomputed "
                f"({self.recompute_fraction:.0%} of a forward pass again)")


def _checked(lin: Linearised, segment: Segment) -> Segment:
    """``segment`` recomputed only where every node may run twice (no side effects)."""
    recompute = segment.recompute and bool(lin.recomputable[segment.start:segment.stop].all())
    inner = tuple(_checked(lin, s) for s in segment.inner) if recompute else ()
    return Segment(segment.start, segment.stop, recompute, inner)


def _work(lin: Linearised, segments) -> float:
    return sum(float(lin.flops[s.start:s.stop].sum()) + _work(lin, s.inner) for s in segments if s.recompute)


def _evaluate(lin: Linearised, segments: list[Segment]) -> SegmentPlan:
    segments = [_checked(lin, s) for s in segments]
    return SegmentPlan(tuple(segments), peak_bytes(lin, segments), _work(lin, segments), float(lin.flops.sum()))


def no_plan(lin: Linearised) -> SegmentPlan:
    """One segment, nothing recomputed."""
    return _evaluate(lin, [Segment(0, len(lin), False)])


def _held(lin: Linearised) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(lin.held_bytes)]).astype(np.float64)


def _greedy_cuts(lin: Linearised, threshold: float, start: int = 0, stop: int | None = None) -> list[int]:
    """Cut positions in ``(start, stop)`` of the greedy rule for ``threshold`` residual bytes per segment."""
    stop = len(lin) if stop is None else stop
    held = _held(lin)
    cuts: list[int] = []
    while True:
        reach = int(np.searchsorted(held, held[start] + threshold, side="right")) - 1
        if reach >= stop:
            return cuts
        reach = max(reach, start + 1)
        first = max(start + 1, int(np.searchsorted(held, held[start] + threshold / 2, side="left")))
        first = min(first, reach)
        window = lin.cut_bytes[first:reach + 1]
        start = first + int(len(window) - 1 - np.argmin(window[::-1]))  # smallest cut, latest on ties
        cuts.append(start)


def _even_cuts(lin: Linearised, count: int, start: int = 0, stop: int | None = None) -> list[int]:
    """``count - 1`` cut positions in ``(start, stop)`` splitting its residual bytes about evenly: each the
    smallest cut within a quarter segment of its ideal place (fewer cuts only for fewer nodes)."""
    stop = len(lin) if stop is None else stop
    count = max(1, min(count, stop - start))
    held = _held(lin)
    share = (held[stop] - held[start]) / count
    cuts: list[int] = []
    for i in range(1, count):
        ideal = held[start] + i * share
        low = max(cuts[-1] + 1 if cuts else start + 1, int(np.searchsorted(held, ideal - share / 4, side="left")))
        high = min(stop - (count - i), int(np.searchsorted(held, ideal + share / 4, side="right")) - 1)
        low = min(low, stop - (count - i))  # leave a node for every segment still to come
        high = max(high, low)
        window = lin.cut_bytes[low:high + 1]
        distance = np.abs(held[low:high + 1] - ideal)
        cuts.append(low + int(np.lexsort((distance, window))[0]))  # smallest cut, nearest on ties
    return cuts


def _segments(start: int, stop: int, cuts: list[int], recomputed: int | None = None) -> list[Segment]:
    """Segments of ``[start, stop)`` between ``cuts``; the first ``recomputed`` (default: all but the
    last) are recomputed."""
    bounds = [start] + cuts + [stop]
    recomputed = len(cuts) if recomputed is None else recomputed
    return [Segment(a, b, i < recomputed) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def _nested(lin: Linearised, outer: list[Segment], inner_count: int) -> list[Segment]:
    """``outer`` with each recomputed segment cut into ``inner_count`` even inner segments."""
    return [Segment(s.start, s.stop, True, tuple(_segments(s.start, s.stop, _even_cuts(lin, inner_count, s.start,
                                                                                            s.stop))))
            if s.recompute and s.stop - s.start >= 2 * inner_count else s for s in outer]


def even_plan(lin: Linearised, count: int) -> SegmentPlan:
    """``count`` segments (fewer only when the graph has fewer nodes) of about equal residual bytes, all
    but the last recomputed."""
    return _evaluate(lin, _segments(0, len(lin), _even_cuts(lin, count)))


def sqrt_count(lin: Linearised) -> int:
    """The segment count of the classic plan: the square root of the number of nodes."""
    return max(2, round(math.sqrt(len(lin))))


def _thresholds(lin: Linearised, count: int = 48) -> np.ndarray:
    """``count`` thresholds spaced geometrically from the largest node's residuals to all residuals."""
    total = float(lin.held_bytes.sum())
    if total <= 0:
        return np.zeros(0)
    low = max(float(lin.held_bytes.max()), total / max(2, len(lin)))
    return np.unique(np.geomspace(low, total, count))


def candidate_plans(lin: Linearised, suffixes: bool = False) -> list[SegmentPlan]:
    """The unrecomputed graph; one level of greedy segments for every threshold; two levels (even outer and
    inner counts). With ``suffixes``, also each one-level plan with only its first ``j`` segments
    recomputed, for every ``j`` (less recomputation, more memory: what byte budgets choose from)."""
    n = len(lin)
    plans: dict = {}

    def add(segments: list[Segment]) -> None:
        key = tuple(segments)
        if key not in plans:
            plans[key] = _evaluate(lin, segments)

    add([Segment(0, n, False)])
    for threshold in _thresholds(lin):
        cuts = _greedy_cuts(lin, threshold)
        for recomputed in (range(1, len(cuts) + 1) if suffixes else [len(cuts)]):
            add(_segments(0, n, cuts, recomputed))
    for outer in range(2, MAX_OUTER + 1):
        segments = _segments(0, n, _even_cuts(lin, outer))
        for inner in range(2, MAX_INNER + 1):
            add(_nested(lin, segments, inner))
    return list(plans.values())


def least_memory(plans: list[SegmentPlan]) -> SegmentPlan:
    """The plan of lowest simulated peak; among those within 2% of it, the one recomputing least."""
    lowest = min(p.peak_bytes for p in plans)
    return min((p for p in plans if p.peak_bytes <= 1.02 * lowest), key=lambda p: (p.recompute_flops, p.peak_bytes))


def least_memory_plan(lin: Linearised) -> SegmentPlan:
    """:func:`least_memory` of the :func:`candidate_plans`."""
    return least_memory(candidate_plans(lin))
