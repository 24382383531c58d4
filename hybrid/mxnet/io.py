"""``mxnet.io`` (``mx.io``): MXNet 1.x's data iterators, giving MXNet's batches, pads and orders.

An iterator yields :class:`DataBatch` es whose ``data`` and ``label`` are lists of ``mx.nd.NDArray`` handles.

- :class:`NDArrayIter` batches arrays held in memory (arrays, lists or dicts of them), with MXNet's
  ``last_batch_handle`` ('pad', 'discard', 'roll_over') and its shuffle, drawn from NumPy's global RNG
  (``np.random.shuffle``), so ``np.random.seed(s)`` gives MXNet's order;
- :class:`CSVIter` and :class:`MNISTIter` read files as MXNet's C++ iterators do: CSV numbers are parsed
  with dmlc-core's float parser (so the float32 values are MXNet's, which differ from correctly rounded ones
  in the last bit for about one number in twenty), ``round_batch`` wraps to the start and the next epoch goes
  on from there, and MNISTIter's shuffle is the ``std::shuffle`` over ``std::mt19937(seed)`` MXNet does;
- :class:`ResizeIter` and :class:`PrefetchingIter` wrap other iterators.
- :class:`ImageRecordIter` (and MXNet's other names for it) decodes and augments the images of an image
  RecordIO file, with the machinery of :mod:`hybrid.mxnet.image_record_iter`.

CSVIter and MNISTIter read their whole file at construction (MXNet streams it; ImageRecordIter reads the
records of each batch as it decodes them); the file iterators' batches are fresh arrays (MXNet's are buffers
that a later batch may overwrite).
"""
from __future__ import annotations

import collections
import concurrent.futures
import gzip
import logging
import os
import re
import warnings
from typing import Any, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .handle import NDArray
from .image_record_iter import RecordBatches

__all__ = ["DataDesc", "DataBatch", "DataIter", "ResizeIter", "PrefetchingIter", "NDArrayIter", "MXDataIter",
           "CSVIter", "MNISTIter", "ImageRecordIter", "ImageRecordUInt8Iter", "ImageRecordInt8Iter",
           "ImageRecordIter_v1", "ImageRecordUInt8Iter_v1"]

_LOG = logging.getLogger(__name__)


def _handle(values: np.ndarray) -> NDArray:
    """A new handle holding a copy of ``values`` (the buffers here are reused, JAX may alias host memory)."""
    return NDArray(jnp.array(values))


# -- descriptions and batches --------------------------------------------------------------------------------
class DataDesc(collections.namedtuple("DataDesc", ["name", "shape"])):
    """The name and shape of one input (a 2-tuple, as MXNet's), with ``dtype`` and ``layout`` as attributes.

    ``layout`` names the axes ('NCHW', 'NTC', ...); its 'N' is the batch axis.
    """

    def __new__(cls, name: str, shape: Sequence[int], dtype: Any = np.float32, layout: str = "NCHW") -> DataDesc:
        desc = super().__new__(cls, name, shape)
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __getnewargs__(self) -> tuple:
        return (self.name, self.shape, self.dtype, self.layout)

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    def _replace(self, **fields: Any) -> DataDesc:
        values = {"name": self.name, "shape": self.shape, "dtype": self.dtype, "layout": self.layout, **fields}
        return DataDesc(**values)

    @staticmethod
    def get_batch_axis(layout: str | None) -> int:
        """The batch axis of ``layout``: the index of its 'N' (-1 if none), 0 for ``None``."""
        if layout is None:
            return 0
        return layout.find("N")

    @staticmethod
    def get_list(shapes: Sequence[tuple], types: Sequence[tuple] | None) -> list[DataDesc]:
        """DataDescs from ``[(name, shape)]`` and, optionally, ``[(name, dtype)]`` (float32 otherwise)."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        dtypes = dict(types)
        return [DataDesc(name, shape, dtypes[name]) for name, shape in shapes]


class DataBatch:
    """One batch: ``data`` and ``label`` are lists of NDArrays holding ``batch_size`` examples each.

    ``pad`` counts the examples at the end that only fill the batch (repeats, to be ignored in prediction);
    ``index`` holds the examples' indices where the iterator knows them. Raises TypeError when ``data`` or
    ``label`` is not a list or tuple.
    """

    def __init__(self, data: Sequence[Any] | None, label: Sequence[Any] | None = None, pad: int | None = None,
                 index: np.ndarray | None = None, bucket_key: Any = None,
                 provide_data: list[DataDesc] | None = None, provide_label: list[DataDesc] | None = None):
        for argument, value in (("data", data), ("label", label)):
            if value is not None and not isinstance(value, (list, tuple)):
                raise TypeError(f"DataBatch: {argument} must be a list of NDArrays, got {type(value).__name__} "
                                f"(write {argument}=[x])")
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index
        self.bucket_key = bucket_key
        self.provide_data = provide_data
        self.provide_label = provide_label

    def __str__(self) -> str:
        data_shapes = [d.shape for d in self.data]
        label_shapes = [lab.shape for lab in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data_shapes} label shapes: {label_shapes}"


class DataIter:
    """The base of MXNet's data iterators: a Python iterator of :class:`DataBatch` es.

    A subclass implements ``iter_next`` (move to the next batch, False at the end) and ``getdata``,
    ``getlabel``, ``getpad`` (and ``getindex``), or overrides ``next`` itself, and says what it yields with
    ``provide_data`` and ``provide_label`` (lists of :class:`DataDesc`). ``next`` raises StopIteration at the
    end of an epoch; ``reset`` starts the next one.
    """

    def __init__(self, batch_size: int = 0):
        self.batch_size = batch_size

    def __iter__(self) -> Iterator[DataBatch]:
        return self

    def reset(self) -> None:
        """Go back to the start of the data."""

    def next(self) -> DataBatch:
        """The next batch; raises StopIteration at the end of the data."""
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(), index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Move to the next batch; False when there is none."""
        return False

    def getdata(self) -> Any:
        """The data of the current batch (a list of NDArrays)."""
        return None

    def getlabel(self) -> Any:
        """The label of the current batch (a list of NDArrays)."""
        return None

    def getindex(self) -> np.ndarray | None:
        """The indices of the current batch's examples, or None."""
        return None

    def getpad(self) -> int | None:
        """The number of padding examples at the end of the current batch."""
        return None


