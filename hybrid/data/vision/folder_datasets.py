"""Image files on disk as datasets: one sub-folder per class, or a list of (label, path) entries
(mirrors ``gluon.data.vision.ImageFolderDataset`` and ``ImageListDataset``)."""
from __future__ import annotations

import numbers
import os
import warnings
from typing import Any, Callable, Sequence

import numpy as np

from ..dataset import Dataset
from ._decode import decode_file

__all__ = ["ImageFolderDataset", "ImageListDataset"]

IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png")


def _check_flag(flag: Any, who: str) -> int:
    if isinstance(flag, bool) or flag not in (0, 1):
        raise ValueError(f"{who}: flag must be 1 (RGB, (H, W, 3)) or 0 (grey, (H, W, 1)), got {flag!r}")
    return int(flag)


def _scan_sorted(path: str) -> list[os.DirEntry]:
    with os.scandir(path) as entries:
        return sorted(entries, key=lambda e: e.name)


class ImageFolderDataset(Dataset):
    """The images under ``root``, one sub-folder per class: ``root/<class>/<file>.jpg``.

    Args:
        root: the folder of class folders (``~`` expanded).
        flag: 1 decodes to ``(H, W, 3)`` RGB uint8, 0 to ``(H, W, 1)`` grey uint8 (see ``decode_image``).
        transform: called as ``transform(image, label)``; its result is the sample.

    Attributes:
        synsets: the class folder names, sorted; ``synsets[label]`` names class ``label``.
        items: ``(path, label)`` for every image, by class then file name.

    A sample is ``(image, label)`` with ``label`` an int. Files whose extension is not ``.jpg``, ``.jpeg`` or
    ``.png`` (any case), and files directly in ``root``, are skipped with a warning, as in Gluon.

    Raises:
        FileNotFoundError: ``root`` does not exist.
        NotADirectoryError: ``root`` is not a folder.
        ValueError: no image in any class folder, or a bad ``flag``. Reading a sample raises ValueError
            naming the file when it is not a readable image.
    """

    def __init__(self, root: str | os.PathLike, flag: int = 1, transform: Callable | None = None):
        self._root = os.path.expanduser(os.fspath(root))
        self._flag = _check_flag(flag, "ImageFolderDataset")
        self._transform = transform
        self.synsets: list[str] = []
        self.items: list[tuple[str, int]] = []
        self._list_images(self._root)

    def _list_images(self, root: str) -> None:
        if not os.path.exists(root):
            raise FileNotFoundError(f"ImageFolderDataset: root folder {root!r} does not exist")
        if not os.path.isdir(root):
            raise NotADirectoryError(f"ImageFolderDataset: root {root!r} is not a folder (expected one sub-folder "
                                     "of images per class)")
        for entry in _scan_sorted(root):
            if not entry.is_dir():
                warnings.warn(f"ImageFolderDataset: ignoring {entry.path}, which is not a folder", stacklevel=3)
                continue
            label = len(self.synsets)
            self.synsets.append(entry.name)
            skipped = []
            for file in _scan_sorted(entry.path):
                if os.path.splitext(file.name)[1].lower() in IMAGE_EXTENSIONS:
                    self.items.append((file.path, label))
                else:
                    skipped.append(file.name)
            if skipped:
                shown = ", ".join(skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
                warnings.warn(f"ImageFolderDataset: ignoring {len(skipped)} file(s) in {entry.path} that are not "
                              f"{', '.join(IMAGE_EXTENSIONS)}: {shown}", stacklevel=3)
        if not self.items:
            raise ValueError(f"ImageFolderDataset: no image ({', '.join(IMAGE_EXTENSIONS)}) found under {root!r}; "
                             f"expected {os.path.join(root, '<class>', '<image>.jpg')} "
                             f"(class folders found: {self.synsets})")

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, idx: int) -> Any:
        path, label = self.items[idx]
        image = decode_file(path, self._flag)
        if self._transform is not None:
            return self._transform(image, label)
        return image, label


def _label_array(values: Any, where: str) -> np.ndarray:
    try:
        label = np.asarray(values, dtype=np.float32)
    except (TypeError, ValueError):
        raise ValueError(f"{where}: labels must be numbers, got {values!r}") from None
    if label.ndim != 1:
        raise ValueError(f"{where}: labels must be a number or a flat list of numbers, got {values!r}")
    return label


def _parse_entry(entry: Any, index: int) -> tuple[np.ndarray, str]:
    where = f"ImageListDataset: imglist[{index}]"
    if not isinstance(entry, (list, tuple)) or len(entry) < 2:
        raise ValueError(f"{where}: expected [label(s)..., path] or (path, label), got {entry!r}")
    if isinstance(entry[-1], (str, os.PathLike)):
        path, labels = entry[-1], list(entry[:-1])
        if len(labels) == 1 and not isinstance(labels[0], numbers.Number):
            labels = labels[0]  # [[l0, l1, ...], path]
    elif len(entry) == 2 and isinstance(entry[0], (str, os.PathLike)):
        path, labels = entry  # (path, label), the layout of ImageFolderDataset.items
        if isinstance(labels, numbers.Number):
            labels = [labels]
    else:
        raise ValueError(f"{where}: expected [label(s)..., path] or (path, label) with path a str, got {entry!r}")
    return _label_array(labels, where), os.fspath(path)


