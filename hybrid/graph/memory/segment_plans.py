"""Plans that cut a :class:`~hybrid.graph.memory.linear.Linearised` graph into segments.

All plans come from one greedy rule (Chen et al. 2016, "Training Deep Nets with Sublinear Memory
Cost", section 4.3): walk the linear order, and close a segment before the residuals it keeps exceed a
threshold ``T``, at the position whose cut is smallest among those where the segment keeps at least
``T / 2`` (so segments end where one activation crosses, as after a residual block, rather than where a
skip connection is also live). Every segment
but the last is recomputed: it keeps only its inputs in the forward pass.

- :func:`even_plan`: ``k`` segments of about equal residual bytes, cut where the cut is smallest near
  each ideal place (``'sqrt'`` takes ``k = sqrt(n)``, Chen's plan);
- :func:`least_memory_plan`: the threshold whose plan has the lowest simulated peak;
- :func:`candidate_plans`: every threshold, and for each, variants that keep a suffix of the segments
  unrecomputed (less recomputation, more memory), for byte budgets.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .linear import Linearised, Segment, peak_bytes

__all__ = ["SegmentPlan", "even_plan", "least_memory_plan", "candidate_plans", "no_plan"]


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
        """How many segments are recomputed."""
        return sum(s.recompute for s in self.segments)

    @property
    def recompute_fraction(self) -> float:
        return self.recompute_flops / self.forward_flops if self.forward_flops else 0.0

    def describe(self) -> str:
        if not self.recomputed:
            return "nothing recomputed"
        return (f"{len(self.segments)} segments, {self.recomputed} recomputed "
                f"({self.recompute_fraction:.0%} of a forward pass again)")


def _evaluate(lin: Linearised, segments: list[Segment]) -> SegmentPlan:
    segments = [Segment(s.start, s.stop, s.recompute and bool(lin.recomputable[s.start:s.stop].all()))
                for s in segments]
    work = sum(float(lin.flops[s.start:s.stop].sum()) for s in segments if s.recompute)
    return SegmentPlan(tuple(segments), peak_bytes(lin, segments), work, float(lin.flops.sum()))


def no_plan(lin: Linearised) -> SegmentPlan:
    """One segment, nothing recomputed."""
    return _evaluate(lin, [Segment(0, len(lin), False)])


def _cuts(lin: Linearised, threshold: float) -> list[int]:
    """Cut positions of the greedy rule for ``threshold`` residual bytes per segment."""
    n = len(lin)
    held = np.concatenate([[0], np.cumsum(lin.held_bytes)])
    cuts, start = [], 0
    while True:
        reach = int(np.searchsorted(held, held[start] + threshold, side="right")) - 1
        if reach >= n:
            return cuts
        reach = max(reach, start + 1)
        # the smallest cut (latest on ties) among the positions where the segment is at least half full
        first = max(start + 1, int(np.searchsorted(held, held[start] + threshold / 2, side="left")))
        first = min(first, reach)
        window = lin.cut_bytes[first:reach + 1]
        best = first + int(len(window) - 1 - np.argmin(window[::-1]))
        cuts.append(best)
        start = best


def _segments(n: int, cuts: list[int], recomputed: int) -> list[Segment]:
    """Segments between ``cuts``; the first ``recomputed`` of them are recomputed."""
    bounds = [0] + cuts + [n]
    return [Segment(a, b, i < recomputed) for i, (a, b) in enumerate(zip(bounds, bounds[1:]))]


def even_plan(lin: Linearised, count: int) -> SegmentPlan:
    """``count`` segments (fewer only when the graph has fewer nodes) of about equal residual bytes, all
    but the last recomputed: each cut is the smallest within a quarter segment of its ideal place."""
    n = len(lin)
    count = max(1, min(count, n))
    held = np.concatenate([[0], np.cumsum(lin.held_bytes)]).astype(np.float64)
    share = held[-1] / count
    cuts: list[int] = []
    for i in range(1, count):
        low = max(cuts[-1] + 1 if cuts else 1, int(np.searchsorted(held, i * share - share / 4, side="left")))
        high = min(n - (count - i), int(np.searchsorted(held, i * share + share / 4, side="right")) - 1)
        low = min(low, n - (count - i))  # leave a node for every segment still to come
        high = max(high, low)
        window = lin.cut_bytes[low:high + 1]
        distance = np.abs(held[low:high + 1] - i * share)
        cuts.append(low + int(np.lexsort((distance, window))[0]))  # smallest cut, nearest on ties
    return _evaluate(lin, _segments(n, cuts, len(cuts)))


def sqrt_count(lin: Linearised) -> int:
    """The segment count of the classic plan: the square root of the number of nodes."""
    return max(2, round(math.sqrt(len(lin))))


def _thresholds(lin: Linearised, count: int = 48) -> np.ndarray:
    total = float(lin.held_bytes.sum())
    low = max(float(lin.held_bytes.max()), total / max(2, len(lin)))
    return np.unique(np.geomspace(low, total, count))


def least_memory_plan(lin: Linearised) -> SegmentPlan:
    """The plan of lowest simulated peak among the greedy plans that recompute every segment but the
    last (at most one forward pass again); the unrecomputed graph if none is lower."""
    best = no_plan(lin)
    for threshold in _thresholds(lin):
        cuts = _cuts(lin, threshold)
        plan = _evaluate(lin, _segments(len(lin), cuts, len(cuts)))
        if (plan.peak_bytes, plan.recompute_flops) < (best.peak_bytes, best.recompute_flops):
            best = plan
    return best


def candidate_plans(lin: Linearised) -> list[SegmentPlan]:
    """The plans a byte budget chooses from: for every threshold, the greedy cuts with the first
    ``j`` segments recomputed, for every ``j``; the unrecomputed graph first."""
    plans = {(): no_plan(lin)}
    for threshold in _thresholds(lin):
        cuts = _cuts(lin, threshold)
        for recomputed in range(1, len(cuts) + 1):
            segments = _segments(len(lin), cuts, recomputed)
            key = tuple((s.start, s.stop) for s in segments if s.recompute)
            if key not in plans:
                plans[key] = _evaluate(lin, segments)
    return list(plans.values())
