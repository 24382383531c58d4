"""The backward engine: the gradients of recorded heads, staged on the tape that recorded them.

``backward(heads)`` finds the parameters the heads depend on among those read inside ``record()`` and
hands their gradients to the current state store (``store_grads``, :mod:`hybrid._core.modes`): written onto
the parameters (computed with the recording's next run, packed when every request is ``'write'``), or
as cells of a ``hybrid.compile`` step. ``grad(heads, variables)`` returns gradients of any recorded
values. Parameters are reached through their public doors (``grad_reqs``, ``set_grads``, ``grad_state``,
``accumulate_grad``); :mod:`hybrid.autograd` is the public face.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import jax

from . import context as _context, lazy as _lazy, scopes as _scopes
from .protocols import GradParam, StepStore
from ..errors import AutogradError

__all__ = ["backward", "grad"]


def _as_list(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    return [x]


def _tape_of(heads: list, caller: str) -> _lazy.Tape:
    tape = None
    for i, head in enumerate(heads):
        if not isinstance(head, _lazy.LazyArray) or head._tape.released:
            raise AutogradError(
                f"{caller}: head {i} (shape {getattr(head, 'shape', '?')}) was not computed inside "
                "`with autograd.record():`. Compute the loss inside the scope, e.g. "
                "`with autograd.record(): loss = loss_fn(net(x), y).mean()`.")
        if tape is not None and head._tape is not tape:
            raise AutogradError(f"{caller}: the heads come from different record() scopes; compute them in one")
        tape = head._tape
    if tape is None:
        raise AutogradError(f"{caller}: no heads given")
    if tape.freed_heads:
        freed = tape.freed()
        for i, head in enumerate(heads):
            if head._slot in freed:
                raise AutogradError(
                    f"{caller}: head {i} (shape {tuple(head.shape)}) was already differentiated by an earlier "
                    "backward()/grad(), which freed its graph. Pass retain_graph=True to that call to "
                    "differentiate it again; values computed after it can be differentiated without.")
    return tape


def _head_grads(heads: list, head_grads: Any, caller: str) -> list:
    grads = [None] * len(heads) if head_grads is None else _as_list(head_grads)
    if len(grads) != len(heads):
        raise AutogradError(f"{caller}: got {len(heads)} heads but {len(grads)} head_grads")
    out = []
    for i, (head, g) in enumerate(zip(heads, grads)):
        if g is not None:
            g = jax.numpy.asarray(g, dtype=head.dtype) if not isinstance(g, jax.Array) else g
            if tuple(g.shape) != tuple(head.shape):
                raise AutogradError(f"{caller}: head_grads[{i}] has shape {tuple(g.shape)}, head has "
                                    f"{tuple(head.shape)}")
        out.append(g)
    return out


def backward(heads: Any, head_grads: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
    """Compute the gradient of ``heads`` for every parameter they depend on (``loss.backward()`` is the same).

    Args:
        heads: an array or list of arrays computed inside ``record()``.
        head_grads: matching cotangents (default: ones, i.e. the gradient of ``sum(heads)``).
        retain_graph: keep the heads' graph for another ``backward``/``grad`` of them. Without it, as in
            MXNet, the heads cannot be differentiated again and the values computed on their way are
            constants for later heads; values recorded afterwards can be differentiated by another
            ``backward`` in the same ``record()`` scope.
        train_mode: accepted as MXNet's; it has no effect. The gradient is that of the forward as it
            was recorded, whose training mode ``record(train_mode=...)`` set.
    Each reached parameter's ``grad()`` is written (``grad_req='write'``: a later backward overwrites it)
    or accumulated (``'add'``). The gradients are computed with the next value Python needs, or with
    the update at ``trainer.step``.

    Raises:
        AutogradError: a head was not computed inside ``record()`` or was differentiated already, or the
            heads depend on no parameter with ``grad_req != 'null'``. No gradient is written then.
    """
    heads = _as_list(heads)
    tape = _tape_of(heads, "backward()")
    head_grads = _head_grads(heads, head_grads, "backward()")
    head_slots = [tape.slot_of(h) for h in heads]
    needed = tape.depends_on(head_slots, tape.freed() if tape.freed_heads else None)
    recorded, recorded_slots, wrt_avals = tape.recording.reads()
    requests = recorded[0].grad_reqs(recorded) if recorded else []
    if "null" not in requests and needed.issuperset(recorded_slots):
        trainable = params = recorded  # the common case: every parameter read is trained and reached
        wrt = list(recorded_slots)
    else:
        wrt_avals = None
        trained = [(p, s) for p, s, req in zip(recorded, recorded_slots, requests) if req != "null"]
        trainable = [p for p, _ in trained]
        params = [p for p, s in trained if s in needed]
        wrt = [s for _, s in trained if s in needed]
        requests = params[0].grad_reqs(params) if params else []
    if not params:
        if trainable:
            reachable = tape.depends_on(head_slots) if tape.freed_heads else needed
            if any(s in reachable for _, s in trained):
                raise AutogradError(
                    "backward(): the heads reach the parameters used inside record() only through values that an "
                    "earlier backward()/grad() differentiated and freed, so none would get a gradient. Pass "
                    "retain_graph=True to that earlier call, or compute the heads again after it.")
            raise AutogradError(
                f"backward(): the heads do not depend on any of the {len(trainable)} parameter(s) used inside "
                f"record() (e.g. {trainable[0].name!r}), so none would get a gradient. Compute the heads from the "
                "blocks' outputs; to differentiate plain arrays use autograd.grad(heads, variables).")
        return  # nothing trainable was recorded: no gradient to write
    _context.current().store.store_grads(_GradWrite(tape, heads, head_grads, params, requests, wrt, wrt_avals))
    if not retain_graph:
        tape.free(head_slots)


class _GradWrite:
    """The gradients of one ``backward``, stored as the state store says (:class:`hybrid._core.protocols.GradWrite`)."""

    __slots__ = ("tape", "heads", "head_grads", "params", "requests", "wrt", "wrt_avals")

    def __init__(self, tape: _lazy.Tape, heads: list, head_grads: list, params: Sequence[GradParam],
                 requests: list, wrt: list, wrt_avals: list | None):
        self.tape, self.heads, self.head_grads = tape, heads, head_grads
        self.params, self.requests, self.wrt, self.wrt_avals = params, requests, wrt, wrt_avals

    def outside(self) -> None:
        """On the parameters: computed with the recording's next run."""
        tape, params = self.tape, self.params
        if self.requests.count("write") == len(self.requests):
            # the common case, without a Python call per parameter: the step's program returns the
            # gradients packed, and they are split into arrays only if someone reads them
            avals = self.wrt_avals
            slots = tape.grad(self.heads, self.head_grads, self.wrt, False, slots_only=True, avals=avals)
            params[0].set_grads(params, tape.packed(slots, functools.partial(_gradients_split, params), avals))
            return
        new = self._accumulated()

        def computed(values: list) -> None:  # the gradients' data replaces the recorded values
            for param, lazy, value in zip(params, new, values):
                lazy._value = value
                state = param.grad_state
                if state.value is lazy:
                    state.set(value, state.fresh)
        tape.write_group(object(), [tape.slot_of(g) for g in new], computed)

    def in_step(self, frame: StepStore) -> None:
        """As cells of the whole-step ``frame`` (``hybrid.compile``)."""
        self._accumulated()

    def _accumulated(self) -> list:
        grads = self.tape.grad(self.heads, self.head_grads, self.wrt, create_graph=False)
        with _scopes.recording_on(self.tape):
            return [param.accumulate_grad(g) for param, g in zip(self.params, grads)]


