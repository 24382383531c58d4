"""Context scopes that leave every frame: imperative execution in the middle of a trace.

Kept apart from ``_functional`` (the frames) so that ``random``, which frames call for keys, can
step out of a trace without importing the frames.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from . import _context, _lazy

__all__ = ["no_frame"]


@contextmanager
def no_frame() -> Iterator[None]:
    """Run the ``with`` block imperatively, e.g. to initialise a parameter during a trace: no frame, no
    tape, not recording, lazy arrays computed at once."""
    with _context.scope(frame=None, tape=None, recording=False), _lazy.eval_trace():
        yield
