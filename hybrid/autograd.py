"""Imperative autograd: record/pause scopes, a tape of block calls, and backward.

JAX arrays carry no tape, so the unit of recording is a *block call*: every
outermost block called inside ``record()`` becomes one tape node holding its
vector-Jacobian product (compiled for hybridized blocks, MXNet's CachedOp
design).  ``backward(heads)`` walks the nodes from the heads back, chaining
nodes through the arrays that flow between them, and writes each reached
parameter's gradient according to its ``grad_req``.

Computation between blocks must itself happen in a block (e.g. a loss, or a
``HybridLambda``): a head that no recorded block produced, or a recorded block
whose outputs never reach the heads, is an error rather than a silent zero.
For free-form functions use :func:`value_and_grad`.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from . import functional
from .errors import AutogradError
from .parameter import Parameter, unique_params

__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training", "backward",
           "value_and_grad", "set_recording", "set_training"]


class _State(threading.local):
    def __init__(self):
        self.recording = False
        self.training = False


_state = _State()


def is_recording() -> bool:
    """True inside ``record()`` (and not inside ``pause()``)."""
    return _state.recording


def is_training() -> bool:
    """True when layers behave as in training (dropout active, BatchNorm batch statistics)."""
    return _state.training


def set_recording(flag: bool) -> bool:
    """Set the recording flag; returns the previous value."""
    previous, _state.recording = _state.recording, bool(flag)
    return previous


def set_training(flag: bool) -> bool:
    """Set the training flag; returns the previous value."""
    previous, _state.training = _state.training, bool(flag)
    return previous


class _Scope:
    """Context manager (and decorator) setting recording and/or training flags."""

    def __init__(self, recording: bool | None, training: bool | None):
        self._recording, self._training = recording, training
        self._saved: list[tuple[bool, bool]] = []

    def __enter__(self) -> "_Scope":
        self._saved.append((_state.recording, _state.training))
        if self._recording and not _state.recording:
            current_tape().clear()
        if self._recording is not None:
            _state.recording = self._recording
        if self._training is not None:
            _state.training = self._training
        return self

    def __exit__(self, *exc: Any) -> None:
        _state.recording, _state.training = self._saved.pop()

    def __call__(self, fn: Callable) -> Callable:
        def wrapped(*args, **kwargs):
            with _Scope(self._recording, self._training):
                return fn(*args, **kwargs)
        wrapped.__name__ = getattr(fn, "__name__", "wrapped")
        wrapped.__doc__ = getattr(fn, "__doc__", None)
        return wrapped


def record(train_mode: bool = True) -> _Scope:
    """Record block calls for ``backward``; layers run in training mode unless ``train_mode=False``.

    Entering the outermost ``record()`` starts a fresh tape.
    """
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


# -- the tape -------------------------------------------------------------------------
class TapeNode:
    """One recorded block call.

    ``vjp(output_cotangents) -> (param_cotangents, input_cotangents)`` where the
    parameter list is ``params`` and the input list ``inputs`` (the inputs that
    were outputs of earlier nodes).
    """

    __slots__ = ("owner", "params", "inputs", "outputs", "vjp")

    def __init__(self, owner: str, params: list[Parameter], inputs: list, outputs: list, vjp: Callable):
        self.owner, self.params, self.inputs, self.outputs, self.vjp = owner, params, inputs, outputs, vjp


class _Tape(threading.local):
    def __init__(self):
        self.nodes: list[TapeNode] = []
        self.producers: dict[int, tuple[int, int]] = {}

    def clear(self) -> None:
        self.nodes = []
        self.producers = {}

    def add(self, node: TapeNode) -> None:
        index = len(self.nodes)
        self.nodes.append(node)
        for position, array in enumerate(node.outputs):
            self.producers[id(array)] = (index, position)

    def producer_of(self, array: Any) -> tuple[int, int] | None:
        """``(node index, output index)`` of the node that produced ``array`` (by identity)."""
        entry = self.producers.get(id(array))
        if entry is not None and self.nodes[entry[0]].outputs[entry[1]] is array:
            return entry
        return None


_tape = _Tape()


def new_tape() -> _Tape:
    """An empty tape (whole-step traces keep their own)."""
    return _Tape()


def current_tape() -> _Tape:
    """The tape of the enclosing whole-step trace, else the thread's tape."""
    frame = functional.compile_frame()
    return frame.tape if frame is not None else _tape


def needs_grad(array: Any) -> bool:
    """True when ``array`` was produced by a recorded node (so gradients must flow into it)."""
    return _state.recording and current_tape().producer_of(array) is not None


def record_node(node: TapeNode) -> None:
    """Append a block call to the tape (called by Block.__call__ while recording)."""
    current_tape().add(node)