# -- wrappers ------------------------------------------------------------------------------------------------
class _BatchHolder(DataIter):
    """An iterator whose ``iter_next`` sets ``current_batch``; the getters read it."""

    current_batch: Any = None

    def getdata(self) -> Any:
        return self.current_batch.data

    def getlabel(self) -> Any:
        return self.current_batch.label

    def getindex(self) -> np.ndarray | None:
        return self.current_batch.index

    def getpad(self) -> int | None:
        return self.current_batch.pad


class ResizeIter(_BatchHolder):
    """``data_iter`` resized to ``size`` batches an epoch: it restarts ``data_iter`` when that runs out, and
    ``reset`` resets it too unless ``reset_internal=False``."""

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True):
        super().__init__()
        if int(size) < 0:
            raise ValueError(f"ResizeIter: size must be a number of batches (>= 0), got {size}")
        self.data_iter = data_iter
        self.size = int(size)
        self.reset_internal = reset_internal
        self.cur = 0
        self.current_batch: DataBatch | None = None
        self.provide_data = data_iter.provide_data
        self.provide_label = data_iter.provide_label
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


def _fetch(data_iter: DataIter) -> DataBatch | None:
    try:
        return data_iter.next()
    except StopIteration:
        return None


def _renamed(descs: list, renames: dict | None, argument: str) -> list[DataDesc]:
    if renames is None:
        return list(descs)
    out = []
    for desc in descs:
        name, shape = desc[0], desc[1]
        if name not in renames:
            raise KeyError(f"PrefetchingIter: {argument} has no new name for {name!r} (it renames "
                           f"{sorted(renames)})")
        out.append(DataDesc(renames[name], shape, getattr(desc, "dtype", np.float32)))
    return out


class PrefetchingIter(_BatchHolder):
    """Reads the next batch of each of ``iters`` in a background thread while the current one is used.

    A batch joins the batches of all ``iters`` (their data lists, then their label lists; the pad and index of
    the first). ``rename_data``/``rename_label`` are one ``{old name: new name}`` dict per iterator, applied to
    ``provide_data``/``provide_label``. Raises ValueError when the iterators end at different batches or give
    different pads.
    """

    def __init__(self, iters: DataIter | list[DataIter], rename_data: list[dict] | None = None,
                 rename_label: list[dict] | None = None):
        super().__init__()
        if not isinstance(iters, list):
            iters = [iters]
        if not iters:
            raise ValueError("PrefetchingIter: iters is empty; give one DataIter or a list of them")
        for argument, renames in (("rename_data", rename_data), ("rename_label", rename_label)):
            if renames is not None and len(renames) != len(iters):
                raise ValueError(f"PrefetchingIter: {argument} needs one dict per iterator: {len(iters)} "
                                 f"iterators, {len(renames)} dicts")
        self.iters = iters
        self.n_iter = len(iters)
        self.rename_data = rename_data
        self.rename_label = rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch: DataBatch | None = None
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=self.n_iter,
                                                           thread_name_prefix="PrefetchingIter")
        self._pending = self._prefetch()

    def _prefetch(self) -> list[concurrent.futures.Future]:
        return [self._pool.submit(_fetch, data_iter) for data_iter in self.iters]

    def __del__(self) -> None:
        pool = getattr(self, "_pool", None)
        if pool is not None:
            pool.shutdown(wait=False)

    @property
    def provide_data(self) -> list[DataDesc]:
        renames = self.rename_data or [None] * self.n_iter
        return [d for r, i in zip(renames, self.iters) for d in _renamed(i.provide_data, r, "rename_data")]

    @property
    def provide_label(self) -> list[DataDesc]:
        renames = self.rename_label or [None] * self.n_iter
        return [d for r, i in zip(renames, self.iters) for d in _renamed(i.provide_label, r, "rename_label")]

    def reset(self) -> None:
        concurrent.futures.wait(self._pending)  # a fetch under way finishes before the iterators rewind
        for data_iter in self.iters:
            data_iter.reset()
        self._pending = self._prefetch()

    def iter_next(self) -> bool:
        batches = [future.result() for future in self._pending]
        ended = [batch is None for batch in batches]
        if any(ended):
            if not all(ended):
                raise ValueError(f"PrefetchingIter: the iterators ran out at different batches (iterators "
                                 f"{[i for i, e in enumerate(ended) if e]} ended, the others did not); give "
                                 f"iterators with the same number of batches")
            return False
        pads = [batch.pad for batch in batches]
        if any(pad != pads[0] for pad in pads):
            raise ValueError(f"PrefetchingIter: the iterators' batches have different pads {pads}; give "
                             f"iterators over the same number of examples")
        self.current_batch = DataBatch(sum((list(b.data) for b in batches), []),
                                       sum((list(b.label or []) for b in batches), []),
                                       batches[0].pad, batches[0].index,
                                       provide_data=self.provide_data, provide_label=self.provide_label)
        self._pending = self._prefetch()
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            return self.current_batch
        raise StopIteration


# -- NDArrayIter ---------------------------------------------------------------------------------------------
_LAST_BATCH = ("pad", "discard", "roll_over")


def _host_array(value: Any, key: str, argument: str) -> np.ndarray:
    """``value`` as the NumPy array MXNet's iterator holds: an NDArray (or JAX array) keeps its dtype, anything
    else becomes float32 (MXNet's ``nd.array``)."""
    if hasattr(value, "tocsr") or type(value).__name__ == "CSRNDArray":
        raise TypeError(f"NDArrayIter: {argument} {key!r} is sparse; sparse arrays are not supported, pass a "
                        f"dense array (x.toarray())")
    if isinstance(value, (NDArray, jax.Array)):
        return np.asarray(value)
    try:
        return np.asarray(value, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"NDArrayIter: {argument} {key!r} is a {type(value).__name__}, which does not convert to "
                        f"an array: give an NDArray, a numpy.ndarray, a list of them or a dict of them") from exc


