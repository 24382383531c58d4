"""Run blocks as pure functions of arrays.

A :class:`Frame` maps Parameters to the arrays that stand for them (tracers
while a graph is traced, concrete arrays under eager autodiff).  While a frame
is active, ``Parameter.data()`` reads from it, ``Parameter.set_data()`` writes
to it, and ``hybrid.random.next_key()`` draws from the frame's key.  This is
the one place where the object world (mutable Parameters) meets the functional
world (arrays in, arrays out).
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

import jax

_local = threading.local()


class Frame:
    """Parameter values, state updates and randomness of one functional run.

    ``key`` is None (draw from the global stream), a key, or ``(base_key, counter)``.
    ``kind`` is ``'trace'`` while hybridize traces a graph (hybridized children
    are inlined) and ``'functional'`` otherwise (hybridized children call their
    compiled graph).
    """

    __slots__ = ("values", "updates", "accessed", "missing", "key", "key_count", "kind")

    def __init__(self, values: dict, key: Any = None, kind: str = "functional"):
        self.values = values
        self.updates: dict = {}
        self.accessed: dict = {}
        self.missing: dict = {}
        self.key = key
        self.key_count = 0
        self.kind = kind

    def lookup(self, param) -> Any:
        """The array standing for ``param`` in this frame, or None if it is not supplied."""
        self.accessed[param] = True
        value = self.updates.get(param)
        if value is None:
            value = self.values.get(param)
        return value

    def next_key(self) -> jax.Array:
        """A fresh PRNG key derived from the frame's key; records that randomness is used."""
        if self.key is None:
            from . import random as _random
            self.key = _random.next_key_eager()
        elif isinstance(self.key, tuple):  # (base key, call counter) inputs of a compiled program
            self.key = jax.random.fold_in(*self.key)
        self.key_count += 1
        return jax.random.fold_in(self.key, self.key_count)


def current() -> Frame | None:
    """The innermost active frame, or None when running imperatively."""
    return getattr(_local, "frame", None)


@contextmanager
def frame(values: dict, key: Any = None, kind: str = "functional") -> Iterator[Frame]:
    """Activate a new frame for the duration of the ``with`` block."""
    new = Frame(values, key, kind)
    previous = getattr(_local, "frame", None)
    _local.frame = new
    try:
        yield new
    finally:
        _local.frame = previous


@contextmanager
def no_frame() -> Iterator[None]:
    """Temporarily run imperatively, e.g. to initialise a parameter during a trace."""
    previous = getattr(_local, "frame", None)
    _local.frame = None
    try:
        yield
    finally:
        _local.frame = previous
