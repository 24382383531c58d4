"""DataLoader: batches of a Dataset, made in the main process or in parallel workers."""
from __future__ import annotations

import collections
import itertools
import multiprocessing
import os
import pickle
import signal
import warnings
import weakref
from concurrent import futures
from typing import Any, Callable, Iterator

import jax
import numpy as np

from .._core import compat as _compat
from .. import random as _random
from . import _shared_batches, _worker
from ..errors import WorkerError
from .batchify import default_batchify_fn
from .sampler import BatchSampler, RandomSampler, SequentialSampler, check_count

__all__ = ["DataLoader"]

_WORKER_MODULE = _worker.__name__
_PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _process_context() -> multiprocessing.context.BaseContext:
    """'forkserver' with the worker module preloaded (else 'spawn').

    Workers fork from Python's fork server, a fresh interpreter that imports
    hybrid once and never starts JAX, so starting a worker takes milliseconds.
    """
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    from multiprocessing import forkserver
    preload = list(getattr(forkserver._forkserver, "_preload_modules", ["__main__"]))
    if _WORKER_MODULE not in preload:
        forkserver.set_forkserver_preload(preload + [_WORKER_MODULE])
    # The server does not inherit sys.path (Python <= 3.11 ignores it): put this hybrid first on its
    # PYTHONPATH so that it preloads the same package as ours. A no-op once the server runs.
    previous = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([_PACKAGE_ROOT] + ([previous] if previous else []))
    try:
        forkserver.ensure_running()
    finally:
        if previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = previous
    return multiprocessing.get_context("forkserver")


