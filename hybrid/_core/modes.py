"""Modes: one object per context answers how code runs right now.

Consumers (``Parameter.data``, ``Block.__call__``, ``CachedOp``, ``random.next_key``, the gradient and
optimizer state, ``Trainer.step``, metrics) ask the current mode, ``_context.current().mode``, and never
test which mode it is. The modes:

- :class:`EagerMode` (the bottom): parameters hold their own arrays, blocks run (or call their compiled
  forward) at once, keys come from the global stream, state is written where it lives;
- :class:`RecordingMode` (inside ``autograd.record()``): the same, with every operation staged on the
  tape; :class:`FrameRecordingMode` records over a frame instead of over the eager mode;
- the frames of :mod:`hybrid._core.functional` (a hybridize trace, ``Block.apply``, a block inside a JAX
  transformation, a ``hybrid.compile`` step, shape inference): parameters, keys and writes belong to
  the functional run; the whole-step frame answers the state cells.

A mode acts on the object it is given through that object's own methods (a parameter's stored array,
a block's forward, a cached op's program, a trainer's update), so this module imports none of them.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import jax

from . import lazy as _lazy, stream as _stream
from .cells import Cell
from .state_lock import state_lock

__all__ = ["Mode", "EagerMode", "RecordingMode", "FrameRecordingMode", "EAGER", "holds_tracers", "call_depth"]


class _Depth(threading.local):
    value = 0


call_depth = _Depth()  # nesting of Block calls, so that errors are located once, at the outermost call


def holds_tracers(value: Any) -> bool:
    """Whether ``value`` holds arrays of a JAX transformation (they must not outlive the call); the
    recorded arrays of ``autograd.record()`` are not such arrays."""
    return any(isinstance(leaf, jax.core.Tracer) and not isinstance(leaf, _lazy.LazyArray)
               for leaf in jax.tree_util.tree_leaves(value))


class Mode:
    """What every mode answers. The defaults are the eager answers; see :class:`EagerMode`."""

    __slots__ = ()
    recording = False          # operations go on a tape
    inline_hybridized = False  # hybridized children are traced inline (a hybridize trace)

    # -- parameters ------------------------------------------------------------------
    def read_param(self, param: Any) -> jax.Array:
        """``param.data()``. Raises the parameter's error when it holds no data."""
        with state_lock:  # see hybrid._core.state_lock: the array read is the one a recording holds
            value = param.own_data
            if value is None:
                raise param.no_data_error()
            return value

    def write_param(self, param: Any, value: Any) -> None:
        """``param.set_data(value)``."""
        param.store_data(value)

    # -- blocks ----------------------------------------------------------------------
    def note_call(self, block: Any) -> None:
        """A block is called in this mode (a whole-step frame watches the blocks of its step)."""

    def call_block(self, block: Any, args: tuple, kwargs: dict) -> Any:
        """``block(*args, **kwargs)`` after its hooks."""
        if _lazy.under_transform():  # jax.jit(lambda x: net(x)): nothing may write state
            return block._call_in_transform(args, kwargs)
        if block._uses_compiled():
            return block._compiled_op()((args, kwargs))
        return block._run_python(args, kwargs)

    def run_cached(self, op: Any, entry: Any, arrays: list) -> Any:
        """A hybridized block's compiled forward ``entry`` called on ``arrays``."""
        return op._run_eager(entry, arrays)

    def program_rng(self) -> tuple:
        """The ``(key, counter)`` inputs of a compiled forward that draws random numbers."""
        return _stream.base_key(), _stream.next_counter()

    def next_key(self) -> jax.Array:
        """``hybrid.random.next_key()``."""
        return _stream.next_key_eager()

    def assign_attribute(self, block: Any, name: str, value: Any) -> None:
        """``block.name = value`` where ``value`` holds arrays; the attribute is then set as usual
        unless this raises."""
        if holds_tracers(value):
            raise block._traced_attribute_error(name)

    def deferred_init(self, block: Any) -> None:
        """``block`` is about to initialise parameters whose shapes waited for this call."""

    def before_trace(self, op: Any, args: tuple) -> None:
        """The cached op ``op`` is about to trace its block for ``args``: parameters that wait for their
        shapes are initialised first, concretely (inside a frame the trace does it)."""
        op.init_deferred(args)

    # -- state cells: gradients, freshness, optimizer states, the loss scaler ----------
    def read_cell(self, cell: Cell, getter: Callable[[], Any], outside: Callable[[], Any] | None = None) -> Any:
        """The value of ``cell``: ``getter()``, or ``outside()`` when given (how it is read outside a
        compiled step, where ``getter`` is the step's input)."""
        return (outside or getter)()

    def write_cell(self, cell: Cell, getter: Callable[[], Any], setter: Callable[[Any], None], value: Any) -> None:
        """Set ``cell`` to ``value`` (``setter(value)``; in a compiled step, after every call)."""
        setter(value)

    def read_derived(self, cell: Cell, sources: list, getter: Callable[[], Any]) -> Any:
        """A value computed from the cells ``sources`` that a compiled step may read as an input; None
        here: compute it from the sources."""
        return None

    def fresh_grads(self, params: Sequence) -> Sequence:
        """Those of ``params`` (``params`` itself when all are) whose gradient ``backward`` wrote since their last optimizer step."""
        fresh = [p.grad_state.fresh for p in params]
        if all(fresh):
            return params
        return [p for p, f in zip(params, fresh) if f]

    def set_grad_fresh(self, param: Any, fresh: bool) -> None:
        """Mark ``param``'s gradient fresh (written by backward) or consumed (by an optimizer step)."""
        param.grad_state.fresh = fresh

    def store_grads(self, write: Any) -> None:
        """Store the gradients of a ``backward``: ``write.outside()`` (on the parameters), or
        ``write.in_step(frame)`` (as cells of a compiled step)."""
        write.outside()

    def apply_update(self, trainer: Any, program: Any, active: list, rescale: Any) -> None:
        """``trainer``'s optimizer update of ``active`` (staged on the gradients' recording if they have one)."""
        trainer.update_now(program, active, rescale)

    def host_call(self, fn: Callable, *args: Any) -> bool:
        """Inside a compiled step: schedule ``fn(*args)`` on the host with the step's concrete values
        and return True. Here: False (the caller runs it now)."""
        return False


