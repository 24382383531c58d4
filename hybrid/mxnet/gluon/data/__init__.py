"""``mxnet.gluon.data``: hybrid's datasets, samplers and loaders (:mod:`hybrid.data`), whose
:class:`DataLoader` yields the alias's arrays: ``mx.np`` ndarrays after ``npx.set_np()``, else ``mx.nd``
NDArrays, as MXNet's loader does."""
from __future__ import annotations

from typing import Any, Iterator

from .... import data as _data
from ....data import (ArrayDataset, BatchSampler, Dataset, FilterSampler, IntervalSampler, RandomSampler,
                      RecordFileDataset, Sampler, SequentialSampler, SimpleDataset, WorkerError, batchify,
                      default_batchify_fn, prefetch_to_device, transform_rng, vision)
from ....data import dataset, sampler  # noqa: F401  (mxnet.gluon.data.dataset, ...)
from ...handle import NDArray, ndarray, wrap

__all__ = list(_data.__all__)


class DataLoader(_data.DataLoader):
    """:class:`hybrid.data.DataLoader` whose batches hold the alias's arrays (see the module docstring)."""

    def __iter__(self) -> Iterator[Any]:
        from ... import numpy_extension
        kind = ndarray if numpy_extension.is_np_array() else NDArray
        for batch in super().__iter__():
            yield wrap(batch, kind)


__all__ += ["ArrayDataset", "BatchSampler", "Dataset", "FilterSampler", "IntervalSampler", "RandomSampler",
            "RecordFileDataset", "Sampler", "SequentialSampler", "SimpleDataset", "WorkerError", "batchify",
            "default_batchify_fn", "prefetch_to_device", "transform_rng", "vision"]
__all__ = sorted(set(__all__))

from . import dataloader  # noqa: E402,F401  (Gluon 1.x's module of that name; it imports DataLoader from here)
