"""Array files: atomic writes and pickle-free loading.

Parameter files are NumPy ``.npz`` archives (a zip of ``.npy`` arrays, each with
a CRC-32 that is checked on read) keyed by structural parameter names.  They
are always loaded with ``allow_pickle=False``, so loading never runs code.
"""
from __future__ import annotations

import io
import os
import tempfile
import zipfile
from typing import Any, Callable, Mapping

import numpy as np

__all__ = ["atomic_write", "save_arrays", "load_arrays"]


def atomic_write(path: str | os.PathLike, write: Callable[[Any], None]) -> None:
    """Call ``write(fileobj)`` on a temporary file beside ``path``, then rename it into place.

    A failure (or crash) at any point leaves the previous file at ``path`` untouched.
    """
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-" + os.path.basename(path) + "-", dir=directory)
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def save_arrays(path: str | os.PathLike, arrays: Mapping[str, Any]) -> None:
    """Write ``{name: array}`` as an ``.npz`` file, atomically."""
    host = {name: np.asarray(value) for name, value in arrays.items()}
    for name, value in host.items():
        if value.dtype == object:
            raise TypeError(f"array {name!r} has dtype object; only numeric arrays can be saved")
    atomic_write(path, lambda handle: np.savez(handle, **host))


def load_arrays(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Read an ``.npz`` written by :func:`save_arrays` (no pickle; CRCs verified).

    Raises FileNotFoundError or ValueError naming the file and what is wrong.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise FileNotFoundError(f"parameter file {path!r} does not exist")
    with open(path, "rb") as handle:
        head = handle.read(4)
        if head != b"PK\x03\x04":
            raise ValueError(f"{path!r} is not a hybrid parameter file (expected an .npz archive)")
        handle.seek(0)
        data = handle.read()
    try:
        with np.load(io.BytesIO(data), allow_pickle=False) as archive:
            return {name: archive[name] for name in archive.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise ValueError(f"parameter file {path!r} contains pickled objects; they are never loaded") from exc
        raise ValueError(f"parameter file {path!r} is corrupted or truncated: {exc}") from exc
    except (zipfile.BadZipFile, OSError, EOFError, KeyError) as exc:
        raise ValueError(f"parameter file {path!r} is corrupted or truncated: {exc}") from exc