def _gradients_split(params: Sequence[GradParam], pack: Any, values: list) -> None:
    """Packed gradients were split: parameters still holding them get the arrays."""
    for param, value in zip(params, values):
        state = param.grad_state
        if _lazy.pack_of(state.value) is pack:
            state.set(value, state.fresh)


def grad(heads: Any, variables: Any, head_grads: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, train_mode: bool = True) -> Any:
    """Gradients of ``heads`` with respect to ``variables`` (MXNet's ``autograd.grad``).

    ``variables`` is an array or list of arrays used inside ``record()``: plain arrays (the
    replacement for ``attach_grad``), values read with ``p.data()``, or intermediate results.
    Returns an array or a list matching ``variables``. With ``create_graph=True`` the
    gradients are themselves recorded, so a loss can use them (e.g. a gradient penalty).
    Unless ``retain_graph`` (default: ``create_graph``), the heads' graph is freed as by ``backward``.
    ``train_mode`` is accepted as MXNet's and has no effect (as for :func:`backward`).

    Raises:
        AutogradError: a head was not computed inside ``record()``, or a variable was not used there.
    """
    single = not isinstance(variables, (list, tuple))
    variables = _as_list(variables)
    heads = _as_list(heads)
    tape = _tape_of(heads, "grad()")
    head_grads = _head_grads(heads, head_grads, "grad()")
    slots = []
    for i, v in enumerate(variables):
        if isinstance(v, _lazy.LazyArray) and v._tape is tape:
            slots.append(v._slot)
        elif id(v) in tape.input_ids:
            slots.append(tape.input_ids[id(v)])
        else:
            raise AutogradError(f"grad(): variable {i} (shape {getattr(v, 'shape', '?')}) was not used inside "
                                "the record() scope that computed the heads")
    grads = tape.grad(heads, head_grads, slots, create_graph=create_graph)
    if not (create_graph if retain_graph is None else retain_graph):
        tape.free([h._slot for h in heads])
    return grads[0] if single else grads


def _loss_backward(head: Any, out_grad: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
    backward(head, head_grads=None if out_grad is None else [out_grad], retain_graph=retain_graph,
             train_mode=train_mode)


_lazy.set_backward_engine(_loss_backward)
