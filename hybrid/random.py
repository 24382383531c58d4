"""Global random state: one seed and a counter.

Initialisers draw NumPy generators seeded by ``(seed, counter)`` (fast, no
compilation); dropout and other traced randomness draw JAX keys.  Compiled
programs receive the base key and the counter as inputs, so a fresh mask is
drawn on every call and nothing random is baked into a program.
"""
from __future__ import annotations

import jax

from ._core import context as _context
from ._core.stream import base_key, get_state, next_counter, next_key_eager, numpy_rng, seed, set_state  # noqa: F401


def next_key() -> jax.Array:
    """A fresh JAX key, as the current mode draws it: from the active frame while tracing, else from
    the global stream."""
    return _context.current().mode.next_key()


def uniform(low: float = 0.0, high: float = 1.0, shape: tuple = (), dtype="float32") -> jax.Array:
    """Samples from U[low, high) with the given shape and dtype."""
    return jax.random.uniform(next_key(), shape, dtype, low, high)


def normal(loc: float = 0.0, scale: float = 1.0, shape: tuple = (), dtype="float32") -> jax.Array:
    """Samples from N(loc, scale**2) with the given shape and dtype."""
    return loc + scale * jax.random.normal(next_key(), shape, dtype)
