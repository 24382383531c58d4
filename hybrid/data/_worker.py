"""What DataLoader workers run: indexing the dataset and batchifying, in NumPy only.

Worker processes are forked from Python's fork server, which imports this
module once (and with it hybrid and the jax package) but never starts a JAX
backend, so a fork never copies XLA's threads.
"""
from __future__ import annotations

import os
import pickle
import traceback
from typing import Any, Callable, Sequence

from . import _rng, _shared_batches
from ..errors import WorkerError  # noqa: F401 (defined with the other errors)

IDLE = -1

_dataset: Any = None
_batchify_fn: Callable | None = None
_load_error: str | None = None
_slots: Any = None  # shared with the parent: (pid, batch being made or IDLE) per worker
_slot: int | None = None
_shm_prefix: str | None = None  # batches go through /dev/shm files of this prefix (None: through the pipe)


def make_batch(dataset: Any, batchify_fn: Callable, indices: Sequence[int], seed: tuple[int, int],
               reseed_globals: bool = False) -> Any:
    """``batchify_fn`` of the samples at ``indices``, with transforms seeded by ``seed``."""
    with _rng.batch_seed(seed, reseed_globals):
        return batchify_fn([dataset[i] for i in indices])


def init_process(payload: bytes, slots: Any = None, shm_prefix: str | None = None) -> None:
    """Worker process start-up: unpickle the dataset and batchify_fn sent by the parent, and claim
    a pair of ``slots`` (a shared int64 array of ``2 * num_workers``) to report the batch in hand.
    With ``shm_prefix``, large arrays of a batch are returned through shared memory (_shared_batches)."""
    global _dataset, _batchify_fn, _load_error, _slots, _slot, _shm_prefix
    _shm_prefix = shm_prefix
    if slots is not None:
        with slots.get_lock():
            free = [i for i in range(0, len(slots), 2) if slots[i] == 0]
            if free:
                _slots, _slot = slots, free[0]
                slots[_slot], slots[_slot + 1] = os.getpid(), IDLE
    try:
        _dataset, _batchify_fn = pickle.loads(payload)
    except Exception as exc:  # reported with the first batch, where the parent sees it
        _load_error = f"{type(exc).__name__}: {exc}"


def batches_in_hand(slots: Any) -> dict[int, int]:
    """``{pid: batch number}`` of the workers that were making a batch (read by the parent)."""
    with slots.get_lock():
        pairs = [(slots[i], slots[i + 1]) for i in range(0, len(slots), 2)]
    return {pid: batch for pid, batch in pairs if pid and batch != IDLE}


def make_batch_in_process(indices: Sequence[int], seed: tuple[int, int], number: int = IDLE) -> Any:
    """Batch ``number`` of the epoch (``seed[1]``), made in a worker process. Exceptions that pickle
    cannot rebuild, and ``SystemExit``, become WorkerError."""
    if _load_error is not None:
        raise RuntimeError(f"DataLoader worker process could not unpickle the dataset and batchify_fn: "
                           f"{_load_error}. Classes and functions they use must be importable by module "
                           "name (not defined in an interactive session).")
    if _slot is not None:
        _slots[_slot + 1] = number
    try:
        batch = make_batch(_dataset, _batchify_fn, indices, seed, reseed_globals=True)
    except SystemExit as exc:
        raise WorkerError(f"a sample called sys.exit({exc.code!r}) in a DataLoader worker process\n"
                          f"worker traceback:\n{traceback.format_exc()}") from None
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))  # what the parent will do with it
        except Exception:
            raise WorkerError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}\n"
                              f"worker traceback:\n{traceback.format_exc()}") from None
        raise
    finally:
        if _slot is not None:
            _slots[_slot + 1] = IDLE
    return batch if _shm_prefix is None else _shared_batches.share(batch, _shm_prefix)
