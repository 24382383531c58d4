"""MNIST, Fashion-MNIST, CIFAR-10 and CIFAR-100 read from their standard files in a local folder.

Nothing is downloaded: put the original files in ``root`` (MNIST's IDX files,
gzipped or not; the *binary* versions of CIFAR, directly in ``root`` or in the
folder their archive extracts to).
"""
from __future__ import annotations

import gzip
import os
import struct
import zlib
from typing import Any, Callable, Sequence

import numpy as np

from ..dataset import Dataset

__all__ = ["MNIST", "FashionMNIST", "CIFAR10", "CIFAR100"]


def _find(root: str, candidates: Sequence[str], who: str) -> str:
    for name in candidates:
        path = os.path.join(root, name)
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f"{who}: none of {list(candidates)} found in {root!r}. hybrid does not download "
                            "datasets: place the original files there, or pass root=<folder holding them>")


def _read_bytes(path: str) -> bytes:
    if not path.endswith(".gz"):
        with open(path, "rb") as f:
            return f.read()
    try:
        with gzip.open(path, "rb") as f:
            return f.read()
    except (OSError, EOFError, zlib.error) as exc:
        raise ValueError(f"{path}: corrupt or truncated gzip file ({exc})") from None


def read_idx(path: str, ndim: int) -> np.ndarray:
    """An IDX file of unsigned bytes with ``ndim`` dimensions (MNIST's format) as a uint8 array.

    Raises ValueError when the magic number, the rank or the data size is wrong.
    """
    raw = _read_bytes(path)
    header = 4 + 4 * ndim
    expected_magic = 0x0800 | ndim
    magic = struct.unpack(">I", raw[:4])[0] if len(raw) >= 4 else None
    if magic != expected_magic:
        found = "none (file shorter than 4 bytes)" if magic is None else f"{magic:#010x}"
        raise ValueError(f"{path}: not an IDX file of {ndim}-D unsigned bytes: magic number {found}, "
                         f"expected {expected_magic:#010x}")
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX file: {len(raw)} bytes, but its header alone takes {header}")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    size = int(np.prod(shape))
    if len(raw) - header != size:
        raise ValueError(f"{path}: corrupt or truncated IDX file: its header announces shape {shape} "
                         f"({size} bytes of data) but it holds {len(raw) - header}")
    return np.frombuffer(raw, np.uint8, offset=header).reshape(shape).copy()  # writable, unlike the bytes


def read_cifar(path: str, label_limits: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
    """A CIFAR binary file: images ``(N, 32, 32, 3)`` uint8 and labels ``(N, len(label_limits))`` int32.

    Each record is one byte per label (label ``j`` must be below ``label_limits[j]``)
    followed by 3072 bytes of red, green and blue 32x32 planes. Raises ValueError
    for a size that is not a whole number of records or an out-of-range label.
    """
    raw = np.frombuffer(_read_bytes(path), np.uint8)
    record = len(label_limits) + 3 * 32 * 32
    if raw.size == 0 or raw.size % record:
        raise ValueError(f"{path}: corrupt or truncated CIFAR binary file: {raw.size} bytes is not a whole "
                         f"number of {record}-byte records")
    rows = raw.reshape(-1, record)
    labels = rows[:, :len(label_limits)].astype(np.int32)
    for j, limit in enumerate(label_limits):
        if labels[:, j].max() >= limit:
            bad = int(np.argmax(labels[:, j] >= limit))
            raise ValueError(f"{path}: corrupt CIFAR binary file: record {bad} has label {labels[bad, j]}, "
                             f"but labels must be below {limit}")
    images = rows[:, len(label_limits):].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1)
    return np.ascontiguousarray(images), labels


