"""Batches passed from worker processes through shared memory instead of a pipe.

A worker writes each large array of a batch to a file in ``/dev/shm`` (one ``write`` call) and sends
a small :class:`SharedArray` in its place. The main process maps the file, unlinks it at once (the
mapping outlives the name) and wraps the mapping in a NumPy array. The mapping is page-aligned, so
``jax.device_put`` on the CPU takes it without a copy: the main process never copies, pickles or
unpickles the batch's bytes (a 64x3x224x224 float32 batch: 0.03 ms against about 45 ms to copy it
and 40 ms to unpickle it, measured on the 2-core CPU machine).

Where ``/dev/shm`` is missing or full, the array travels through the pipe as before. Files a main
process never collects (an epoch left early, a worker killed while writing) carry the loader's
prefix and are removed by :func:`remove_leftovers`.
"""
from __future__ import annotations

import mmap
import os
import uuid
from typing import Any

import numpy as np

__all__ = ["SharedArray", "share", "collect", "remove_leftovers", "new_prefix", "SHARE_FROM_BYTES"]

SHM_DIR = "/dev/shm"
# Smaller arrays pickle in microseconds; a file per array would cost more than it saves.
SHARE_FROM_BYTES = 1 << 16


class SharedArray:
    """A NumPy array written to the shared-memory file ``path``."""
    __slots__ = ("path", "shape", "dtype")

    def __init__(self, path: str, shape: tuple, dtype: str):
        self.path, self.shape, self.dtype = path, shape, dtype

    def __reduce__(self):
        return SharedArray, (self.path, self.shape, self.dtype)


def new_prefix() -> str | None:
    """A file-name prefix unique to one loader, or None where there is no writable ``/dev/shm``."""
    if not os.path.isdir(SHM_DIR) or not os.access(SHM_DIR, os.W_OK):
        return None
    return f"hybrid-batch-{os.getpid()}-{uuid.uuid4().hex[:12]}-"


def _map(fn: Any, batch: Any) -> Any:
    """``batch`` with ``fn`` applied to every leaf, following tuples, lists and dicts (not named tuples)."""
    if isinstance(batch, (tuple, list)) and not hasattr(batch, "_fields"):
        return type(batch)(_map(fn, b) for b in batch)
    if isinstance(batch, dict):
        return {k: _map(fn, v) for k, v in batch.items()}
    return fn(batch)


def share(batch: Any, prefix: str) -> Any:
    """``batch`` with its numeric NumPy arrays of at least ``SHARE_FROM_BYTES`` written to shared
    memory (nested tuples, lists and dicts are followed). An array that cannot be written (``/dev/shm``
    full) stays as it is."""
    def leaf(x: Any) -> Any:
        if isinstance(x, np.ndarray) and x.dtype.kind in "biufc" and x.nbytes >= SHARE_FROM_BYTES:
            return _write(np.ascontiguousarray(x), prefix)
        return x
    return _map(leaf, batch)


def _write(array: np.ndarray, prefix: str) -> Any:
    path = os.path.join(SHM_DIR, prefix + uuid.uuid4().hex)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except OSError:
        return array
    try:
        view, written = memoryview(array).cast("B"), 0
        while written < len(view):  # write(2) may stop short of large buffers
            written += os.write(fd, view[written:])
    except OSError:  # no space left: send the array through the pipe instead
        os.close(fd)
        os.unlink(path)
        return array
    os.close(fd)
    return SharedArray(path, array.shape, array.dtype.str)


def collect(batch: Any) -> Any:
    """``batch`` with every :class:`SharedArray` mapped back as a read-only NumPy array (its file
    unlinked). Raises OSError when a file has gone (removed by someone else)."""
    return _map(lambda x: _read(x) if isinstance(x, SharedArray) else x, batch)


def _read(shared: SharedArray) -> np.ndarray:
    fd = os.open(shared.path, os.O_RDWR)
    try:
        os.unlink(shared.path)
        dtype = np.dtype(shared.dtype)
        nbytes = int(np.prod(shared.shape, dtype=np.int64)) * dtype.itemsize
        if os.fstat(fd).st_size != nbytes:
            raise OSError(f"shared batch file {shared.path!r} holds {os.fstat(fd).st_size} bytes, expected {nbytes}")
        mapping = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    array = np.frombuffer(mapping, dtype).reshape(shared.shape)
    array.flags.writeable = False
    return array


def discard(batch: Any) -> None:
    """Remove the files of a batch that will not be collected."""
    def leaf(x: Any) -> None:
        if isinstance(x, SharedArray):
            try:
                os.unlink(x.path)
            except OSError:
                pass
    _map(leaf, batch)


def remove_leftovers(prefix: str) -> None:
    """Remove every file of ``prefix`` still in ``/dev/shm``."""
    try:
        names = os.listdir(SHM_DIR)
    except OSError:
        return
    for name in names:
        if name.startswith(prefix):
            try:
                os.unlink(os.path.join(SHM_DIR, name))
            except OSError:
                pass
