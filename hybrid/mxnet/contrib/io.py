"""``mxnet.contrib.io``: ``DataLoaderIter``, a Gluon ``DataLoader`` seen as an MXNet data iterator."""
from __future__ import annotations

from typing import Any

from ..io import DataDesc, DataIter

__all__ = ["DataLoaderIter"]


class DataLoaderIter(DataIter):
    """``DataLoaderIter(loader, data_name='data', label_name='softmax_label', dtype='float32')``: the
    ``(data, label)`` batches of ``loader`` as :class:`~hybrid.mxnet.io.DataBatch` es of ``dtype``, as
    MXNet's. ``batch_size`` and ``provide_data``/``provide_label`` come from the loader's first batch; a
    shorter last batch is padded with zeros to ``batch_size`` (``pad`` says how many)."""

    def __init__(self, loader: Any, data_name: str = "data", label_name: str = "softmax_label",
                 dtype: str = "float32"):
        super().__init__()
        self._loader = loader
        data, label = next(iter(loader))
        self.batch_size = data.shape[0]
        self.dtype = dtype
        self.provide_data = [DataDesc(data_name, data.shape, dtype)]
        self.provide_label = [DataDesc(label_name, label.shape, dtype)]
        self._current_batch: Any = None
        self.reset()

    def reset(self) -> None:
        self._iter = iter(self._loader)

    def iter_next(self) -> bool:
        self._current_batch = next(self._iter, None)
        return self._current_batch is not None

    def _padded(self, value: Any) -> list:
        from ..ndarray import zeros
        value = value.astype(self.dtype)
        if not self.getpad():
            return [value]
        out = zeros((self.batch_size,) + tuple(value.shape[1:]), dtype=self.dtype)
        out[:value.shape[0]] = value
        return [out]

    def getdata(self) -> list:
        return self._padded(self._current_batch[0])

    def getlabel(self) -> list:
        return self._padded(self._current_batch[1])

    def getpad(self) -> int:
        return self.batch_size - self._current_batch[0].shape[0]

    def getindex(self) -> None:
        return None
