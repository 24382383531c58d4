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
    """Pads every sample with ``val`` to the largest size on EVERY axis (each rounded up to a
    multiple of ``round_to``) and stacks them: the result has shape ``(batch, *max_shape)``,
    sample ``i`` in its leading corner (Gluon 2.0's ``batchify.Pad``).

    ``dtype`` defaults to the first sample's. ``use_shared_mem`` is accepted for Gluon code and
    ignored (batches are NumPy arrays); so is ``axis``, kept for older hybrid code. Raises
    ValueError when samples differ in rank or the list is empty.
    """

    def __init__(self, val: Any = None, dtype: Any = None, round_to: int | None = None,
                 use_shared_mem: bool = False, *, axis: int | None = None):
        self._val = 0 if val is None else val
        self._dtype, self._round_to = dtype, round_to

    def __call__(self, samples: Sequence[Any]) -> np.ndarray:
        if len(samples) == 0:
            raise ValueError("Pad: got an empty list of samples")
        arrays = [np.asarray(s) for s in samples]
        ranks = {a.ndim for a in arrays}
        if len(ranks) > 1:
            raise ValueError(f"Pad: samples have different ranks {sorted(ranks)}; every sample needs the same "
                             "number of axes")
        shape = [max(a.shape[k] for a in arrays) for k in range(arrays[0].ndim)]
        if self._round_to:
            shape = [-(-n // self._round_to) * self._round_to for n in shape]
        dtype = self._dtype if self._dtype is not None else arrays[0].dtype
        out = np.full((len(arrays), *shape), self._val, dtype=dtype)
        for i, a in enumerate(arrays):
            out[(i, *(slice(0, n) for n in a.shape))] = a
        return out


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