def _as_list(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


_FILLED: dict[tuple, Any] = {}


def _filled(shape: tuple, dtype: Any, value: int) -> jax.Array:
    """A cached constant array (arrays are immutable, so one per shape/dtype/value suffices)."""
    key = (shape, dtype, value)
    array = _FILLED.get(key)
    if array is None:
        if len(_FILLED) > 256:
            _FILLED.clear()
        with functional.no_frame(), jax.ensure_compile_time_eval():
            array = _FILLED[key] = jnp.full(shape, value, dtype)
    return array


def backward(heads: Any, head_grads: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
    """Accumulate gradients of ``heads`` into every parameter reached on the tape.

    Args:
        heads: an array or list of arrays output by blocks called inside ``record()``.
        head_grads: matching cotangents (default: ones, i.e. the gradient of ``sum(heads)``).
        retain_graph: keep the tape for another ``backward``.
    Raises:
        AutogradError: a head was not produced by a recorded block, or a recorded block
            with trainable parameters does not reach the heads. No gradient is written then.
    """
    tape = current_tape()
    heads = _as_list(heads)
    grads_in = [None] * len(heads) if head_grads is None else _as_list(head_grads)
    if len(grads_in) != len(heads):
        raise AutogradError(f"backward got {len(heads)} heads but {len(grads_in)} head_grads")
    if not tape.nodes:
        raise AutogradError("backward(): nothing was recorded. Compute the heads inside "
                            "`with autograd.record():` by calling blocks (e.g. loss = loss_fn(net(x), y)).")
    cotangents: dict[tuple[int, int], Any] = {}
    for i, (head, head_grad) in enumerate(zip(heads, grads_in)):
        entry = tape.producer_of(head)
        if entry is None:
            raise AutogradError(
                f"backward(): head {i} (shape {getattr(head, 'shape', '?')}) was not output by a block called "
                "inside autograd.record(). Operations on block outputs outside blocks (e.g. loss.mean(), "
                "jnp ops) are not recorded: call backward on the block's output directly (it sums it), "
                "wrap the extra computation in a HybridLambda/Block, or use autograd.value_and_grad.")
        ct = _filled(head.shape, head.dtype, 1) if head_grad is None else jnp.asarray(head_grad, dtype=head.dtype)
        if ct.shape != head.shape:
            raise AutogradError(f"backward(): head_grads[{i}] has shape {ct.shape}, head has {head.shape}")
        cotangents[entry] = cotangents[entry] + ct if entry in cotangents else ct

    param_grads: dict[Parameter, Any] = {}
    reached = set()
    for index in range(len(tape.nodes) - 1, -1, -1):
        node = tape.nodes[index]
        outs = [cotangents.pop((index, j), None) for j in range(len(node.outputs))]
        if all(c is None for c in outs):
            continue
        reached.add(index)
        outs = [_filled(o.shape, o.dtype, 0) if c is None else c for c, o in zip(outs, node.outputs)]
        p_cts, in_cts = node.vjp(outs)
        for param, g in zip(node.params, p_cts):
            param_grads[param] = param_grads[param] + g if param in param_grads else g
        for array, g in zip(node.inputs, in_cts):
            entry = tape.producer_of(array)
            if entry is not None:
                cotangents[entry] = cotangents[entry] + g if entry in cotangents else g

    unreached = [node.owner for i, node in enumerate(tape.nodes) if i not in reached and node.params]
    if unreached:
        raise AutogradError(
            f"backward(): the output of recorded block(s) {unreached} never reaches the heads through "
            "recorded computation, so their parameters would get no gradient. Either an unrecorded "
            "operation sits between blocks (move it into a block, e.g. HybridLambda), or the call is not "
            "part of the loss (run it under autograd.pause() or outside record()).")
    if functional.compile_frame() is not None:
        for param, g in param_grads.items():
            param._accumulate_grad(g)
    else:
        for param, g in param_grads.items():  # Parameter._accumulate_grad, inlined: this loop is per step
            if param._grad_req == "add" and param._grad is not None and not param._grad_dropped:
                g = param._grad + g
            param._grad, param._grad_fresh, param._grad_dropped = g, True, False
    if not retain_graph:
        tape.clear()


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
        if any(p._data is None for p in unique):
            _infer_deferred(fn, args, kwargs)
        values = [p.data() for p in unique]
        updated: list[Parameter] = []

        def pure(vals):
            with functional.frame(dict(zip(unique, vals)), kind="functional") as fr:
                previous = set_training(train_mode)
                try:
                    out = fn(*args, **kwargs)
                finally:
                    set_training(previous)
            updated[:] = list(fr.updates)
            if not (hasattr(out, "shape") and out.shape == ()):
                raise AutogradError(f"value_and_grad: fn must return a scalar, got shape "
                                    f"{getattr(out, 'shape', type(out).__name__)}; reduce it (e.g. .mean())")
            return out, list(fr.updates.values())

        previous_recording = set_recording(False)
        try:
            (value, new_states), grads = jax.value_and_grad(pure, has_aux=True)(values)
        finally:
            set_recording(previous_recording)
        for param, state in zip(updated, new_states):
            param.set_data(state)
        by_param = dict(zip(unique, grads))
        for param, g in by_param.items():
            param._accumulate_grad(g)
        if names is None:
            return value, [by_param.get(p) for p in plist]
        return value, {n: by_param[p] for n, p in zip(names, plist) if p in by_param}

    return wrapped


def _infer_deferred(fn: Callable, args: Sequence, kwargs: dict) -> None:
    """Run ``fn`` abstractly once so that deferred parameters get their shapes and data."""
    def run():
        with functional.frame({}, kind="functional"):
            return fn(*args, **kwargs)
    previous = set_recording(False)
    try:
        jax.eval_shape(run)
    finally:
        set_recording(previous)
