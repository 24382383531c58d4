"""ImageRecordDataset: images and labels packed in a RecordIO file
(mirrors ``gluon.data.vision.ImageRecordDataset``)."""
from __future__ import annotations

import os
from typing import Any, Callable

from ...errors import RecordIOError
from ...recordio import unpack
from ..record_dataset import RecordFileDataset
from ._decode import decode_image

__all__ = ["ImageRecordDataset"]


class ImageRecordDataset(RecordFileDataset):
    """The ``(image, label)`` samples of a RecordIO file of packed images (im2rec's ``.rec`` + ``.idx``).

    Args:
        filename: the ``.rec`` file; its index is the ``.idx`` file with the same stem.
        flag: 1 decodes to ``(H, W, 3)`` RGB uint8, 0 to ``(H, W, 1)`` grey uint8.
        transform: called as ``transform(image, label)``; its result is the sample.

    ``label`` is the record header's label: a float, or a float32 array for multi-label records
    (``IRHeader.flag > 0``). Images are decoded with Pillow (``pip install hybrid[vision]``).

    Raises:
        ValueError: ``flag`` is not 0 or 1, or (``__getitem__``) a payload is not a readable image (the message
            names the file and the key).
        RecordIOError: (``__getitem__``) a damaged record (names the file, the key and the byte offset).
    """

    def __init__(self, filename: str | os.PathLike, flag: int = 1, transform: Callable | None = None):
        if flag not in (0, 1):
            raise ValueError(f"ImageRecordDataset: flag must be 1 (RGB) or 0 (grey), got {flag!r}")
        super().__init__(filename)
        self._flag = flag
        self._transform = transform

    def __getitem__(self, idx: int) -> Any:
        key = self._key(idx)
        record = self._record.read_idx(key)
        try:
            header, payload = unpack(record)
        except RecordIOError as exc:
            raise RecordIOError(f"{self.filename}, record of key {key!r}: {exc}") from None
        image = decode_image(payload, self._flag, f"{self.filename}, record of key {key!r}")
        if self._transform is not None:
            return self._transform(image, header.label)
        return image, header.label