def _read_lst(fname: str) -> list[tuple[list[float], str]]:
    entries, keys = [], {}
    with open(fname, "rt", encoding="utf-8") as fin:
        for number, line in enumerate(fin, 1):
            if not line.strip():
                continue
            where = f"ImageListDataset: {fname}, line {number}"
            fields = line.strip().split("\t")
            if len(fields) < 3:
                raise ValueError(f"{where}: expected 'index<TAB>label(s)<TAB>path' (tab-separated), got {line!r}")
            try:
                key = int(fields[0])
            except ValueError:
                raise ValueError(f"{where}: the index {fields[0]!r} is not an integer") from None
            if key in keys:
                raise ValueError(f"{where}: index {key} already used on line {keys[key]}")
            keys[key] = number
            try:
                label = [float(v) for v in fields[1:-1]]
            except ValueError:
                raise ValueError(f"{where}: labels {fields[1:-1]} are not all numbers") from None
            entries.append((label, fields[-1]))
    return entries


def _pack_labels(labels: list) -> np.ndarray | list[np.ndarray]:
    """One ``(N, k)`` float32 array when every entry has k labels (cheap to pickle to workers), else a list."""
    widths = {len(label) for label in labels}
    if len(widths) == 1 and 0 not in widths:
        return np.asarray(labels, dtype=np.float32)
    return [np.asarray(label, dtype=np.float32) for label in labels]


class ImageListDataset(Dataset):
    """The images named by a list: a ``.lst`` file (im2rec's format) or a Python list of entries.

    Args:
        root: the folder that relative image paths (and a relative ``.lst`` path) start from (``~`` expanded).
        imglist: the path of a ``.lst`` file, one image a line: ``index<TAB>label(s)<TAB>path`` (tab-separated,
            one or more labels); or a list whose entries are ``[label, path]``, ``[label0, label1, ..., path]``,
            ``[[label0, label1, ...], path]`` (Gluon's forms) or ``(path, label)`` (``ImageFolderDataset.items``).
        flag: 1 decodes to ``(H, W, 3)`` RGB uint8, 0 to ``(H, W, 1)`` grey uint8.
        transform: called as ``transform(image, label)``; its result is the sample (not in Gluon 2.0, whose
            class has no ``transform``: ``transform_first`` works in both).

    A sample is ``(image, label)`` with ``label`` a float32 array of shape ``(k,)`` (k labels; ``(1,)`` for one),
    as Gluon's NDArray label. Samples are in list (file) order.

    Attributes:
        items: ``(path, label)`` for every image, paths joined to ``root``.

    Raises:
        ValueError: ``imglist`` is neither a path nor a list, an entry or a ``.lst`` line is malformed (names
            the entry, or the file and line), or a bad ``flag``.
        FileNotFoundError: the ``.lst`` file is missing.
    """

    def __init__(self, root: str | os.PathLike = ".", imglist: str | os.PathLike | Sequence | None = None,
                 flag: int = 1, transform: Callable | None = None):
        self._root = os.path.expanduser(os.fspath(root))
        self._flag = _check_flag(flag, "ImageListDataset")
        self._transform = transform
        if isinstance(imglist, (str, os.PathLike)):
            fname = os.path.join(self._root, os.fspath(imglist))
            if not os.path.isfile(fname):
                raise FileNotFoundError(f"ImageListDataset: image list file {fname!r} not found "
                                        f"(imglist={os.fspath(imglist)!r} joined to root={self._root!r})")
            entries = _read_lst(fname)
        elif isinstance(imglist, (list, tuple)):
            entries = [_parse_entry(entry, i) for i, entry in enumerate(imglist)]
        else:
            raise ValueError("ImageListDataset: imglist must be the path of a .lst file or a list of "
                             f"[label, path] entries, got {type(imglist).__name__}")
        self._paths = [os.path.join(self._root, path) for _, path in entries]
        self._labels = _pack_labels([label for label, _ in entries])

    @property
    def items(self) -> list[tuple[str, np.ndarray]]:
        """``(path, label)`` for every image (a new list; labels are copies)."""
        return [(path, np.array(label)) for path, label in zip(self._paths, self._labels)]

    def __len__(self) -> int:
        return len(self._paths)

    def __getitem__(self, idx: int) -> Any:
        image, label = decode_file(self._paths[idx], self._flag), np.array(self._labels[idx])
        if self._transform is not None:
            return self._transform(image, label)
        return image, label