def _named_arrays(value: Any, default_name: str, argument: str) -> list[tuple[str, np.ndarray]]:
    """MXNet's canonical form of ``data``/``label``: ``[(name, array)]`` sorted by name. One array is named
    ``default_name``; the arrays of a list of several are ``_0_<default_name>``, ``_1_...``."""
    if value is None:
        return []
    if isinstance(value, (np.ndarray, NDArray, jax.Array)):
        value = [value]
    if isinstance(value, (list, tuple)):
        if len(value) == 1:
            value = {default_name: value[0]}
        else:
            value = {f"_{i}_{default_name}": v for i, v in enumerate(value)}
    if not isinstance(value, dict):
        raise TypeError(f"NDArrayIter: {argument} must be an NDArray, a numpy.ndarray, a list of them or a dict "
                        f"of them, got {type(value).__name__}")
    return sorted((str(k), _host_array(v, str(k), argument)) for k, v in value.items())


class NDArrayIter(DataIter):
    """Batches of in-memory arrays, as MXNet's ``NDArrayIter``.

    ``data`` and ``label`` are arrays (NDArray, numpy.ndarray), lists or dicts of them (see ``provide_data``
    for the names); NDArrays keep their dtype, other arrays become float32, and shuffled data is float32 too,
    as in MXNet. Every array has the same number of examples along the layout's 'N' axis. The last, partial
    batch is, by ``last_batch_handle``: ``'pad'`` filled with examples from the start (``batch.pad`` counts
    them), ``'discard'`` dropped, ``'roll_over'`` dropped and its examples put first in the next epoch's first
    batch (whose ``pad`` is their number). ``shuffle=True`` permutes the examples at construction and at every
    ``reset`` with ``np.random.shuffle`` (NumPy's global RNG).

    Raises TypeError for data of the wrong type and ValueError for a bad ``batch_size``,
    ``last_batch_handle`` or ``layout``, an empty ``data``, or arrays with different numbers of examples.
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data", label_name: str = "softmax_label",
                 layout: str = "NCHW"):
        super().__init__(batch_size)
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"NDArrayIter: batch_size must be a positive int, got {batch_size!r}")
        if last_batch_handle not in _LAST_BATCH:
            raise ValueError(f"NDArrayIter: last_batch_handle must be one of {_LAST_BATCH}, got "
                             f"{last_batch_handle!r}")
        if not isinstance(layout, str) or "N" not in layout:
            raise ValueError(f"NDArrayIter: layout must name the batch axis with 'N' (e.g. 'NCHW', 'TNC'), got "
                             f"{layout!r}")
        self.layout = layout
        self._axis = layout.find("N")
        if data is None or (isinstance(data, (list, tuple, dict)) and len(data) == 0):
            raise ValueError("NDArrayIter: data is empty; give an array, a list of arrays or a dict of them")
        self._data = _named_arrays(data, data_name, "data")
        self._label = _named_arrays(label, label_name, "label")
        self.num_data = self._check_lengths()
        if last_batch_handle == "roll_over" and batch_size > self.num_data:
            raise ValueError(f"NDArrayIter: last_batch_handle='roll_over' needs batch_size <= the number of "
                             f"examples, got batch_size={batch_size} for {self.num_data} examples (MXNet yields "
                             f"no batch, then fails); use 'pad' or a smaller batch_size")
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.idx = np.arange(self.num_data)
        self.cursor = -self.batch_size
        self._cache_data: list[np.ndarray] | None = None
        self._cache_label: list[np.ndarray] | None = None
        self.reset()

    def _check_lengths(self) -> int:
        """The number of examples, checked equal across ``data`` and ``label``."""
        axis = self._axis
        counts = []
        for argument, arrays in (("data", self._data), ("label", self._label)):
            for name, array in arrays:
                if array.ndim <= axis:
                    raise ValueError(f"NDArrayIter: {argument} {name!r} has shape {array.shape}, which has no "
                                     f"batch axis {axis} (layout {self.layout!r})")
                counts.append((argument, name, array.shape[axis]))
        first = counts[0]
        for argument, name, count in counts[1:]:
            if count != first[2]:
                raise ValueError(f"NDArrayIter: {argument} {name!r} has {count} examples (axis {axis}) but "
                                 f"{first[0]} {first[1]!r} has {first[2]}; every data and label array needs the "
                                 f"same number of examples")
        return int(first[2])

    # -- what it yields ----------------------------------------------------------------------------------
    def _descs(self, arrays: list[tuple[str, np.ndarray]]) -> list[DataDesc]:
        axis = self._axis
        return [DataDesc(name, array.shape[:axis] + (self.batch_size,) + array.shape[axis + 1:], array.dtype.type,
                         layout=self.layout) for name, array in arrays]

    @property
    def provide_data(self) -> list[DataDesc]:
        """The name, batch shape, dtype and layout of each data array (sorted by name)."""
        return self._descs(self._data)

    @property
    def provide_label(self) -> list[DataDesc]:
        """The name, batch shape, dtype and layout of each label array (sorted by name)."""
        return self._descs(self._label)

    @property
    def data(self) -> list[tuple[str, NDArray]]:
        """``[(name, NDArray)]`` of the data, in the current (shuffled) order."""
        return [(name, _handle(array)) for name, array in self._data]

    @property
    def label(self) -> list[tuple[str, NDArray]]:
        """``[(name, NDArray)]`` of the label, in the current (shuffled) order."""
        return [(name, _handle(array)) for name, array in self._label]

    # -- epochs ------------------------------------------------------------------------------------------
    def _shuffle_data(self) -> None:
        # MXNet shuffles its index array in place (so the permutations compound) and re-gathers the current
        # arrays with it, through nd.array: the result is float32 whatever the dtype was
        np.random.shuffle(self.idx)
        self._data, self._label = self._gathered(self._data), self._gathered(self._label)

    def _gathered(self, arrays: list[tuple[str, np.ndarray]]) -> list[tuple[str, np.ndarray]]:
        return [(k, np.take(v, self.idx, axis=self._axis).astype(np.float32, copy=False)) for k, v in arrays]

    def hard_reset(self) -> None:
        """Start again from the first example, dropping the examples a 'roll_over' epoch carried over."""
        if self.shuffle:
            self._shuffle_data()
        self.cursor = -self.batch_size
        self._cache_data = None
        self._cache_label = None

    def reset(self) -> None:
        """Start the next epoch (reshuffled with ``shuffle``; after a 'roll_over' epoch, the examples carried
        over come first)."""
        if self.shuffle:
            self._shuffle_data()
        if self.last_batch_handle == "roll_over" and self.num_data - self.batch_size < self.cursor < self.num_data:
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        data, label = self._batch(self._data, self._cache_data), self._batch(self._label, self._cache_label)
        if data[0].shape[self._axis] != self.batch_size:  # a partial last batch: 'discard' or 'roll_over'
            self._cache_data, self._cache_label = data, label
            raise StopIteration
        return DataBatch(data=[_handle(d) for d in data], label=[_handle(lab) for lab in label],
                         pad=self.getpad(), index=None)

    def _take(self, arrays: list[tuple[str, np.ndarray]], start: int, stop: int) -> list[np.ndarray]:
        axis = self._axis
        return [array[(slice(None),) * axis + (slice(start, stop),)] for _, array in arrays]

    def _batch(self, arrays: list[tuple[str, np.ndarray]], cache: list[np.ndarray] | None) -> list[np.ndarray]:
        """The current batch of ``arrays`` as NumPy arrays."""
        n, size, cursor, axis = self.num_data, self.batch_size, self.cursor, self._axis
        if cursor >= n:
            raise ValueError("NDArrayIter: the epoch is over (the cursor is past the data); call reset()")
        if not arrays:
            return []
        if self.last_batch_handle == "roll_over" and -size < cursor < 0:
            if cache is None:
                raise ValueError("NDArrayIter: the epoch starts with carried-over examples but none were kept; "
                                 "call hard_reset()")
            rest = self._take(arrays, 0, cursor + size)
            return [np.concatenate([c, r], axis=axis) for c, r in zip(cache, rest)]
        if self.last_batch_handle == "pad" and cursor + size > n:
            fill = np.arange(cursor + size - n) % n  # repeats from the start (whole copies if the data is short)
            return [np.concatenate([array[(slice(None),) * axis + (slice(cursor, n),)],
                                    np.take(array, fill, axis=axis)], axis=axis) for _, array in arrays]
        return self._take(arrays, cursor, min(cursor + size, n))

    def getdata(self) -> list[NDArray]:
        return [_handle(d) for d in self._batch(self._data, self._cache_data)]

    def getlabel(self) -> list[NDArray]:
        return [_handle(lab) for lab in self._batch(self._label, self._cache_label)]

    def getpad(self) -> int:
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0


# -- file iterators ------------------------------------------------------------------------------------------
class MXDataIter(DataIter):
    """The base of the file iterators (MXNet's wrapper of its C++ iterators).

    The first batch is read at construction, to learn ``provide_data``/``provide_label`` (named
    ``data_name``/``label_name``) and ``batch_size``; ``getdata``/``getlabel`` give one NDArray each and
    ``getindex`` the examples' indices (uint64). A subclass implements ``_read`` and ``_rewind``.
    """

    def __init__(self, data_name: str = "data", label_name: str = "softmax_label"):
        super().__init__()
        self._current: tuple[np.ndarray, np.ndarray, int, np.ndarray] | None = None
        self.first_batch: DataBatch | None = None
        try:
            self.first_batch = self.next()
        except StopIteration:
            raise ValueError(f"{type(self).__name__}: the input holds no batch") from None
        data, label = self.first_batch.data[0], self.first_batch.label[0]
        self.provide_data = [DataDesc(data_name, data.shape, data.dtype)]
        self.provide_label = [DataDesc(label_name, label.shape, label.dtype)]
        self.batch_size = data.shape[0]

    def _read(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
        """The next batch as (data, label, pad, index), or None at the end of the epoch."""
        raise NotImplementedError

    def _rewind(self) -> None:
        """Start the next epoch."""
        raise NotImplementedError

    def reset(self) -> None:
        self.first_batch = None
        self._rewind()

    def next(self) -> DataBatch:
        if self.first_batch is not None:
            batch, self.first_batch = self.first_batch, None
            return batch
        if not self.iter_next():
            raise StopIteration
        return DataBatch(data=[self.getdata()], label=[self.getlabel()], pad=self.getpad(), index=self.getindex())

    def iter_next(self) -> bool:
        if self.first_batch is not None:  # the first batch, read at construction, is the current one
            self.first_batch = None
            return True
        self._current = self._read()
        return self._current is not None

    def _now(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray]:
        if self._current is None:
            raise ValueError(f"{type(self).__name__}: there is no current batch (the epoch is over); call reset()")
        return self._current

    def getdata(self) -> NDArray:
        return _handle(self._now()[0])

    def getlabel(self) -> NDArray:
        return _handle(self._now()[1])

    def getindex(self) -> np.ndarray:
        return self._now()[3].copy()

    def getpad(self) -> int:
        return self._now()[2]


def _check_batch_size(name: str, batch_size: Any) -> int:
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError(f"{name}: batch_size must be a positive int, got {batch_size!r}")
    return int(batch_size)


def _check_shape(name: str, argument: str, shape: Any) -> tuple[int, ...]:
    try:
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        raise ValueError(f"{name}: {argument} must be a tuple of ints, got {shape!r}") from None
    if not shape or any(d <= 0 for d in shape):
        raise ValueError(f"{name}: {argument} must be a non-empty tuple of positive ints, got {shape!r}")
    return shape


def _check_kwargs(name: str, kwargs: dict, ignored: tuple[str, ...]) -> None:
    unknown = sorted(set(kwargs) - set(ignored))
    if unknown:
        raise TypeError(f"{name}: unknown argument(s) {unknown} (of MXNet's other arguments, {list(ignored)} are "
                        f"accepted and ignored)")


# dmlc-core's number parsing, which MXNet's CSVIter reads fields with. A float: the digits before the point as a
# uint64, up to 19 digits after it as uint64 / 10**k in double, summed in float32, then scaled by a float32
# power of ten (an exponent past 38 is clipped). An integer: strtoll(field, base=0). A field is read from its
# start up to the first character that does not fit; a field where nothing is read is left out of its row.
# Each pattern matches one field with the comma after it (the last match of a line may be empty).
_FLOAT_FIELD = re.compile(r"([ \t\f]*)([+-]?)(?:(infinity|inf(?!i))|(nan)|(\d*)(?:(\.)(\d*))?(?:([eE])([+-]?)(\d*))?)"
                          r"[^,]*,?", re.IGNORECASE)
_INT_FIELD = re.compile(r"[ \t\v\f]*([+-]?)(0[xX](?=[0-9a-fA-F])[0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)?[^,]*,?")
_F32_MAX_SIGNIFICAND, _F32_MIN_SIGNIFICAND = np.float32(3.402823466), np.float32(1.175494351)


def _powers_of_ten() -> np.ndarray:
    """10**e for e in 0..38 as dmlc-core computes them: products of 1e8f and 10.0f in float32."""
    table = []
    for exponent in range(39):
        scale = np.float32(1.0)
        while exponent >= 8:
            scale, exponent = np.float32(scale * np.float32(1e8)), exponent - 8
        while exponent > 0:
            scale, exponent = np.float32(scale * np.float32(10.0)), exponent - 1
        table.append(scale)
    return np.array(table, np.float32)


_SCALES = _powers_of_ten()
_TENS = np.array([float(10 ** k) for k in range(20)])   # exact doubles
_U64 = 2 ** 64


def _read_floats(fields: list[tuple]) -> tuple[np.ndarray, np.ndarray]:
    """The float32 values of ``_FLOAT_FIELD`` matches, and which of them read anything."""
    if not fields:
        return np.zeros(0, np.float32), np.zeros(0, bool)
    _, sign, infinity, nan, whole, _, fraction, _, exponent_sign, exponent = zip(*fields)
    read = np.array([any(f[:6]) or bool(f[7]) for f in fields])
    value = np.array([int(w) % _U64 if len(w) > 19 else int(w) if w else 0 for w in whole], np.uint64)
    value = value.astype(np.float32)
    digits = [f[:19] for f in fraction]
    part = np.array([int(d) if d else 0 for d in digits], np.uint64).astype(np.float64) / \
        _TENS[np.array([len(d) for d in digits], np.int64)]
    value = value + part.astype(np.float32)
    power = np.array([min(int(x) % 2 ** 32, 38) if x else 0 for x in exponent])
    negative = np.array([s == "-" for s in exponent_sign])
    at_limit = power == 38
    value = np.where(at_limit & negative & (value < _F32_MIN_SIGNIFICAND), _F32_MIN_SIGNIFICAND, value)
    value = np.where(at_limit & ~negative & (value > _F32_MAX_SIGNIFICAND), _F32_MAX_SIGNIFICAND, value)
    with np.errstate(over="ignore"):  # dmlc-core overflows to inf silently
        value = np.where(negative, value / _SCALES[power], value * _SCALES[power]).astype(np.float32)
    value = np.where(np.array([bool(i) for i in infinity]), np.float32(np.inf), value)
    value = np.where(np.array([s == "-" for s in sign]), -value, value)
    value = np.where(np.array([bool(n) for n in nan]), np.float32(np.nan), value)
    return value.astype(np.float32), read


def _read_ints(fields: list[tuple], dtype: np.dtype) -> tuple[np.ndarray, np.ndarray]:
    """The values of ``_INT_FIELD`` matches (clipped to int64, then wrapped to ``dtype``), and which read any."""
    values, read = [], []
    low, high, span, half = -2 ** 63, 2 ** 63 - 1, 2 ** (8 * dtype.itemsize), 2 ** (8 * dtype.itemsize - 1)
    for sign, digits in fields:
        read.append(bool(digits))
        if not digits:
            values.append(0)
            continue
        base = 16 if digits[:2] in ("0x", "0X") else 8 if len(digits) > 1 and digits[0] == "0" else 10
        value = int(digits, base)
        value = max(low, min(high, -value if sign == "-" else value))
        values.append((value + half) % span - half)
    return np.array(values, dtype), np.array(read, bool)


# Files of plain numbers (what numpy, pandas and spreadsheets write) are read at C speed: a field of at most 15
# digits before and after the point has an exact double for both parts, so dmlc-core's arithmetic can be done on
# whole arrays; any other file takes the general path above, which gives the same values.
_PLAIN_FLOATS = re.compile(r"[+-]?\d{1,15}(?:\.\d{0,15})?(?:,[+-]?\d{1,15}(?:\.\d{0,15})?)*,?")
_PLAIN_INTS = re.compile(r"[+-]?(?:0|[1-9]\d{0,17})(?:,[+-]?(?:0|[1-9]\d{0,17}))*,?")


def _read_plain(lines: list[str], dtype: np.dtype) -> tuple[np.ndarray, list[int]] | None:
    """The numbers of ``lines`` and their count per line, when every line is plain numbers; else None."""
    plain = _PLAIN_FLOATS if dtype == np.float32 else _PLAIN_INTS
    if not all(plain.fullmatch(line) for line in lines):
        return None
    lines = [line[:-1] if line.endswith(",") else line for line in lines]
    counts = [line.count(",") + 1 for line in lines]
    flat = ",".join(lines)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy warns where it stops early: take the general path then
        try:
            if dtype != np.float32:
                values = np.fromstring(flat, np.int64, sep=",").astype(dtype)
            else:
                whole = np.fromstring(re.sub(r"\.\d*", "", flat), np.float64, sep=",")
                values = np.abs(whole).astype(np.float32)
                if "." in flat:
                    # each field's digits after the point as "0.<digits>" (an integer field stays as it is): its
                    # double is dmlc-core's uint64 digits / 10**k, the quotient of two exact doubles
                    fractions = np.fromstring(re.sub(r"[+-]?\d+\.", "0.", flat), np.float64, sep=",")
                    part = np.where((fractions >= 0) & (fractions < 1), fractions, 0.0)
                    values = values + part.astype(np.float32)
                values = np.where(np.signbit(whole), -values, values)
        except (ValueError, DeprecationWarning):
            return None
    return (values, counts) if len(values) == sum(counts) else None


def _csv_rows(path: str, dtype: np.dtype, argument: str) -> tuple[np.ndarray, np.ndarray]:
    """The numbers of the CSV file (or the files of the folder) ``path`` as dmlc-core reads them, flat, and the
    number of them in each row (empty lines are skipped)."""
    if os.path.isdir(path):
        files = [os.path.join(path, f) for f in sorted(os.listdir(path)) if os.path.isfile(os.path.join(path, f))]
    elif os.path.isfile(path):
        files = [path]
    else:
        raise FileNotFoundError(f"CSVIter: no such file or folder for {argument}: {path!r}")
    lines = []
    for file in files:
        with open(file, "rb") as f:
            text = f.read().decode("latin-1")
        for line in re.split(r"[\r\n]+", text):
            if line.startswith("\xef\xbb\xbf"):  # a UTF-8 byte order mark
                line = line[3:]
            if line:
                lines.append(line)
    plain = _read_plain(lines, dtype)
    if plain is not None:
        values, counts = plain
        return values, np.array(counts, np.int64)
    pattern = _FLOAT_FIELD if dtype == np.float32 else _INT_FIELD
    fields, counts = [], []
    for line in lines:
        matches = pattern.findall(line)
        fields.extend(matches)
        counts.append(len(matches))
    values, read = _read_floats(fields) if dtype == np.float32 else _read_ints(fields, dtype)
    row_of = np.repeat(np.arange(len(counts)), counts)
    return values[read], np.bincount(row_of[read], minlength=len(counts))


def _csv_array(path: str, shape: tuple[int, ...], dtype: np.dtype, argument: str) -> np.ndarray:
    """The rows of ``path`` as an array (rows,) + shape; ValueError for a row of another length."""
    size = int(np.prod(shape))
    values, counts = _csv_rows(path, dtype, argument)
    wrong = np.flatnonzero(counts != size)
    if wrong.size:
        raise ValueError(f"CSVIter: row {wrong[0]} of {argument} {path!r} has {counts[wrong[0]]} values but "
                         f"{argument[:-4]}_shape {shape} holds {size}")
    return values.reshape((len(counts),) + shape)


_CSV_DTYPES = {None: np.float32, "float32": np.float32, "int32": np.int32, "int64": np.int64}


class CSVIter(MXDataIter):
    """Batches of the rows of a CSV file (or of the files of a folder), as MXNet's ``CSVIter``.

    Each row of ``data_csv`` is one example of shape ``data_shape``; ``label_csv`` (default: all labels 0)
    gives one label of ``label_shape`` per row; the data is (batch_size,) + data_shape. ``dtype``: 'float32'
    (default), 'int32' or 'int64'. With ``round_batch`` (default) the last batch is filled with rows from the
    start (``pad`` counts them) and the next epoch goes on after those; without it the last batch's unread
    rows keep the previous batch's values. ``getindex()`` gives the row numbers. As in MXNet, a
    ``label_shape`` starting with 1 gives labels of shape (batch_size,): the batch's first batch_size
    label values.

    Raises FileNotFoundError for a missing file, ValueError for a row of the wrong length, a label file with
    fewer rows than the data, a bad ``batch_size``/shape/dtype, and TypeError for positional or unknown
    arguments.
    """

    def __init__(self, *args: Any, data_csv: str | None = None, data_shape: Sequence[int] | None = None,
                 batch_size: int | None = None, label_csv: str = "NULL", label_shape: Sequence[int] = (1,),
                 round_batch: bool = True, dtype: str | None = None, data_name: str = "data",
                 label_name: str = "softmax_label", **kwargs: Any):
        if args:
            raise TypeError("CSVIter takes keyword arguments only (data_csv=..., data_shape=..., batch_size=...)")
        missing = [k for k, v in (("data_csv", data_csv), ("data_shape", data_shape), ("batch_size", batch_size))
                   if v is None]
        if missing:
            raise TypeError(f"CSVIter: missing required argument(s) {missing}")
        _check_kwargs("CSVIter", kwargs, ("prefetch_buffer", "ctx"))
        if dtype not in _CSV_DTYPES:
            raise ValueError(f"CSVIter: dtype must be one of 'float32', 'int32', 'int64', got {dtype!r}")
        self._dtype = np.dtype(_CSV_DTYPES[dtype])
        if self._dtype == np.int64 and not jax.config.jax_enable_x64:
            warnings.warn("CSVIter: dtype='int64' gives int32 arrays, as JAX's 64-bit mode is off (set "
                          "JAX_ENABLE_X64=1 for int64)", stacklevel=2)
        self._size = _check_batch_size("CSVIter", batch_size)
        self._data = _csv_array(data_csv, _check_shape("CSVIter", "data_shape", data_shape), self._dtype,
                                "data_csv")
        label_shape = _check_shape("CSVIter", "label_shape", label_shape)
        n = len(self._data)
        if label_csv == "NULL":
            self._label = np.zeros((n, 1), self._dtype)
            label_shape = (1,)
        else:
            self._label = _csv_array(label_csv, label_shape, self._dtype, "label_csv")
            if len(self._label) < n:
                raise ValueError(f"CSVIter: label_csv {label_csv!r} has {len(self._label)} rows, fewer than the "
                                 f"{n} rows of data_csv {data_csv!r}")
        self._squeeze_label = label_shape[0] == 1
        self._round = bool(round_batch)
        self._position = 0      # the next row to read
        self._overflow = 0      # rows read from the start to fill the last batch (round_batch)
        self._buffers = (np.zeros((self._size,) + self._data.shape[1:], self._dtype),
                         np.zeros((self._size,) + self._label.shape[1:], self._dtype), np.zeros(self._size, np.uint64))
        super().__init__(data_name, label_name)

    def _fill(self, rows: np.ndarray, at: int) -> None:
        data, label, index = self._buffers
        data[at:at + len(rows)] = self._data[rows]
        label[at:at + len(rows)] = self._label[rows]
        index[at:at + len(rows)] = rows

    def _read(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
        if self._overflow:
            return None
        n, size, start = len(self._data), self._size, self._position
        count = min(size, n - start)
        if count <= 0:
            return None
        self._fill(np.arange(start, start + count), 0)
        self._position, pad = start + count, 0
        if count < size:
            pad = size - count
            if self._round:
                if pad > n:
                    raise ValueError(f"CSVIter: batch_size={size} needs {pad} rows from the start to fill the last "
                                     f"batch, but data_csv has {n} rows; use a batch_size of at most {n} or "
                                     f"round_batch=False")
                self._fill(np.arange(pad), count)
                self._position = self._overflow = pad
        data, label, index = self._buffers
        if self._squeeze_label:  # MXNet reads a label of shape (batch_size, 1, ...) as (batch_size,)
            label = label.reshape(-1)[:size]
        return data.copy(), label.copy(), pad, index.copy()

    def _rewind(self) -> None:
        if self._round and self._overflow:
            self._overflow = 0   # go on after the rows that filled the last batch
        else:
            self._position = 0


def _mt19937_shuffle(n: int, seed: int) -> np.ndarray:
    """The permutation ``std::shuffle(0..n-1, std::mt19937(seed))`` gives with the GNU C++ library MXNet 1.9.1
    is built with: Fisher-Yates from the front, each position drawn by rejection from 32-bit outputs."""
    generator = np.random.RandomState(seed % 2 ** 32)._bit_generator  # MT19937 seeded as std::mt19937(seed)
    order = list(range(n))
    words = iter(())
    for i in range(1, n):
        choices = i + 1
        scaling = 0xFFFFFFFF // choices
        limit = choices * scaling
        while True:
            word = next(words, None)
            if word is None:
                words = iter(generator.random_raw(max(64, n - i)).tolist())
                word = next(words)
            if word < limit:
                break
        j = word // scaling
        order[i], order[j] = order[j], order[i]
    return np.array(order, dtype=np.int64)


def _read_idx(path: str, magic: int, argument: str) -> tuple[tuple[int, ...], bytes]:
    """The dimensions and the bytes of an MNIST idx file (gzip-compressed or not)."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"MNISTIter: no such {argument} file: {path!r}")
    with open(path, "rb") as f:
        raw = f.read()
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    ndim = 3 if magic == 2051 else 1
    header = 4 * (1 + ndim)
    if len(raw) < header or int.from_bytes(raw[:4], "big") != magic:
        kind = "idx3-ubyte image" if magic == 2051 else "idx1-ubyte label"
        raise ValueError(f"MNISTIter: {argument} {path!r} is not an MNIST {kind} file (its first 4 bytes are not "
                         f"the number {magic})")
    dims = tuple(int.from_bytes(raw[4 * (i + 1):4 * (i + 2)], "big") for i in range(ndim))
    if len(raw) < header + int(np.prod(dims)):
        raise ValueError(f"MNISTIter: {argument} {path!r} is truncated: its header says {dims}, it holds "
                         f"{len(raw) - header} bytes of values")
    return dims, raw[header:]


class MNISTIter(MXDataIter):
    """Batches of an MNIST idx file pair (``image``: idx3-ubyte, ``label``: idx1-ubyte; gzip works too), as
    MXNet's ``MNISTIter``.

    Pixels are float32 in [0, 1) (byte / 256, as MXNet); data is (batch_size, 1, rows, cols), or
    (batch_size, rows * cols) with ``flat``; labels are float32 (batch_size,). ``shuffle`` (default True)
    permutes the images once, as MXNet does with ``seed``; every epoch then has the same order. The last
    partial batch is dropped (pad is 0; ``getindex()`` is zeros, as MXNet's). ``num_parts``/``part_index``
    read the part [count * i / parts, count * (i + 1) / parts) of the files.

    Raises FileNotFoundError, ValueError for files that are not MNIST idx files or whose counts differ, a bad
    ``batch_size``/part, fewer images than ``batch_size``, and TypeError for positional or unknown arguments.
    """

    def __init__(self, *args: Any, image: str = "./train-images-idx3-ubyte", label: str = "./train-labels-idx1-ubyte",
                 batch_size: int = 128, shuffle: bool = True, flat: bool = False, seed: int = 0,
                 silent: bool = False, num_parts: int = 1, part_index: int = 0, dtype: str | None = None,
                 data_name: str = "data", label_name: str = "softmax_label", **kwargs: Any):
        if args:
            raise TypeError("MNISTIter takes keyword arguments only (image=..., label=..., batch_size=...)")
        _check_kwargs("MNISTIter", kwargs, ("prefetch_buffer", "ctx", "input_shape"))  # MXNet ignores input_shape
        if dtype not in (None, "float32"):
            raise ValueError(f"MNISTIter: dtype must be None or 'float32' (MXNet fails for others), got {dtype!r}")
        self._size = _check_batch_size("MNISTIter", batch_size)
        if not 0 <= part_index < num_parts:
            raise ValueError(f"MNISTIter: part_index must be in [0, num_parts), got part_index={part_index}, "
                             f"num_parts={num_parts}")
        (count, rows, cols), pixels = _read_idx(image, 2051, "image")
        (label_count,), labels = _read_idx(label, 2049, "label")
        if count != label_count:
            raise ValueError(f"MNISTIter: image {image!r} holds {count} images but label {label!r} holds "
                             f"{label_count} labels")
        start, end = int(count / num_parts * part_index), int(count / num_parts * (part_index + 1))
        images = np.frombuffer(pixels, np.uint8, count * rows * cols).reshape(count, rows, cols)[start:end]
        self._labels = np.frombuffer(labels, np.uint8, count)[start:end].astype(np.float32)
        if shuffle:
            order = _mt19937_shuffle(len(images), int(seed))
            images, self._labels = images[order], self._labels[order]
        self._images = images
        if len(images) < self._size:
            raise ValueError(f"MNISTIter: batch_size={self._size} is larger than the {len(images)} images read from "
                             f"{image!r}; MXNet drops partial batches, so no batch would be left")
        self._flat = bool(flat)
        self._position = 0
        if not silent:
            shape = (self._size, rows * cols) if flat else (self._size, 1, rows, cols)
            _LOG.info("MNISTIter: load %d images, shuffle=%d, shape=%s", len(images), int(bool(shuffle)), shape)
        super().__init__(data_name, label_name)

    def _read(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
        start, size = self._position, self._size
        if start + size > len(self._images):
            return None
        self._position = start + size
        pixels = self._images[start:start + size].astype(np.float32) * np.float32(1.0 / 256.0)
        data = pixels.reshape(size, -1) if self._flat else pixels[:, None]
        return data, self._labels[start:start + size], 0, np.zeros(size, np.uint64)

    def _rewind(self) -> None:
        self._position = 0


# -- image records -------------------------------------------------------------------------------------------
class ImageRecordIter(MXDataIter):
    """Batches of images from an MXNet image RecordIO file, as MXNet 1.9.1's ``mx.io.ImageRecordIter``.

    Keyword arguments only, with MXNet's names and defaults. The main ones:

    - ``path_imgrec`` (the .rec file), ``path_imgidx`` (its .idx: needed for a shuffle in MXNet's
      indexed order), ``path_imglist`` (labels by image index from a .lst file instead of the records');
    - ``data_shape`` (C, H, W) with C 1 (grey), 3 (RGB) or 4 (RGBA), ``batch_size``, ``label_width``;
    - ``shuffle``, ``seed`` (MXNet's order for each seed), ``round_batch``, ``num_parts``/``part_index``;
    - augmentation: ``resize`` (shorter side), ``rand_crop``, ``rand_mirror``, ``mirror``, ``pad`` and
      ``fill_value``, ``inter_method``, ``max_crop_size``/``min_crop_size``, ``random_resized_crop`` with
      ``min/max_random_area`` and ``min/max_aspect_ratio``, ``min/max_random_scale``, ``max_rotate_angle``,
      ``rotate``, ``max_shear_ratio``, ``min/max_img_size``, ``brightness``, ``contrast``, ``saturation``,
      ``random_h/s/l``, ``pca_noise``; ``seed_aug`` (default: ``seed``) seeds the random ones;
    - normalisation: ``mean_r/g/b/a``, ``std_r/g/b/a``, ``scale``, ``mean_img`` (an NDArray file of a
      (C, H, W) mean; computed over the data and saved there when missing), ``max_random_contrast``,
      ``max_random_illumination``; ``dtype`` 'float32' (default), 'uint8' (the pixels) or 'int8';
    - ``preprocess_threads`` (decoding threads), ``prefetch_buffer`` (batches decoded ahead),
      ``data_name``, ``label_name``.

    A batch's data is (batch_size,) + data_shape, its label float32 (batch_size, label_width), or
    (batch_size,) for label_width 1; ``getindex()`` gives the records' image ids.

    Raises TypeError for positional, unknown or missing arguments, ValueError for a bad value, a record whose
    labels do not match ``label_width``, or fewer images than a padded batch needs, FileNotFoundError for a
    missing file and RecordIOError for a damaged one (each names the file).
    """

    _who = "ImageRecordIter"
    _defaults: dict[str, Any] = {}

    def __init__(self, *args: Any, **kwargs: Any):
        if args:
            raise TypeError(f"{self._who} takes keyword arguments only (path_imgrec=..., data_shape=..., "
                            f"batch_size=...)")
        self._batches = RecordBatches(self._who, kwargs, self._defaults)
        super().__init__(self._batches.params.data_name, self._batches.params.label_name)

    def _read(self) -> tuple[np.ndarray, np.ndarray, int, np.ndarray] | None:
        return self._batches.read()

    def _rewind(self) -> None:
        self._batches.rewind()


class ImageRecordUInt8Iter(ImageRecordIter):
    """:class:`ImageRecordIter` with ``dtype='uint8'``: the pixels, not normalised (MXNet's deprecated name)."""

    _who = "ImageRecordUInt8Iter"
    _defaults = {"dtype": "uint8"}


class ImageRecordInt8Iter(ImageRecordIter):
    """:class:`ImageRecordIter` with ``dtype='int8'``: pixels minus the rounded mean, saturated (MXNet's
    deprecated name)."""

    _who = "ImageRecordInt8Iter"
    _defaults = {"dtype": "int8"}


class ImageRecordIter_v1(ImageRecordIter):
    """MXNet's older image record iterator, served by :class:`ImageRecordIter`."""

    _who = "ImageRecordIter_v1"


class ImageRecordUInt8Iter_v1(ImageRecordUInt8Iter):
    """MXNet's older uint8 image record iterator, served by :class:`ImageRecordUInt8Iter`."""

    _who = "ImageRecordUInt8Iter_v1"
