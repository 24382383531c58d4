"""``mxnet.gluon.data.dataloader``: the loader and the Gluon 1.x helpers that library code imports from this
module by name (``default_batchify_fn``, ``default_mp_batchify_fn``, ``_MultiWorkerIter``, ``_worker_fn``).

Here the batchify functions follow MXNet 1.x: they give the alias's arrays (``mx.nd`` NDArrays, or
``mx.np`` ndarrays after ``npx.set_np()``), where :mod:`hybrid.data.batchify` gives NumPy arrays.
"""
from __future__ import annotations

import io
import multiprocessing
import multiprocessing.pool
import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable, Iterator

import numpy as np

from .... import data as _data
from ...handle import NDArray, ndarray, wrap

__all__ = ["DataLoader", "default_batchify_fn", "default_mp_batchify_fn"]

_worker_dataset: Any = None


class DataLoader(_data.DataLoader):
    """:class:`hybrid.data.DataLoader` whose batches hold the alias's arrays: ``mx.np`` ndarrays after
    ``npx.set_np()``, else ``mx.nd`` NDArrays, as MXNet's loader gives."""

    def __iter__(self) -> Iterator[Any]:
        from ... import numpy_extension
        kind = ndarray if numpy_extension.is_np_array() else NDArray
        for batch in super().__iter__():
            yield wrap(batch, kind)


def _array_module() -> Any:
    from ... import numpy as mx_np
    from ... import numpy_extension
    from ...ndarray import array, stack
    if numpy_extension.is_np_array():
        return mx_np.array, lambda items: mx_np.stack(items)
    return array, lambda items: stack(*items)


def default_batchify_fn(data: list) -> Any:
    """MXNet 1.x's collation: arrays are stacked on a new first axis, tuples field by field (a list of
    batches), anything else goes through ``np.asarray`` into one array of its dtype."""
    array, stack = _array_module()
    if isinstance(data[0], NDArray):
        return stack(data)
    if isinstance(data[0], tuple):
        return [default_batchify_fn(list(field)) for field in zip(*data)]
    values = np.asarray(data)
    return array(values, dtype=values.dtype)


# MXNet's variant stacks into shared CPU memory for worker processes; a batch is one array either way.
default_mp_batchify_fn = default_batchify_fn


def _worker_initializer(dataset: Any) -> None:
    global _worker_dataset
    _worker_dataset = dataset


def _worker_fn(samples: Any, batchify_fn: Callable, dataset: Any = None) -> bytes:
    """Makes one batch in a worker process from the dataset that worker holds (``_worker_initializer``)
    and returns it pickled."""
    batch = batchify_fn([_worker_dataset[i] for i in samples])
    buf = io.BytesIO()
    ForkingPickler(buf, pickle.HIGHEST_PROTOCOL).dump(batch)
    return buf.getvalue()


class _MultiWorkerIter:
    """Gluon 1.x's iterator over batches made by ``worker_pool`` (a ``multiprocessing`` pool): each batch
    of ``batch_sampler`` goes to ``worker_pool.apply_async(worker_fn, (indices, batchify_fn, dataset))``,
    ``prefetch`` of them ahead, and comes back in sampler order. ``worker_fn`` returns the batch pickled
    when ``dataset`` is None (as ``_worker_fn`` does), else the batch itself. Subclasses (GluonCV's) override
    ``_push_next``."""

    def __init__(self, worker_pool: Any, batchify_fn: Callable, batch_sampler: Any, pin_memory: bool = False,
                 pin_device_id: int = 0, worker_fn: Callable = _worker_fn, prefetch: int = 0, dataset: Any = None,
                 data_loader: Any = None, timeout: float = 120):
        self._worker_pool = worker_pool
        self._batchify_fn = batchify_fn
        self._batch_sampler = batch_sampler
        self._data_buffer: dict[int, Any] = {}
        self._rcvd_idx = 0
        self._sent_idx = 0
        self._iter = iter(batch_sampler)
        self._worker_fn = worker_fn
        self._pin_memory = pin_memory
        self._pin_device_id = pin_device_id
        self._dataset = dataset
        self._data_loader = data_loader
        self._timeout = timeout
        for _ in range(prefetch):
            self._push_next()

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def _push_next(self) -> None:
        indices = next(self._iter, None)
        if indices is None:
            return
        self._data_buffer[self._sent_idx] = self._worker_pool.apply_async(
            self._worker_fn, (indices, self._batchify_fn, self._dataset))
        self._sent_idx += 1

    def __next__(self) -> Any:
        self._push_next()
        if self._rcvd_idx == self._sent_idx:
            raise StopIteration
        pending = self._data_buffer.pop(self._rcvd_idx)
        try:
            made = pending.get(self._timeout)
        except multiprocessing.TimeoutError:
            raise
        except Exception:
            self._worker_pool.terminate()
            raise
        self._rcvd_idx += 1
        return pickle.loads(made) if self._dataset is None else made

    next = __next__

    def __iter__(self) -> "_MultiWorkerIter":
        return self
