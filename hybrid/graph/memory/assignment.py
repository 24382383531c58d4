"""Offsets for buffers in one arena, and a checker for any such assignment.

Buffers are :class:`~hybrid.graph.memory.liveness.Buffer` triples ``(size, start, end)``.
Two buffers *conflict* when their step intervals intersect and their byte ranges
``[offset, offset + size)`` intersect.  Every strategy returns an :class:`Assignment`
with one offset per buffer (zero-size buffers get offset 0 and are ignored) and the
arena size ``max(offset + size)``.

- :func:`greedy_by_size`: Pisarchyk & Lee (2020), "Efficient Memory Management for Deep
  Neural Net Inference": largest buffer first, each put at the start of the smallest gap
  between the already placed buffers it overlaps in time that can hold it, else on top of
  them.
- :func:`shared_objects`: the pooling of MXNet's planner and memonger: in order of
  definition, each buffer takes the best-fitting free object of a pool (growing the largest
  free one if none is big enough, or adding one); the arena is the sum of the objects' sizes.
- the exact solver lives in :mod:`hybrid.graph.memory.exact`.
"""
from __future__ import annotations

import bisect
import heapq
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from .liveness import Buffer, live_bytes
from ...errors import AssignmentError  # noqa: F401 (defined with the other errors)

__all__ = ["Assignment", "AssignmentError", "greedy_by_size", "shared_objects", "check_assignment", "arena_size"]


@dataclass(frozen=True)
class Assignment:
    """``offsets[i]`` is the byte offset of buffer ``i``; ``arena`` the bytes the arena needs."""

    offsets: list[int]
    arena: int


def arena_size(buffers: Sequence[Buffer], offsets: Sequence[int]) -> int:
    """``max(offset + size)`` over the nonzero buffers (0 when there are none)."""
    return max((o + b.size for b, o in zip(buffers, offsets) if b.size), default=0)


def check_assignment(buffers: Sequence[Buffer], offsets: Sequence[int]) -> None:
    """Raise AssignmentError naming the first two buffers that are live together and overlap in bytes.

    A sweep over steps keeps the live buffers sorted by offset; since they never overlap
    one another, a new buffer can only collide with its neighbours in that order.
    O(n log n) comparisons.
    """
    if len(offsets) != len(buffers):
        raise AssignmentError(f"{len(offsets)} offsets for {len(buffers)} buffers")
    order = sorted((b.start, i) for i, b in enumerate(buffers) if b.size)
    for _, i in order:
        if offsets[i] < 0:
            raise AssignmentError(f"buffer {i} has a negative offset {offsets[i]}")
        if buffers[i].end < buffers[i].start:
            raise AssignmentError(f"buffer {i} ends (step {buffers[i].end}) before it starts "
                                  f"(step {buffers[i].start})")
    live_offsets: list[int] = []
    live_ids: list[int] = []
    expiry: list[tuple[int, int]] = []
    for start, i in order:
        while expiry and expiry[0][0] < start:
            _, ended = heapq.heappop(expiry)
            k = bisect.bisect_left(live_offsets, offsets[ended])
            while live_ids[k] != ended:
                k += 1
            del live_offsets[k], live_ids[k]
        low, high = offsets[i], offsets[i] + buffers[i].size
        k = bisect.bisect_right(live_offsets, low)
        for j in (live_ids[k - 1] if k else None, live_ids[k] if k < len(live_ids) else None):
            if j is not None and offsets[j] < high and low < offsets[j] + buffers[j].size:
                a, b = buffers[j], buffers[i]
                raise AssignmentError(
                    f"buffers {j} (bytes {offsets[j]}-{offsets[j] + a.size}, steps {a.start}-{a.end}) and {i} "
                    f"(bytes {low}-{high}, steps {b.start}-{b.end}) are live together at step "
                    f"{max(a.start, b.start)} and overlap")
        live_offsets.insert(k, low)
        live_ids.insert(k, i)
        heapq.heappush(expiry, (buffers[i].end, i))


