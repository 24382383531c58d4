"""Scopes that change how code runs, with JAX's trace state kept in step with the context.

Every change of recording goes through here: entering or leaving a recording sets the context's
``recording``/``tape`` (hence its mode, :mod:`hybrid._core.modes`) and JAX's current trace together.
Kept apart from ``_functional`` (the frames) so that ``random`` can step out of a trace without
importing the frames.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Iterator

from . import context as _context, lazy as _lazy

__all__ = ["no_frame", "recording_on", "ModeScope", "set_recording"]


@contextmanager
def no_frame() -> Iterator[None]:
    """Run the ``with`` block imperatively, e.g. to initialise a parameter during a trace: no frame, no
    tape, not recording, lazy arrays computed at once."""
    with _context.scope(frame=None, tape=None, recording=False), _lazy.eval_trace():
        yield


@contextmanager
def recording_on(tape: Any) -> Iterator[None]:
    """Record on ``tape`` (which may belong to a ``record()`` scope already left: ``amp.scale_loss``,
    the gradients ``backward`` accumulates)."""
    with _context.scope(recording=True, tape=tape), _lazy.recording_trace(tape):
        yield


class ModeScope:
    """``autograd.record()``/``pause()``/``train_mode()``/``predict_mode()`` entered once: start or stop
    recording (``recording`` None: leave it) and set the training flag (None: leave it). The outermost
    recording starts a new tape; a ``record()`` inside ``pause()`` continues the paused one."""

    __slots__ = ("_recording", "_training", "_previous", "_trace")
    _previous: _context.Context  # the context to restore, set by __enter__
    _trace: Any  # the JAX trace scope entered, if one

    def __init__(self, recording: bool | None, training: bool | None):
        self._recording, self._training = recording, training
        self._trace = None

    def __enter__(self) -> "ModeScope":
        ctx = _context.current()
        changes: dict = {}
        trace = None
        if self._training is not None:
            changes["training"] = self._training
        if self._recording and not ctx.recording:
            tape = ctx.tape
            if tape is None or tape.released or tape.parent is not _lazy.current_trace():
                tape = _lazy.Tape(_lazy.current_trace())
            changes.update(recording=True, tape=tape)
            trace = _lazy.recording_trace(tape)
        elif self._recording is False and ctx.recording:
            changes["recording"] = False
            trace = _lazy.parent_trace(ctx.tape)
        self._previous = _context.replace_current(**changes)
        if trace is not None:
            trace.__enter__()
            self._trace = trace
        return self

    def __exit__(self, *exc: Any) -> None:
        trace, self._trace = self._trace, None
        if trace is not None:
            trace.__exit__(*exc)
        _context.restore(self._previous)


def set_recording(flag: bool) -> bool:
    """Start (on a fresh tape) or stop recording in the current context, without restoring it later;
    returns the previous value."""
    ctx = _context.current()
    previous = ctx.recording
    if bool(flag) != previous:
        tape = _lazy.Tape(_lazy.current_trace()) if flag else None
        _lazy.set_trace(tape.trace if tape is not None else (ctx.tape.parent if ctx.tape is not None else None))
        _context.replace_current(recording=bool(flag), tape=tape)
    return previous
