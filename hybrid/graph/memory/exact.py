"""The smallest possible arena for a few buffers, by branch and bound.

Why the search is complete: take any valid assignment and list its buffers by (offset,
index). Placing them in that order, each at the lowest offset that is free among the
buffers placed before it that overlap it in time, gives offsets no higher than the original
ones (the original offset is always free: every earlier overlapping buffer ends below it).
Repeating this reaches an assignment that the same procedure reproduces, in which the
placement order has nondecreasing (offset, index). So it suffices to search orders in
which each buffer goes to its lowest free offset and (offset, index) strictly increases;
every buffer placed later sits at or above the last offset, which gives the bound
``last offset + max over steps of the bytes still to place at that step``.
The search starts from the greedy-by-size arena and stops at the max-live lower bound.
"""
from __future__ import annotations

from typing import Sequence

from .assignment import Assignment, greedy_by_size
from .liveness import Buffer, live_bytes

__all__ = ["exact"]


def exact(buffers: Sequence[Buffer], *, max_buffers: int = 32, max_expansions: int = 500_000,
          start: Assignment | None = None) -> Assignment:
    """An assignment with the minimum arena size.

    When greedy-by-size already reaches the max-live lower bound it is returned at once (it is
    optimal, whatever the number of buffers). Otherwise a search runs, which raises ValueError
    with more than ``max_buffers`` nonzero buffers or after ``max_expansions`` search nodes.
    ``start`` may pass the greedy-by-size assignment if it is already known.
    """
    lower = max(live_bytes(buffers), default=0)
    best = greedy_by_size(buffers) if start is None else start
    if best.arena == lower:
        return best
    ids = [i for i, b in enumerate(buffers) if b.size]
    if len(ids) > max_buffers:
        raise ValueError(f"exact: {len(ids)} buffers is more than max_buffers={max_buffers} and greedy-by-size "
                         f"({best.arena} bytes) does not reach the lower bound ({lower} bytes); "
                         "use greedy_by_size for graphs of this size")
    return _Search([buffers[i] for i in ids], lower, best.arena, max_expansions).run(ids, best, len(buffers))


class _Search:
    def __init__(self, buffers: list[Buffer], lower: int, upper: int, max_expansions: int):
        self.sizes = [b.size for b in buffers]
        self.overlap = [sum(1 << j for j, c in enumerate(buffers) if j != i and c.start <= b.end and b.start <= c.end)
                        for i, b in enumerate(buffers)]
        points = sorted({b.start for b in buffers})  # the live bytes peak at some buffer's start
        self.points_of = [[p for p, t in enumerate(points) if b.start <= t <= b.end] for b in buffers]
        self.remaining = [sum(b.size for b in buffers if b.start <= t <= b.end) for t in points]
        self.offsets = [0] * len(buffers)
        self.lower, self.best = lower, upper
        self.best_offsets: list[int] | None = None
        self.expansions, self.max_expansions = 0, max_expansions

    def run(self, ids: list[int], greedy: Assignment, n: int) -> Assignment:
        self._search(0, -1, -1, 0)
        if self.best_offsets is None:
            return greedy
        offsets = [0] * n
        for local, i in enumerate(ids):
            offsets[i] = self.best_offsets[local]
        return Assignment(offsets, self.best)

    def _lowest_fit(self, a: int, placed: int) -> int:
        mask, spans = self.overlap[a] & placed, []
        while mask:
            low_bit = mask & -mask
            j = low_bit.bit_length() - 1
            spans.append((self.offsets[j], self.offsets[j] + self.sizes[j]))
            mask ^= low_bit
        spans.sort()
        position = 0
        for low, high in spans:
            if low >= position + self.sizes[a]:
                break
            position = max(position, high)
        return position

    def _still_needed(self, placed: int, last_offset: int) -> int:
        """Bytes above ``last_offset`` needed at the worst step: the parts of placed buffers reaching
        above it plus the buffers still to place (all of which go at or above it)."""
        needed = list(self.remaining)
        mask = placed
        while mask:
            low_bit = mask & -mask
            j = low_bit.bit_length() - 1
            mask ^= low_bit
            above = self.offsets[j] + self.sizes[j] - last_offset
            if above > 0:
                for p in self.points_of[j]:
                    needed[p] += above
        return max(needed)

    def _search(self, placed: int, last_offset: int, last_id: int, top: int) -> None:
        self.expansions += 1
        if self.expansions > self.max_expansions:
            raise ValueError(f"exact: search stopped after max_expansions={self.max_expansions} nodes "
                             f"(best arena so far {self.best} bytes, lower bound {self.lower} bytes)")
        n = len(self.sizes)
        if placed == (1 << n) - 1:
            if top < self.best:
                self.best, self.best_offsets = top, list(self.offsets)
            return
        if max(top, last_offset + self._still_needed(placed, last_offset)) >= self.best:
            return
        candidates = []
        for a in range(n):
            if placed >> a & 1:
                continue
            offset = self._lowest_fit(a, placed)
            if max(offset, last_offset) + self.sizes[a] >= self.best:
                return  # a's offset never decreases as more buffers are placed
            if offset + self.sizes[a] <= last_offset:
                return  # later buffers all sit above last_offset: a keeps fitting below it, never canonical
            if (offset, a) > (last_offset, last_id):
                candidates.append((offset, -self.sizes[a], a))
        candidates.sort()
        for offset, _, a in candidates:
            size = self.sizes[a]
            self.offsets[a] = offset
            for p in self.points_of[a]:
                self.remaining[p] -= size
            self._search(placed | 1 << a, offset, a, max(top, offset + size))
            for p in self.points_of[a]:
                self.remaining[p] += size
            if self.best == self.lower:
                return