def greedy_by_size(buffers: Sequence[Buffer]) -> Assignment:
    """Greedy-by-size offsets with best-fit gaps (Pisarchyk & Lee 2020).

    Buffers are placed largest first. For each, the placed buffers overlapping it in time are
    taken in order of offset; the gaps between them (and below the lowest) that can hold it are
    candidates and the smallest wins (ties: lowest offset); with no fitting gap it goes on top of
    them. Equal sizes are taken longer-lived first (then by start); only if that leaves the arena
    above the max-live bound, the pass is repeated taking them by start, and the smaller arena wins.
    """
    bound = max(live_bytes(buffers), default=0)
    longest_first = _greedy(buffers, lambda b: (-b.size, b.start - b.end, b.start))
    if longest_first.arena == bound:
        return longest_first
    by_start = _greedy(buffers, lambda b: (-b.size, b.start))
    return by_start if by_start.arena < longest_first.arena else longest_first


def _greedy(buffers: Sequence[Buffer], key: Callable[[Buffer], tuple]) -> Assignment:
    """One greedy-by-size pass in the order of ``key`` (ties: index). Placed buffers are kept sorted
    by offset in arrays, so each placement is a few vectorised scans and no sort."""
    n = len(buffers)
    offsets = [0] * n
    order = sorted((i for i in range(n) if buffers[i].size), key=lambda i: (*key(buffers[i]), i))
    placed = np.empty((4, len(order)), np.int64)  # rows: offset, top, start, end; columns sorted by offset
    arena = 0
    for m, i in enumerate(order):
        size, start, end = buffers[i]
        offset = 0
        hits = np.flatnonzero((placed[2, :m] <= end) & (placed[3, :m] >= start))
        if hits.size:
            lows = placed[0, hits]
            reach = np.maximum.accumulate(placed[1, hits])
            gaps = lows[1:] - reach[:-1]
            fitting = np.flatnonzero(gaps >= size)
            best = int(lows[0]) if lows[0] >= size else None
            if fitting.size:
                j = fitting[np.argmin(gaps[fitting])]
                if best is None or gaps[j] < best:
                    offset = int(reach[j])
            elif best is None:
                offset = int(reach[-1])
        offsets[i] = offset
        k = int(np.searchsorted(placed[0, :m], offset))
        placed[:, k + 1:m + 1] = placed[:, k:m]
        placed[:, k] = (offset, offset + size, start, end)
        arena = max(arena, offset + size)
    return Assignment(offsets, arena)


def shared_objects(buffers: Sequence[Buffer]) -> Assignment:
    """Shared-object pooling (MXNet's storage planner, memonger).

    Buffers are taken in order of their start step (ties: index). An object is freed after
    the last step of the buffer holding it. A new buffer takes the smallest free object that
    is big enough; otherwise it grows the largest free object to its size; otherwise it adds
    a new object. The objects are laid out one after another, so the arena is the sum of
    their final sizes.
    """
    n = len(buffers)
    object_of = [0] * n
    object_sizes: list[int] = []
    free: list[tuple[int, int]] = []  # (size, object), sorted
    busy: list[tuple[int, int]] = []  # heap of (last step, object)
    for i in sorted(range(n), key=lambda i: (buffers[i].start, i)):
        size, start, end = buffers[i]
        if not size:
            continue
        while busy and busy[0][0] < start:
            _, obj = heapq.heappop(busy)
            bisect.insort(free, (object_sizes[obj], obj))
        k = bisect.bisect_left(free, (size, -1))
        if k < len(free):
            _, obj = free.pop(k)
        elif free:
            _, obj = free.pop()
            object_sizes[obj] = size
        else:
            obj = len(object_sizes)
            object_sizes.append(size)
        object_of[i] = obj
        heapq.heappush(busy, (end, obj))
    starts = np.concatenate(([0], np.cumsum(object_sizes, dtype=np.int64))).tolist()
    offsets = [starts[object_of[i]] if buffers[i].size else 0 for i in range(n)]
    return Assignment(offsets, int(starts[-1]))
