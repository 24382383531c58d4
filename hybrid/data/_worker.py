"""What DataLoader workers run: indexing the dataset and batchifying, in NumPy only.

Worker processes are forked from Python's fork server, which imports this
module once (and with it hybrid and the jax package) but never starts a JAX
backend, so a fork never copies XLA's threads.
"""
from __future__ import annotations

import pickle
import traceback
from typing import Any, Callable, Sequence

from . import _rng
from ..errors import WorkerError  # noqa: F401 (defined with the other errors)

_dataset: Any = None
_batchify_fn: Callable | None = None
_load_error: str | None = None


def make_batch(dataset: Any, batchify_fn: Callable, indices: Sequence[int], seed: tuple[int, int],
               reseed_globals: bool = False) -> Any:
    """``batchify_fn`` of the samples at ``indices``, with transforms seeded by ``seed``."""
    with _rng.batch_seed(seed, reseed_globals):
        return batchify_fn([dataset[i] for i in indices])


def init_process(payload: bytes) -> None:
    """Worker process start-up: unpickle the dataset and batchify_fn sent by the parent."""
    global _dataset, _batchify_fn, _load_error
    try:
        _dataset, _batchify_fn = pickle.loads(payload)
    except Exception as exc:  # reported with the first batch, where the parent sees it
        _load_error = f"{type(exc).__name__}: {exc}"


def make_batch_in_process(indices: Sequence[int], seed: tuple[int, int]) -> Any:
    if _load_error is not None:
        raise RuntimeError(f"DataLoader worker process could not unpickle the dataset and batchify_fn: "
                           f"{_load_error}. Classes and functions they use must be importable by module "
                           "name (not defined in an interactive session).")
    try:
        return make_batch(_dataset, _batchify_fn, indices, seed, reseed_globals=True)
    except Exception as exc:
        try:
            pickle.loads(pickle.dumps(exc))  # what the parent will do with it
        except Exception:
            raise WorkerError(f"{type(exc).__module__}.{type(exc).__qualname__}: {exc}\n"
                              f"worker traceback:\n{traceback.format_exc()}") from None
        raise
