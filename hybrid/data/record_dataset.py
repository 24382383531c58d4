"""RecordFileDataset: the raw records of an indexed RecordIO file (mirrors ``gluon.data.RecordFileDataset``)."""
from __future__ import annotations

import os

from ..recordio import MXIndexedRecordIO
from .dataset import Dataset

__all__ = ["RecordFileDataset"]


class RecordFileDataset(Dataset):
    """The records of ``filename`` (a ``.rec`` file) as bytes, in the order of its index.

    The index is the ``.idx`` file beside it with the same stem (``data.rec`` -> ``data.idx``), as written by
    ``recordio.MXIndexedRecordIO`` or MXNet's im2rec. ``dataset[i]`` is the record of the ``i``-th key of the
    index. The dataset pickles as its paths (each DataLoader worker opens the files itself).

    Raises:
        FileNotFoundError: the ``.rec`` or ``.idx`` file is missing.
        RecordIOError: (``__init__``) a bad index line; (``__getitem__``) a damaged record.
        IndexError: ``idx`` is out of range.
    """

    def __init__(self, filename: str | os.PathLike):
        self.filename = os.fspath(filename)
        self.idx_file = os.path.splitext(self.filename)[0] + ".idx"
        for path, what in ((self.filename, "record file"), (self.idx_file, "index file")):
            if not os.path.isfile(path):
                raise FileNotFoundError(f"{type(self).__name__}: {what} {path!r} not found (a .rec file needs its "
                                        ".idx index beside it, with the same stem: write both with "
                                        "recordio.MXIndexedRecordIO or MXNet's im2rec)")
        self._record = MXIndexedRecordIO(self.idx_file, self.filename, "r")

    def __len__(self) -> int:
        return len(self._record.keys)

    def _key(self, idx: int) -> object:
        """The index key of sample ``idx``."""
        keys = self._record.keys
        try:
            return keys[idx]
        except IndexError:
            raise IndexError(f"{type(self).__name__}({self.filename!r}): index {idx} out of range for "
                             f"{len(keys)} records") from None

    def __getitem__(self, idx: int) -> bytes:
        return self._record.read_idx(self._key(idx))
