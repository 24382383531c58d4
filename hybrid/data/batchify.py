"""Batchify functions: turn a list of samples into one batch of NumPy arrays.

They run wherever the batch is made (main process, worker thread or worker
process), so they use NumPy only; DataLoader converts the result to JAX arrays.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

__all__ = ["default_batchify_fn", "Stack", "Pad", "Group", "AsList"]


def _stack(samples: Sequence[Any], dtype: Any, who: str) -> np.ndarray:
    arrays = [np.asarray(s) for s in samples]
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"{who}: cannot stack samples of different shapes {sorted(shapes)}; "
                         "pad them (batchify.Pad) or pass a custom batchify_fn")
    return np.stack(arrays).astype(dtype, copy=False) if dtype is not None else np.stack(arrays)


def default_batchify_fn(samples: Sequence[Any]) -> Any:
    """Stacks samples along a new first axis; tuple samples are stacked field by field.

    ``[(img0, 3), (img1, 7)]`` gives ``(array of shape (2, *img.shape), array([3, 7]))``.
    Raises ValueError when samples (or fields) have different shapes.
    """
    if len(samples) == 0:
        raise ValueError("default_batchify_fn: got an empty list of samples")
    if isinstance(samples[0], tuple):
        return tuple(default_batchify_fn(list(field)) for field in zip(*samples))
    return _stack(samples, None, "default_batchify_fn")


class Stack:
    """Stacks samples (arrays or numbers of one shape) along a new first axis, cast to ``dtype``."""

    def __init__(self, dtype: Any = None):
        self._dtype = dtype

    def __call__(self, samples: Sequence[Any]) -> np.ndarray:
        return _stack(samples, self._dtype, "Stack")


class Pad:
    """Pads samples with ``val`` along ``axis`` to the longest one (rounded up to a multiple
    of ``round_to``) and stacks them; the result has shape ``(batch, *padded_shape)``.

    All other axes must agree; raises ValueError otherwise.
    """

    def __init__(self, axis: int = 0, val: Any = 0, dtype: Any = None, round_to: int | None = None):
        self._axis, self._val, self._dtype, self._round_to = axis, val, dtype, round_to

    def __call__(self, samples: Sequence[Any]) -> np.ndarray:
        arrays = [np.asarray(s) for s in samples]
        axis = self._axis % arrays[0].ndim
        target = max(a.shape[axis] for a in arrays)
        if self._round_to:
            target = -(-target // self._round_to) * self._round_to
        padded = []
        for a in arrays:
            widths = [(0, 0)] * a.ndim
            widths[axis] = (0, target - a.shape[axis])
            padded.append(np.pad(a, widths, constant_values=self._val))
        return _stack(padded, self._dtype, "Pad")


class Group:
    """Applies ``fns[i]`` to field ``i`` of tuple samples: ``Group(Pad(), Stack())``."""

    def __init__(self, *fns: Callable):
        if len(fns) == 1 and isinstance(fns[0], (list, tuple)):
            fns = tuple(fns[0])
        self._fns = fns

    def __call__(self, samples: Sequence[tuple]) -> tuple:
        if len(samples[0]) != len(self._fns):
            raise ValueError(f"Group: samples have {len(samples[0])} fields but {len(self._fns)} "
                             "batchify functions were given")
        return tuple(fn(list(field)) for fn, field in zip(self._fns, zip(*samples)))


class AsList:
    """Returns the samples as a plain list (for fields that cannot be stacked)."""

    def __call__(self, samples: Sequence[Any]) -> list:
        return list(samples)
