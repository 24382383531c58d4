"""Datasets, samplers and DataLoader (mirrors ``mxnet.gluon.data``).

    from hybrid import data
    loader = data.DataLoader(data.ArrayDataset(x, y), batch_size=32, shuffle=True, num_workers=2)
"""
from . import batchify, vision
from .batchify import default_batchify_fn
from .dataloader import DataLoader
from .dataset import ArrayDataset, Dataset, SimpleDataset
from .record_dataset import RecordFileDataset
from ._rng import transform_rng
from ._worker import WorkerError
from .prefetch import prefetch_to_device
from .sampler import (BatchSampler, FilterSampler, IntervalSampler, RandomSampler, Sampler,
                      SequentialSampler)

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset", "Sampler", "SequentialSampler", "RandomSampler",
           "BatchSampler", "FilterSampler", "IntervalSampler", "DataLoader", "batchify", "default_batchify_fn",
           "transform_rng", "vision", "WorkerError", "RecordFileDataset", "prefetch_to_device"]