class EagerMode(Mode):
    """The bottom: no tape, no frame."""

    __slots__ = ()


EAGER = EagerMode()


class RecordingMode(Mode):
    """Inside ``autograd.record()`` over the eager mode: every operation goes on ``tape``."""

    __slots__ = ("tape", "parent")
    recording = True

    def __init__(self, tape: Any, parent: Mode = EAGER):
        self.tape = tape
        self.parent = parent

    def read_param(self, param: Any) -> jax.Array:
        with state_lock:
            value = param.own_data
            if value is None:
                raise param.no_data_error()
            self.tape.read_param(param, value)
            return value

    def record_params(self, params: list, avals: list, stored: Callable[[list], list]) -> Sequence[int]:
        """The tape slots of ``params``' values, noted as parameter reads (``avals``: their known shapes;
        ``stored(params)``: the arrays they hold, ``hybrid.parameter.data_of``)."""
        with state_lock:
            return self.tape.read_params(params, stored(params), avals)

    def call_block(self, block: Any, args: tuple, kwargs: dict) -> Any:
        if block._uses_compiled():
            return block._compiled_op()((args, kwargs))
        out = block._run_python(args, kwargs)
        if call_depth.value == 1:  # an input returned as it is becomes a recorded value too
            out = jax.tree_util.tree_map(self.tape.recorded, out)
        return out

    def run_cached(self, op: Any, entry: Any, arrays: list) -> Any:
        return op._run_recorded(entry, arrays, self)

    # everything else as the mode below
    def write_param(self, param: Any, value: Any) -> None:
        self.parent.write_param(param, value)

    def note_call(self, block: Any) -> None:
        self.parent.note_call(block)

    def program_rng(self) -> tuple:
        return self.parent.program_rng()

    def next_key(self) -> jax.Array:
        return self.parent.next_key()

    def assign_attribute(self, block: Any, name: str, value: Any) -> None:
        self.parent.assign_attribute(block, name, value)

    def deferred_init(self, block: Any) -> None:
        self.parent.deferred_init(block)

    def before_trace(self, op: Any, args: tuple) -> None:
        self.parent.before_trace(op, args)

    def read_cell(self, cell: Cell, getter: Callable[[], Any], outside: Callable[[], Any] | None = None) -> Any:
        return self.parent.read_cell(cell, getter, outside)

    def write_cell(self, cell: Cell, getter: Callable[[], Any], setter: Callable[[Any], None], value: Any) -> None:
        self.parent.write_cell(cell, getter, setter, value)

    def fresh_grads(self, params: Sequence) -> list:
        return self.parent.fresh_grads(params)

    def set_grad_fresh(self, param: Any, fresh: bool) -> None:
        self.parent.set_grad_fresh(param, fresh)

    def store_grads(self, write: Any) -> None:
        self.parent.store_grads(write)

    def apply_update(self, trainer: Any, program: Any, active: list, rescale: Any) -> None:
        self.parent.apply_update(trainer, program, active, rescale)

    def host_call(self, fn: Callable, *args: Any) -> bool:
        return self.parent.host_call(fn, *args)


class FrameRecordingMode(RecordingMode):
    """``autograd.record()`` inside a frame (a ``hybrid.compile`` step, say): values come from the frame
    and are noted on the tape."""

    __slots__ = ("inline_hybridized",)

    def __init__(self, tape: Any, parent: Mode):
        super().__init__(tape, parent)
        self.inline_hybridized = parent.inline_hybridized

    def read_param(self, param: Any) -> jax.Array:
        with state_lock:
            value = self.parent.read_param(param)
            self.tape.read_param(param, value)
            return value

    def record_params(self, params: list, avals: list, stored: Callable[[list], list]) -> Sequence[int]:
        return self.tape.slots_of([self.read_param(p) for p in params], False)

    def call_block(self, block: Any, args: tuple, kwargs: dict) -> Any:
        self.parent.note_call(block)
        return super().call_block(block, args, kwargs)


def mode_of(frame: Any, recording: bool, tape: Any) -> Mode:
    """The mode of a context with this ``frame`` (or None), ``recording`` flag and ``tape``."""
    if recording:
        return RecordingMode(tape) if frame is None else FrameRecordingMode(tape, frame)
    return EAGER if frame is None else frame
