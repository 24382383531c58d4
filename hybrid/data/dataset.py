"""Datasets: indexable collections of samples, and lazy views over them."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from .sampler import FilterSampler, Sampler, SequentialSampler, check_count

__all__ = ["Dataset", "SimpleDataset", "ArrayDataset"]


class Dataset:
    """Base class: subclasses implement ``__getitem__(idx)`` and ``__len__()``.

    A sample is any picklable object, usually a NumPy array or a tuple such as
    ``(image, label)``. The methods below return new datasets and leave this one
    unchanged.
    """

    def __getitem__(self, idx: int) -> Any:
        raise NotImplementedError

    def __len__(self) -> int:
        raise NotImplementedError

    def transform(self, fn: Callable, lazy: bool = True) -> "Dataset":
        """A dataset of ``fn(*sample)`` for tuple samples, else ``fn(sample)``.

        With ``lazy=False`` every sample is transformed now and kept in memory
        (use it only for deterministic ``fn``).
        """
        view = _TransformedDataset(self, fn)
        return view if lazy else SimpleDataset([view[i] for i in range(len(view))])

    def transform_first(self, fn: Callable, lazy: bool = True) -> "Dataset":
        """Like ``transform``, applying ``fn`` to the first element of each sample
        (e.g. the image of ``(image, label)``) and keeping the others."""
        return self.transform(_FirstElement(fn), lazy)

    def filter(self, fn: Callable[[Any], bool]) -> "Dataset":
        """The samples for which ``fn(sample)`` is true (``fn`` runs over all samples now)."""
        return self.sample(FilterSampler(fn, self))

    def take(self, count: int | None) -> "Dataset":
        """The first ``count`` samples (all of them when ``count`` is None or too large)."""
        if count is None or count > len(self):
            count = len(self)
        return self.sample(SequentialSampler(check_count("Dataset.take", "count", count)))

    def shard(self, num_shards: int, index: int) -> "Dataset":
        """Shard ``index`` of ``num_shards`` contiguous, near-equal parts.

        The first ``len(self) % num_shards`` shards hold one sample more.
        Raises ValueError unless ``0 <= index < num_shards``.
        """
        num_shards = check_count("Dataset.shard", "num_shards", num_shards, minimum=1)
        index = check_count("Dataset.shard", "index", index)
        if index >= num_shards:
            raise ValueError(f"Dataset.shard: index must be smaller than num_shards={num_shards}, got {index}")
        base, extra = divmod(len(self), num_shards)
        start = index * base + min(index, extra)
        return self.sample(SequentialSampler(base + (index < extra), start))

    def sample(self, sampler: Sampler) -> "Dataset":
        """The samples at the indices ``sampler`` yields, in that order (fixed at this call)."""
        return _IndexedDataset(self, list(sampler))


class SimpleDataset(Dataset):
    """Wraps anything with ``len`` and integer indexing (a list, a NumPy array, ...)."""

    def __init__(self, data: Any):
        self._data = data

    def __len__(self) -> int:
        return len(self._data)

    def __getitem__(self, idx: int) -> Any:
        return self._data[idx]


class ArrayDataset(Dataset):
    """Zips equally long arrays: sample ``i`` is ``(a[i], b[i], ...)``, or ``a[i]`` for one array.

    Array-likes that are not lists (JAX arrays included) are converted to NumPy
    here, so that worker processes never hold JAX arrays. Raises ValueError when
    no array is given or the lengths differ.
    """

    def __init__(self, *arrays: Any):
        if not arrays:
            raise ValueError("ArrayDataset: needs at least one array")
        self._arrays = [a if isinstance(a, (list, Dataset)) else np.asarray(a) for a in arrays]
        for position, array in enumerate(self._arrays):
            if isinstance(array, np.ndarray) and array.ndim == 0:
                raise ValueError(f"ArrayDataset: array {position} is a scalar; every array needs a first axis")
        lengths = [len(a) for a in self._arrays]
        if len(set(lengths)) > 1:
            raise ValueError(f"ArrayDataset: all arrays must have the same length, got lengths {lengths}")
        self._length = lengths[0]

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, idx: int) -> Any:
        if len(self._arrays) == 1:
            return self._arrays[0][idx]
        return tuple(a[idx] for a in self._arrays)


class _TransformedDataset(Dataset):
    def __init__(self, dataset: Dataset, fn: Callable):
        self._dataset, self._fn = dataset, fn

    def __len__(self) -> int:
        return len(self._dataset)

    def __getitem__(self, idx: int) -> Any:
        item = self._dataset[idx]
        return self._fn(*item) if isinstance(item, tuple) else self._fn(item)


class _FirstElement:
    """Applies ``fn`` to the first of several arguments (a class, so it pickles)."""

    def __init__(self, fn: Callable):
        self._fn = fn

    def __call__(self, first: Any, *rest: Any) -> Any:
        return (self._fn(first),) + rest if rest else self._fn(first)


class _IndexedDataset(Dataset):
    def __init__(self, dataset: Dataset, indices: list):
        self._dataset, self._indices = dataset, indices

    def __len__(self) -> int:
        return len(self._indices)

    def __getitem__(self, idx: int) -> Any:
        return self._dataset[self._indices[idx]]
