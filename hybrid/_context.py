"""THE execution context: one object on a thread-local stack says how code runs right now.

A :class:`Context` holds everything that decides how a block is called, how a parameter is
read and written, where gradients go and where random keys come from:

- ``training``: layers behave as in training (dropout on, batch statistics);
- ``tape``: the :class:`hybrid._lazy.Tape` recording operations (inside ``autograd.record()``), or None;
- ``frame``: the :class:`hybrid._functional.Frame` of a functional run (a hybridize trace, a
  ``value_and_grad``, a ``hybrid.compile`` step), or None when parameters hold their own values;
- ``eager_only``: hybridized blocks run their Python forward (used by ``Block.summary``).

Scopes (``record``, ``pause``, ``train_mode``, frames) push a modified copy and pop it on
exit; nothing else keeps mode state.
"""
from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

__all__ = ["Context", "current", "scope", "replace_current"]


class Context:
    """The current mode; immutable, replaced by :func:`scope`."""

    __slots__ = ("training", "tape", "recording", "frame", "eager_only")

    def __init__(self, training: bool = False, tape: Any = None, recording: bool = False, frame: Any = None,
                 eager_only: bool = False):
        self.training = training
        self.tape = tape            # the tape of the enclosing record(), kept across pause()
        self.recording = recording  # operations go on the tape
        self.frame = frame
        self.eager_only = eager_only

    def replace(self, **changes: Any) -> "Context":
        fields = {name: getattr(self, name) for name in self.__slots__}
        fields.update(changes)
        return Context(**fields)

    @property
    def compile_frame(self) -> Any:
        """The frame of the enclosing ``hybrid.compile`` step, or None."""
        frame = self.frame
        while frame is not None:
            if getattr(frame, "whole_step", False):
                return frame
            frame = frame.parent
        return None


class _Stack(threading.local):
    def __init__(self):
        self.top = Context()


_stack = _Stack()


class _Depth(threading.local):
    value = 0


call_depth = _Depth()  # nesting of Block calls, so that errors are located once, at the outermost call


def current() -> Context:
    """The context code runs in now."""
    return _stack.top


def replace_current(**changes: Any) -> Context:
    """Change the current context in place (no restoring on exit); returns the previous one."""
    previous = _stack.top
    _stack.top = previous.replace(**changes)
    return previous


@contextmanager
def scope(**changes: Any) -> Iterator[Context]:
    """Run the ``with`` block in a copy of the current context with ``changes`` applied."""
    previous = _stack.top
    _stack.top = previous.replace(**changes)
    try:
        yield _stack.top
    finally:
        _stack.top = previous
