"""Imperative autograd: record/pause scopes, backward and grad, and Function (a hand-written backward).

The public face: the scopes and ``value_and_grad`` are here; the backward engine that drives the tape
is :mod:`hybrid._core.gradients`, the recorder :mod:`hybrid._core.lazy`.

Inside ``record()`` every JAX operation on recorded values is staged on a tape (see
:mod:`hybrid._core.lazy`): block calls, ``jax.numpy``/``jax.nn``/``jax.lax`` functions, Python
operators, indexing, and values read from ``p.data()``. The results look and behave like
ordinary arrays; their data is computed when Python needs it, or at ``trainer.step``, which
runs forward, loss, backward and update as one compiled program. ``backward(heads)`` stages
the gradients of every parameter the heads depend on; ``grad(heads, variables)`` returns
gradients with respect to any arrays used inside ``record()``.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import jax

from ._core import context as _context, functional as _functional, lazy as _lazy, scopes as _scopes
from ._core.custom_function import Function
from ._core.gradients import backward, grad
from .errors import AutogradError
from .parameter import Parameter, unique_params

__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training", "backward", "grad",
           "value_and_grad", "set_recording", "set_training", "stats", "Function"]

stats = _lazy.Stats


def is_recording() -> bool:
    """True inside ``record()`` (and not inside ``pause()``)."""
    return _context.current().mode.recording


def is_training() -> bool:
    """True when layers behave as in training (dropout active, BatchNorm batch statistics)."""
    return _context.current().training


def set_training(flag: bool) -> bool:
    """Set the training flag of the current context; returns the previous value."""
    return _context.replace_current(training=bool(flag)).training


def set_recording(flag: bool) -> bool:
    """Start (on a fresh tape) or stop recording in the current context; returns the previous value.
    Prefer the ``record()`` and ``pause()`` scopes, which also restore the state on exit."""
    return _scopes.set_recording(flag)


class _Scope:
    """Context manager (and decorator) setting recording and/or training."""

    def __init__(self, recording: bool | None, training: bool | None):
        self._recording, self._training = recording, training
        self._entered: list = []

    def __enter__(self) -> "_Scope":
        self._entered.append(_scopes.ModeScope(self._recording, self._training).__enter__())
        return self

    def __exit__(self, *exc: Any) -> None:
        self._entered.pop().__exit__(*exc)

    def __call__(self, fn: Callable) -> Callable:
        def wrapped(*args, **kwargs):
            with _Scope(self._recording, self._training):
                return fn(*args, **kwargs)
        wrapped.__name__ = getattr(fn, "__name__", "wrapped")
        wrapped.__doc__ = getattr(fn, "__doc__", None)
        return wrapped


def record(train_mode: bool = True) -> _Scope:
    """Record every JAX operation for ``backward``/``grad``; layers run in training mode unless
    ``train_mode=False``. The outermost ``record()`` starts a new recording."""
    return _Scope(True, train_mode)


def pause(train_mode: bool = False) -> _Scope:
    """Stop recording inside a ``record()`` scope (predict mode unless ``train_mode=True``)."""
    return _Scope(False, train_mode)


def train_mode() -> _Scope:
    """Training behaviour (dropout, batch statistics) without changing recording."""
    return _Scope(None, True)


def predict_mode() -> _Scope:
    """Inference behaviour without changing recording."""
    return _Scope(None, False)


# -- functional form ----------------------------------------------------------------
def value_and_grad(fn: Callable, params: Any, train_mode: bool = True) -> Callable:
    """Make ``g(*args) -> (value, grads)`` for a scalar-valued ``fn`` using blocks.

    ``fn`` may contain any JAX code between blocks (e.g. ``loss(net(x), y).mean()``).
    ``params`` is a dict (e.g. ``net.collect_params()``) or a list of Parameters;
    ``grads`` has the same container type, holding arrays for parameters with
    ``grad_req != 'null'``.  Like ``backward``, each such parameter's ``grad()`` is
    written (or accumulated for ``'add'``), so ``trainer.step`` can follow.
    State updates (e.g. BatchNorm running statistics) are written back.
    """
    def wrapped(*args: Any, **kwargs: Any):
        names, plist = (list(params.keys()), list(params.values())) if isinstance(params, dict) \
            else (None, list(params))
        unique = [p for p in unique_params(plist) if p.grad_req != "null"]
        if any(not p.is_initialized for p in unique):
            _infer_deferred(fn, args, kwargs)
        values = [p.data() for p in unique]
        updated: list[Parameter] = []

        def pure(vals):
            with _functional.frame(dict(zip(unique, vals))) as fr, _context.scope(training=train_mode):
                out = fn(*args, **kwargs)
            updated[:] = list(fr.updates)
            if not (hasattr(out, "shape") and out.shape == ()):
                raise AutogradError(f"value_and_grad: fn must return a scalar, got shape "
                                    f"{getattr(out, 'shape', type(out).__name__)}; reduce it (e.g. .mean())")
            return out, list(fr.updates.values())

        with _context.scope(recording=False, tape=None):
            (value, new_states), grads = jax.value_and_grad(pure, has_aux=True)(values)
        for param, state in zip(updated, new_states):
            param.set_data(state)
        by_param = dict(zip(unique, grads))
        for param, g in by_param.items():
            param.accumulate_grad(g)
        if names is None:
            return value, [by_param.get(p) for p in plist]
        return value, {n: by_param[p] for n, p in zip(names, plist) if p in by_param}

    return wrapped


def _infer_deferred(fn: Callable, args: Sequence, kwargs: dict) -> None:
    """Run ``fn`` abstractly once so that deferred parameters get their shapes and data."""
    def run():
        with _functional.frame({}):
            return fn(*args, **kwargs)
    with _context.scope(recording=False, tape=None):
        jax.eval_shape(run)
