"""``mxnet.gluon.data``: hybrid's datasets, samplers and loaders (:mod:`hybrid.data`), whose
:class:`DataLoader` yields the alias's arrays: ``mx.np`` ndarrays after ``npx.set_np()``, else ``mx.nd``
NDArrays, as MXNet's loader does."""
from __future__ import annotations

from .... import data as _data
from ....data import (ArrayDataset, BatchSampler, Dataset, FilterSampler, IntervalSampler, RandomSampler,
                      RecordFileDataset, Sampler, SequentialSampler, SimpleDataset, WorkerError, batchify,
                      default_batchify_fn, prefetch_to_device, transform_rng, vision)
from ....data import dataset, sampler  # noqa: F401  (mxnet.gluon.data.dataset, ...)
from . import dataloader  # noqa: F401  (Gluon 1.x's module of that name)
from .dataloader import DataLoader  # noqa: F401  (the alias's, listed in __all__ as hybrid.data's is)

__all__ = list(_data.__all__)


__all__ += ["ArrayDataset", "BatchSampler", "Dataset", "FilterSampler", "IntervalSampler", "RandomSampler",
            "RecordFileDataset", "Sampler", "SequentialSampler", "SimpleDataset", "WorkerError", "batchify",
            "default_batchify_fn", "prefetch_to_device", "transform_rng", "vision"]
__all__ = sorted(set(__all__))
