"""Samplers: iterables of sample indices (or of lists of indices, for BatchSampler)."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import numpy as np

from .. import random as _random

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "BatchSampler", "FilterSampler", "IntervalSampler"]

LAST_BATCH_MODES = ("keep", "discard", "rollover")


def check_count(owner: str, name: str, value: Any, minimum: int = 0) -> int:
    """``value`` as an int >= ``minimum``, or ValueError naming ``owner`` and the argument."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{owner}: {name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


class Sampler:
    """Base class: ``__iter__`` yields indices, ``__len__`` says how many."""

    def __iter__(self) -> Iterator:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError


class SequentialSampler(Sampler):
    """Yields ``start, start + 1, ..., start + length - 1``."""

    def __init__(self, length: int, start: int = 0):
        self._length = check_count("SequentialSampler", "length", length)
        self._start = check_count("SequentialSampler", "start", start)

    def __iter__(self) -> Iterator[int]:
        return iter(range(self._start, self._start + self._length))

    def __len__(self) -> int:
        return self._length


class RandomSampler(Sampler):
    """Yields a fresh permutation of ``range(length)`` on every iteration.

    Each iteration draws its permutation from ``hybrid.random.numpy_rng()``, so the
    order is reproducible after ``hybrid.random.seed(n)``.
    """

    def __init__(self, length: int):
        self._length = check_count("RandomSampler", "length", length)

    def __iter__(self) -> Iterator[int]:
        order = _random.numpy_rng().permutation(self._length)
        return iter(order.tolist())

    def __len__(self) -> int:
        return self._length


class FilterSampler(Sampler):
    """Indices ``i`` of ``dataset`` for which ``fn(dataset[i])`` is true (evaluated once, here)."""

    def __init__(self, fn: Callable[[Any], bool], dataset: Any):
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self) -> Iterator[int]:
        return iter(self._indices)

    def __len__(self) -> int:
        return len(self._indices)


class IntervalSampler(Sampler):
    """Every ``interval``-th index of ``range(length)``.

    With ``rollover=True`` the walk restarts from 1, 2, ... until every index was
    visited: ``IntervalSampler(7, 3)`` yields ``0 3 6 1 4 2 5``; with
    ``rollover=False`` only the first pass ``0 3 6``.
    """

    def __init__(self, length: int, interval: int, rollover: bool = True):
        self._length = check_count("IntervalSampler", "length", length)
        self._interval = check_count("IntervalSampler", "interval", interval, minimum=1)
        if self._interval > self._length:
            raise ValueError(f"IntervalSampler: interval must not exceed length, got interval="
                             f"{self._interval} and length={self._length}")
        self._rollover = bool(rollover)

    def __iter__(self) -> Iterator[int]:
        offsets = range(self._interval) if self._rollover else range(1)
        for offset in offsets:
            yield from range(offset, self._length, self._interval)

    def __len__(self) -> int:
        return self._length if self._rollover else -(-self._length // self._interval)


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    ``last_batch`` says what happens to a final, incomplete batch: ``'keep'``
    yields it, ``'discard'`` drops it, ``'rollover'`` keeps its indices and puts
    them at the front of the next iteration's first batch.
    """

    def __init__(self, sampler: Any, batch_size: int, last_batch: str = "keep"):
        self._sampler = sampler
        self._batch_size = check_count("BatchSampler", "batch_size", batch_size, minimum=1)
        if last_batch not in LAST_BATCH_MODES:
            raise ValueError(f"BatchSampler: last_batch must be one of {LAST_BATCH_MODES}, got {last_batch!r}")
        self._last_batch = last_batch
        self._carried: list = []

    def __iter__(self) -> Iterator[list]:
        batch, self._carried = self._carried, []
        for index in self._sampler:
            batch.append(index)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if not batch:
            return
        if self._last_batch == "keep":
            yield batch
        elif self._last_batch == "rollover":
            self._carried = batch

    def __len__(self) -> int:
        total, size = len(self._sampler), self._batch_size
        if self._last_batch == "keep":
            return -(-total // size)
        if self._last_batch == "discard":
            return total // size
        return (total + len(self._carried)) // size
