"""THE execution context: one object on a thread-local stack says how code runs right now.

A :class:`Context` holds everything that decides how a block is called, how a parameter is
read and written, where gradients go and where random keys come from:

- ``training``: layers behave as in training (dropout on, batch statistics);
- ``tape``: the :class:`hybrid._core.lazy.Tape` recording operations (inside ``autograd.record()``), or None;
- ``frame``: the :class:`hybrid._core.functional.Frame` of a functional run (a hybridize trace, a
  ``value_and_grad``, a ``hybrid.compile`` step), or None when parameters hold their own values;
- ``eager_only``: hybridized blocks run their Python forward (used by ``Block.summary``);
- ``mode``: the object that answers how parameters are read and written, blocks called and keys drawn
  in this context (:mod:`hybrid._core.modes`); consumers ask it and never test which it is;
- ``store``: the state store, which owns gradients, optimizer states and updates, the loss scaler and
  host callbacks: the eager store, or the ``hybrid.compile`` step being traced (:mod:`hybrid._core.modes`).

Scopes (``record``, ``pause``, ``train_mode``, frames) push a modified copy and pop it on
exit; nothing else keeps mode state.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

from .modes import call_depth, mode_of
from .protocols import StateStore

__all__ = ["Context", "current", "scope", "replace_current", "restore", "stack", "call_depth"]


class Context:
    """The current mode; immutable, replaced by :func:`scope`. ``mode`` (a :class:`hybrid._core.modes.Mode`)
    and ``store`` (a :class:`hybrid._core.protocols.StateStore`, the mode's) are computed from ``frame``,
    ``recording`` and ``tape`` when the context is made."""

    __slots__ = ("training", "tape", "recording", "frame", "eager_only", "mode", "store")

    def __init__(self, training: bool = False, tape: Any = None, recording: bool = False, frame: Any = None,
                 eager_only: bool = False):
        self.training = training
        self.tape = tape            # the tape of the enclosing record(), kept across pause()
        self.recording = recording  # operations go on the tape
        self.frame = frame
        self.eager_only = eager_only
        self.mode = mode = mode_of(frame, recording, tape)
        self.store: StateStore = mode.state_store

    def replace(self, **changes: Any) -> "Context":
        fields = {name: getattr(self, name) for name in _FIELDS}
        fields.update(changes)
        return Context(**fields)


_FIELDS = ("training", "tape", "recording", "frame", "eager_only")


class _Stack(threading.local):
    def __init__(self):
        self.top = Context()


_stack = _Stack()
stack = _stack  # ``stack.top`` is ``current()``, for the hot paths (Parameter.data, Block.__call__)


def current() -> Context:
    """The context code runs in now."""
    return _stack.top


def replace_current(**changes: Any) -> Context:
    """Change the current context in place (no restoring on exit); returns the previous one."""
    previous = _stack.top
    _stack.top = previous.replace(**changes)
    return previous


def restore(previous: Context) -> None:
    """Make ``previous`` (what :func:`replace_current` returned) the current context again."""
    _stack.top = previous


@contextmanager
def scope(**changes: Any) -> Iterator[Context]:
    """Run the ``with`` block in a copy of the current context with ``changes`` applied."""
    previous = _stack.top
    _stack.top = previous.replace(**changes)
    try:
        yield _stack.top
    finally:
        _stack.top = previous
