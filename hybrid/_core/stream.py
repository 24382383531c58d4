"""The global random stream: one seed and a counter (``hybrid.random`` is its public face).

Kept apart from ``hybrid.random`` so that the eager mode (:mod:`hybrid._core.modes`) can draw keys
without importing the context that holds it.
"""
from __future__ import annotations

import os

import jax
import numpy as np

from . import lazy as _lazy

__all__ = ["seed", "get_state", "set_state", "next_counter", "base_key", "numpy_rng", "next_key_eager"]

_seed: int = int.from_bytes(os.urandom(4), "little")
_counter: int = 0
_base_key: jax.Array | None = None


def seed(seed_value: int) -> None:
    """Make initialisation and dropout reproducible from ``seed_value`` (a non-negative int)."""
    global _seed, _counter, _base_key
    if not isinstance(seed_value, (int, np.integer)) or seed_value < 0:
        raise ValueError(f"hybrid.random.seed expects a non-negative integer, got {seed_value!r}")
    _seed, _counter, _base_key = int(seed_value), 0, None


def get_state() -> tuple[int, int]:
    """``(seed, counter)``: everything needed to continue the random stream."""
    return _seed, _counter


def set_state(state: tuple[int, int]) -> None:
    """Restore a state returned by :func:`get_state`."""
    global _seed, _counter, _base_key
    _seed, _counter, _base_key = int(state[0]), int(state[1]), None


def next_counter() -> np.uint32:
    """Advance the stream by one draw and return that draw's index."""
    global _counter
    value = _counter
    _counter += 1
    return np.uint32(value & 0xFFFFFFFF)


def base_key() -> jax.Array:
    """The JAX key of the current seed (cached; concrete, also when asked inside a trace)."""
    global _base_key
    if _base_key is None:
        with _lazy.eval_trace(), jax.ensure_compile_time_eval():
            _base_key = jax.random.key(_seed)
    return _base_key


def numpy_rng() -> np.random.Generator:
    """A NumPy generator for the next draw of the stream (used by initialisers)."""
    return np.random.default_rng([_seed, int(next_counter())])


def next_key_eager() -> jax.Array:
    """A concrete JAX key for the next draw of the stream."""
    counter = next_counter()
    with _lazy.eval_trace(), jax.ensure_compile_time_eval():
        return jax.random.fold_in(base_key(), counter)