def _to_jax(batch: Any) -> Any:
    """Numeric NumPy arrays in ``batch`` (nested in tuples, lists, dicts) become JAX arrays.

    ``jax.device_put`` rather than ``jnp.asarray``: half the time for a 38 MB batch on the CPU (45 against
    90 ms), and no copy at all of a page-aligned array such as a batch mapped from shared memory."""
    if isinstance(batch, np.ndarray):
        return jax.device_put(batch) if batch.dtype.kind in "biufc" else batch
    if isinstance(batch, (tuple, list)):
        return type(batch)(_to_jax(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _to_jax(v) for k, v in batch.items()}
    return batch


class DataLoader:
    """Iterates over ``dataset`` in mini-batches of JAX arrays.

    Args:
        dataset: anything with ``__len__`` and ``__getitem__`` (e.g. a ``Dataset``).
        batch_size: samples per batch; required unless ``batch_sampler`` is given.
        shuffle: draw a new order every epoch from ``hybrid.random`` (excludes ``sampler``).
        sampler: yields sample indices (excludes ``shuffle``).
        last_batch: ``'keep'`` (default), ``'discard'`` or ``'rollover'`` the final
            incomplete batch, as in ``BatchSampler``.
        batch_sampler: yields lists of indices; excludes ``batch_size``, ``shuffle``,
            ``sampler`` and ``last_batch``.
        batchify_fn: list of samples -> batch of NumPy arrays (default
            ``batchify.default_batchify_fn``).
        num_workers: 0 makes batches in the calling thread; ``n > 0`` makes them in
            ``n`` worker processes (or threads with ``thread_pool=True``).
        pin_memory, pin_device_id: accepted for Gluon compatibility; no effect.
        prefetch: batches made ahead while the caller holds one (default
            ``2 * num_workers``); only used with workers.
        thread_pool: use threads instead of processes.
        timeout: seconds to wait for a worker's batch before raising TimeoutError.

    Batches are yielded in sampler order. Numeric NumPy arrays in a batch become
    JAX arrays on the default device (int64/float64 become int32/float32 unless
    ``jax_enable_x64`` is set); other leaves are passed through. Worker processes
    receive the dataset and batchify_fn by pickle when the first iteration starts
    and keep them for the loader's lifetime; an error in a worker is raised again
    here with its original type and message. A worker process that dies (killed,
    exited, crashed) raises ``WorkerError`` naming it and the batch it was making,
    after the batches made before; the next iteration starts new workers.
    ``data.prefetch_to_device(loader)`` puts the batches on the device ahead of the step.

    Raises ValueError for conflicting or invalid arguments, TypeError when the
    dataset or batchify_fn cannot be pickled for worker processes.
    """

    def __init__(self, dataset: Any, batch_size: int | None = None, shuffle: bool = False, sampler: Any = None,
                 last_batch: str | None = None, batch_sampler: Any = None, batchify_fn: Callable | None = None,
                 num_workers: int = 0, pin_memory: bool = False, pin_device_id: int = 0,
                 prefetch: int | None = None, thread_pool: bool = False, timeout: float = 120):
        if pin_memory or pin_device_id:
            _compat.ignored_argument("DataLoader", "pin_memory" if pin_memory else "pin_device_id",
                                     pin_memory or pin_device_id, "batches are copied to the device by JAX")
        if not (hasattr(dataset, "__len__") and hasattr(dataset, "__getitem__")):
            raise TypeError(f"DataLoader: dataset must support len() and indexing, got {type(dataset).__name__}")
        self._dataset = dataset
        if batch_sampler is None:
            if batch_size is None:
                raise ValueError("DataLoader: batch_size must be given unless batch_sampler is given")
            if sampler is None:
                sampler = RandomSampler(len(dataset)) if shuffle else SequentialSampler(len(dataset))
            elif shuffle:
                raise ValueError("DataLoader: shuffle=True cannot be combined with a sampler; "
                                 "pass RandomSampler(len(dataset)) as the sampler or drop shuffle")
            batch_sampler = BatchSampler(sampler, batch_size, last_batch or "keep")
        else:
            given = [name for name, value in (("batch_size", batch_size), ("shuffle", shuffle or None),
                                              ("sampler", sampler), ("last_batch", last_batch))
                     if value is not None]
            if given:
                raise ValueError(f"DataLoader: {', '.join(given)} must not be given together with "
                                 "batch_sampler, which already decides the batches")
        self._batch_sampler = batch_sampler
        if batchify_fn is not None and not callable(batchify_fn):
            raise TypeError(f"DataLoader: batchify_fn must be callable, got {type(batchify_fn).__name__}")
        self._batchify_fn = batchify_fn or default_batchify_fn
        self._num_workers = check_count("DataLoader", "num_workers", num_workers)
        self._prefetch = 2 * self._num_workers if prefetch is None else check_count("DataLoader", "prefetch",
                                                                                    prefetch)
        if not isinstance(timeout, (int, float)) or timeout <= 0:
            raise ValueError(f"DataLoader: timeout must be a positive number of seconds, got {timeout!r}")
        self._timeout = float(timeout)
        self._thread_pool = bool(thread_pool)
        self._executor: futures.Executor | None = None
        self._slots: Any = None
        self._shm_prefix: str | None = None

    def __len__(self) -> int:
        return len(self._batch_sampler)

    def __iter__(self) -> Iterator[Any]:
        return self._epoch(_to_jax)

    def _epoch(self, convert: Callable[[Any], Any]) -> Iterator[Any]:
        """One pass over the batches, each passed through ``convert``. The epoch's seed and the
        sampler's first draw happen here, in the calling thread, so that they do not depend on when
        (or in which thread) the batches are consumed."""
        epoch_seed = int(_random.numpy_rng().integers(2 ** 63))
        batches = enumerate(self._batch_sampler)
        first = next(batches, None)
        if first is not None:
            batches = itertools.chain([first], batches)
        if self._num_workers == 0:
            return (convert(_worker.make_batch(self._dataset, self._batchify_fn, indices, (epoch_seed, k)))
                    for k, indices in batches)
        return self._iter_workers(epoch_seed, batches, convert)

    def _iter_workers(self, epoch_seed: int, batches: Iterator[tuple[int, Any]],
                      convert: Callable[[Any], Any]) -> Iterator[Any]:
        if self._executor is not None and getattr(self._executor, "_broken", False):
            self._replace_dead_pool()
        submit = self._start_workers()
        pending: collections.deque = collections.deque()
        broken = False
        try:
            while True:
                while not broken and len(pending) <= self._prefetch:
                    k, indices = next(batches, (None, None))
                    if k is None:
                        break
                    try:
                        future = submit(indices, (epoch_seed, k), k)
                    except futures.BrokenExecutor:  # a worker died; the batches before this one may be ready
                        future, broken = None, True
                    pending.append((k, indices, future))
                if not pending:
                    return
                k, indices, future = pending.popleft()
                yield convert(self._result(k, future, [(k, indices)] + [(j, i) for j, i, _ in pending]))
        finally:
            for _, _, future in pending:
                if future is not None and not future.cancel() and future.done() and future.exception() is None:
                    _shared_batches.discard(future.result())

    def _start_workers(self) -> Callable[[Any, tuple[int, int], int], futures.Future]:
        """Start the workers once; return ``submit(indices, seed, batch_number) -> Future``."""
        if self._executor is None:
            if self._thread_pool:
                self._executor = futures.ThreadPoolExecutor(self._num_workers, "DataLoader")
            else:
                context = _process_context()
                self._slots = context.Array("q", 2 * self._num_workers)
                if self._shm_prefix is None:
                    self._shm_prefix = _shared_batches.new_prefix()
                    if self._shm_prefix is not None:  # files of batches never collected go with the loader
                        weakref.finalize(self, _shared_batches.remove_leftovers, self._shm_prefix)
                self._executor = futures.ProcessPoolExecutor(
                    self._num_workers, mp_context=context, initializer=_worker.init_process,
                    initargs=(self._pickled_payload(), self._slots, self._shm_prefix))
        executor = self._executor
        if self._thread_pool:
            return lambda indices, seed, k: executor.submit(_worker.make_batch, self._dataset, self._batchify_fn,
                                                            indices, seed)
        return lambda indices, seed, k: executor.submit(_worker.make_batch_in_process, indices, seed, k)

    def _pickled_payload(self) -> bytes:
        try:
            return pickle.dumps((self._dataset, self._batchify_fn), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            raise TypeError(
                f"DataLoader: num_workers={self._num_workers} sends the dataset and batchify_fn to worker "
                f"processes by pickling, and that failed: {type(exc).__name__}: {exc}. Use functions and classes "
                "defined at module level (no lambdas or local functions), or pass thread_pool=True, "
                "or num_workers=0") from exc

    def _result(self, k: int, future: futures.Future | None, in_flight: list[tuple[int, Any]]) -> Any:
        """The batch of ``future`` (batch ``k``); ``in_flight`` lists ``(number, indices)`` of the
        batches not yet delivered, to name the one a dead worker was making."""
        if future is None:
            self._worker_died(k, in_flight)
        done, _ = futures.wait([future], timeout=self._timeout)
        if not done:
            self.close(wait=False, terminate=True)  # a stuck worker would keep the interpreter from exiting
            raise TimeoutError(f"DataLoader: batch {k} was not ready after timeout={self._timeout:g} s; "
                               "a worker may be stuck, or the batch needs a larger timeout. The workers were "
                               "stopped; the next iteration starts new ones")
        try:
            return _shared_batches.collect(future.result())
        except futures.BrokenExecutor as exc:
            self._worker_died(k, in_flight, exc)
        except Exception as exc:
            if hasattr(exc, "add_note"):
                exc.add_note(f"(raised in a DataLoader worker while making batch {k})")
            raise

    def _stop_dead_pool(self) -> tuple[list, dict[int, int]]:
        """Stop the workers of a pool that lost one; return its processes and ``{pid: batch being made}``."""
        executor, slots = self._executor, self._slots
        manager = getattr(executor, "_executor_manager_thread", None)
        if manager is not None:
            manager.join(timeout=10)  # it stops the other workers of a broken pool
        processes = list((getattr(executor, "_processes", None) or {}).values())
        making = _worker.batches_in_hand(slots) if slots is not None else {}
        self.close(wait=False, terminate=True)
        for process in processes:
            process.join(timeout=5)
            if process.exitcode is None:
                process.kill()
                process.join(timeout=5)
        return processes, making

    def _replace_dead_pool(self) -> None:
        """A worker died while no batch was asked for (between epochs): warn, and let new workers start."""
        processes, making = self._stop_dead_pool()
        warnings.warn(f"DataLoader: {_describe_dead(processes, making, {})} while the loader was idle; "
                      "starting new workers", RuntimeWarning, stacklevel=3)

    def _worker_died(self, k: int, in_flight: list[tuple[int, Any]], cause: BaseException | None = None) -> None:
        """Raise WorkerError for batch ``k``, lost with the process pool, naming the worker that died and
        the batch it was making; stop the remaining workers so that none outlives the pool."""
        processes, making = self._stop_dead_pool()
        raise WorkerError(f"DataLoader: {_describe_dead(processes, making, dict(in_flight))}; a worker dies when "
                          f"it is killed, runs out of memory or crashes in native code. Batch {k} and the later "
                          "batches of this epoch were lost with the worker pool; the workers were stopped and the "
                          "next iteration starts new ones") from cause

    def close(self, wait: bool = True, terminate: bool = False) -> None:
        """Stop the workers (a later iteration starts new ones). ``terminate`` kills worker processes
        still busy (threads cannot be killed; a stuck thread ends when its batch does)."""
        executor, self._executor = self._executor, None
        if executor is None:
            return
        if terminate:
            for process in list((getattr(executor, "_processes", None) or {}).values()):
                process.terminate()
        executor.shutdown(wait=wait, cancel_futures=True)

    def __del__(self) -> None:
        try:
            self.close(wait=False)
        except Exception:
            pass


def _describe_dead(processes: list, making: dict[int, int], indices: dict[int, Any]) -> str:
    """``worker process (pid 12, exit code -9: killed by SIGKILL) died while making batch 2 (sample
    indices [4, 5])`` for each process that ended by itself (those the pool stopped, with SIGTERM, only
    when no other ended)."""
    stopped = -signal.SIGTERM
    dead = [p for p in processes if p.exitcode is not None and p.exitcode != stopped] or \
        [p for p in processes if p.exitcode is not None]
    described = []
    for process in dead:
        j = making.get(process.pid)
        doing = (f"died while making batch {j} (sample indices {_short(indices[j])})" if j in indices
                 else f"died while making batch {j}" if j is not None else "died between batches")
        described.append(f"worker process (pid {process.pid}, {_exit_status(process.exitcode)}) {doing}")
    return "; ".join(described) if described else "a worker process died"


def _exit_status(code: int) -> str:
    """``exit code 3`` or ``exit code -9: killed by SIGKILL``."""
    if code < 0 and -code in signal.Signals._value2member_map_:
        return f"exit code {code}: killed by {signal.Signals(-code).name}"
    return f"exit code {code}"


def _short(indices: Any, limit: int = 8) -> str:
    indices = list(indices)
    return str(indices) if len(indices) <= limit else f"[{', '.join(map(str, indices[:limit]))}, ...]"
