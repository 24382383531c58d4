"""Batches on the device before the step asks: a thread copies the next batches while the current step runs.

    loader = data.DataLoader(dataset, batch_size=64, shuffle=True, num_workers=2)
    for x, y in data.prefetch_to_device(loader, size=2, mesh=trainer.mesh):
        ...  # x, y are already on the device (split over the mesh's 'data' axis when there is a mesh)
"""
from __future__ import annotations

import queue
import threading
from typing import Any, Callable, Iterable, Iterator

import jax
import numpy as np
from jax.sharding import Mesh, Sharding

from ..distributed.mesh import DATA_AXIS
from ..distributed.placement import shard_batch
from .dataloader import DataLoader
from .sampler import check_count

__all__ = ["prefetch_to_device", "DevicePrefetcher"]

_BATCH, _END, _ERROR = "batch", "end", "error"
_POLL_S = 0.05  # how often a waiting producer checks whether the consumer stopped
_JOIN_S = 1.0  # how long closing waits for the producer (it ends by itself after the batch in hand)


def _placement(device: Any, mesh: Any, sharding: Any, axis_name: str, batch_axis: int) -> Callable[[Any], Any]:
    """``batch -> batch`` with every numeric array leaf put on the target (asynchronously)."""
    given = [name for name, value in (("device", device), ("mesh", mesh), ("sharding", sharding))
             if value is not None]
    if len(given) > 1:
        raise ValueError(f"prefetch_to_device: give at most one of device, mesh and sharding, got {', '.join(given)}")
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"prefetch_to_device: mesh must be a jax.sharding.Mesh (e.g. trainer.mesh), "
                        f"got {type(mesh).__name__}")
    if sharding is not None and not isinstance(sharding, Sharding):
        raise TypeError(f"prefetch_to_device: sharding must be a jax.sharding.Sharding, got {type(sharding).__name__}")
    if device is not None and not isinstance(device, jax.Device):
        raise TypeError(f"prefetch_to_device: device must be a jax.Device (e.g. jax.devices()[0]), "
                        f"got {type(device).__name__}")

    if mesh is not None:
        def put(x: Any) -> Any:
            return shard_batch(x, mesh, axis_name, batch_axis)
    else:
        target = device if device is not None else sharding

        def put(x: Any) -> Any:
            return jax.device_put(x, target)

    def place(batch: Any) -> Any:
        return jax.tree_util.tree_map(lambda x: put(x) if _numeric_array(x) else x, batch)

    return place


def _numeric_array(x: Any) -> bool:
    return isinstance(x, jax.Array) or (isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind in "biufc")


def _produce(source: Iterator[Any], place: Callable[[Any], Any], out: queue.Queue, room: threading.Semaphore,
             stop: threading.Event) -> None:
    """The producer thread: take a free place, make the next batch, put it on the device, hand it over."""
    try:
        while True:
            while not room.acquire(timeout=_POLL_S):
                if stop.is_set():
                    return
            if stop.is_set():
                return
            try:
                batch = next(source)
            except StopIteration:
                out.put((_END, None))
                return
            out.put((_BATCH, place(batch)))
    except BaseException as exc:  # raised again in the consumer, after the batches before it
        out.put((_ERROR, exc))
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()  # a DataLoader epoch cancels the batches it still has in its workers


class _PrefetchIterator:
    """One pass: the batches of ``source`` placed by ``place``, at most ``size`` of them ahead."""

    def __init__(self, source: Iterator[Any], place: Callable[[Any], Any], size: int):
        self._queue: queue.Queue = queue.Queue()
        self._room = threading.Semaphore(size)
        self._stop = threading.Event()
        self._done = False
        self._thread = threading.Thread(target=_produce, name="hybrid-prefetch_to_device", daemon=True,
                                        args=(source, place, self._queue, self._room, self._stop))
        self._thread.start()

    def __iter__(self) -> "_PrefetchIterator":
        return self

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        kind, value = self._queue.get()
        if kind == _BATCH:
            self._room.release()
            return value
        self._done = True
        self._thread.join()
        if kind == _END:
            raise StopIteration
        raise value

    def close(self) -> None:
        """Stop early: the producer ends after the batch in hand, dropping the batches made ahead."""
        self._done = True
        self._stop.set()
        self._thread.join(timeout=_JOIN_S)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


class DevicePrefetcher:
    """Iterable over the batches of ``loader`` already placed on the device; see :func:`prefetch_to_device`."""

    def __init__(self, loader: Iterable[Any], size: int = 2, device: Any = None, mesh: Any = None,
                 sharding: Any = None, axis_name: str = DATA_AXIS, batch_axis: int = 0):
        if not hasattr(loader, "__iter__"):
            raise TypeError(f"prefetch_to_device: loader must be iterable (a DataLoader), got {type(loader).__name__}")
        self._loader = loader
        self._size = check_count("prefetch_to_device", "size", size)
        if self._size < 1:
            raise ValueError("prefetch_to_device: size must be at least 1 (the batches placed ahead of the step)")
        self._place = _placement(device, mesh, sharding, axis_name, batch_axis)

    def __iter__(self) -> Iterator[Any]:
        if isinstance(self._loader, DataLoader):
            source = self._loader._epoch(lambda batch: batch)  # NumPy batches, copied to the device once
        else:
            source = iter(self._loader)
        return _PrefetchIterator(source, self._place, self._size)


class _SizedPrefetcher(DevicePrefetcher):
    """A DevicePrefetcher over a loader with a length (``Estimator.fit`` reads it)."""

    def __len__(self) -> int:
        return len(self._loader)  # type: ignore[arg-type]


def prefetch_to_device(loader: Iterable[Any], size: int = 2, device: Any = None, mesh: Any = None,
                       sharding: Any = None, axis_name: str = DATA_AXIS, batch_axis: int = 0) -> DevicePrefetcher:
    """Iterate over ``loader``'s batches with the next ``size`` batches already on the device.

    Each iteration starts a thread that takes batches from ``loader`` (a DataLoader or any
    iterable of batches: arrays, or tuples/lists/dicts of them) and puts every numeric array
    with ``jax.device_put`` (asynchronous) on ``device`` (default: JAX's default device), on
    ``sharding``, or split along ``batch_axis`` over mesh axis ``axis_name`` of ``mesh`` (as
    ``hybrid.distributed.shard_batch``; pass ``mesh=trainer.mesh``, which is None without a mesh).
    Other leaves pass through. Batches keep their order; an exception raised by the loader is
    raised by the iteration when it reaches that batch; leaving the loop early stops the thread.
    The result is re-iterable (one pass per epoch) and has ``len(loader)``, so it can be given to
    ``Estimator.fit`` in place of the loader. An epoch's order and random seeds are drawn when its
    iteration starts, in the calling thread, as with the loader itself.

    Raises ValueError when more than one of ``device``, ``mesh``, ``sharding`` is given or ``size`` < 1;
    TypeError for a target of the wrong type. A batch that cannot be split over the mesh raises
    ``shard_batch``'s ValueError at that batch.
    """
    kind = _SizedPrefetcher if hasattr(loader, "__len__") else DevicePrefetcher
    return kind(loader, size, device, mesh, sharding, axis_name, batch_axis)