class _InMemoryImages(Dataset):
    """Images ``(N, H, W, C)`` uint8 and labels ``(N,)`` int32 loaded at construction.

    Sample ``i`` is ``(image, label)``, or ``transform(image, label)`` when a
    transform is given.
    """

    def __init__(self, root: str, train: bool, transform: Callable | None):
        self._root = os.path.expanduser(root)
        self._train = bool(train)
        self._transform = transform
        self._data, self._label = self._load()

    def _load(self) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def __len__(self) -> int:
        return len(self._label)

    def __getitem__(self, idx: int) -> Any:
        image, label = self._data[idx], self._label[idx]
        return self._transform(image, label) if self._transform is not None else (image, label)


class MNIST(_InMemoryImages):
    """Handwritten digits: 28x28x1 uint8 images, int32 labels 0-9 (60000 train, 10000 test).

    Reads ``train-images-idx3-ubyte`` and ``train-labels-idx1-ubyte`` (``t10k-...``
    for ``train=False``), each optionally gzipped (``.gz``), from ``root``. Raises
    FileNotFoundError naming the files and the folder when they are missing,
    ValueError when a file is corrupt or the counts of images and labels differ.
    """

    def __init__(self, root: str = "~/.hybrid/datasets/mnist", train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None):
        super().__init__(root, train, transform)

    def _load(self) -> tuple[np.ndarray, np.ndarray]:
        prefix = "train" if self._train else "t10k"
        who = type(self).__name__
        paths = [_find(self._root, [name, name + ".gz"], who)
                 for name in (f"{prefix}-images-idx3-ubyte", f"{prefix}-labels-idx1-ubyte")]
        images, labels = read_idx(paths[0], 3), read_idx(paths[1], 1)
        if len(images) != len(labels):
            raise ValueError(f"{who}: {paths[0]} holds {len(images)} images but {paths[1]} holds {len(labels)} "
                             "labels")
        return images[..., None], labels.astype(np.int32)


class FashionMNIST(MNIST):
    """Zalando's clothing images in MNIST's format and file names (labels 0-9)."""

    def __init__(self, root: str = "~/.hybrid/datasets/fashion-mnist", train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None):
        super().__init__(root, train, transform)


class CIFAR10(_InMemoryImages):
    """32x32x3 uint8 colour images in 10 classes, int32 labels (50000 train, 10000 test).

    Reads the binary version: ``data_batch_1.bin`` ... ``data_batch_5.bin`` or
    ``test_batch.bin``, from ``root`` or ``root/cifar-10-batches-bin``. Raises
    FileNotFoundError naming the files and the folder when they are missing,
    ValueError when a file is corrupt.
    """

    _folder = "cifar-10-batches-bin"
    _label_limits: tuple[int, ...] = (10,)

    def __init__(self, root: str = "~/.hybrid/datasets/cifar10", train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None):
        super().__init__(root, train, transform)

    def _files(self) -> list[str]:
        return [f"data_batch_{i}.bin" for i in range(1, 6)] if self._train else ["test_batch.bin"]

    def _label_column(self) -> int:
        return 0

    def _load(self) -> tuple[np.ndarray, np.ndarray]:
        who = type(self).__name__
        parts = [read_cifar(_find(self._root, [name, os.path.join(self._folder, name)], who), self._label_limits)
                 for name in self._files()]
        images = np.concatenate([images for images, _ in parts])
        labels = np.concatenate([labels[:, self._label_column()] for _, labels in parts])
        return images, labels


class CIFAR100(CIFAR10):
    """32x32x3 uint8 colour images with 20 coarse and 100 fine classes.

    Reads the binary version, ``train.bin`` or ``test.bin``, from ``root`` or
    ``root/cifar-100-binary``. Labels are the fine ones (0-99) with
    ``fine_label=True``, else the coarse ones (0-19). Errors as in CIFAR10.
    """

    _folder = "cifar-100-binary"
    _label_limits = (20, 100)

    def __init__(self, root: str = "~/.hybrid/datasets/cifar100", fine_label: bool = False, train: bool = True,
                 transform: Callable[[Any, Any], Any] | None = None):
        self._fine_label = bool(fine_label)
        super().__init__(root, train, transform)

    def _files(self) -> list[str]:
        return ["train.bin" if self._train else "test.bin"]

    def _label_column(self) -> int:
        return 1 if self._fine_label else 0
