"""Modes and state stores: two objects per context answer how code runs right now.

The *mode* (``_context.current().mode``) answers what depends on recording and tracing: how a parameter
is read and written, a block or its compiled forward called, a random key drawn. ``Parameter.data()``,
``Block.__call__``, ``CachedOp`` and ``random.next_key`` ask it and never test which mode it is. The modes:

- :class:`EagerMode` (the bottom): parameters hold their own arrays, blocks run (or call their compiled
  forward) at once, keys come from the global stream;
- :class:`RecordingMode` (inside ``autograd.record()``): the same, with every operation staged on the
  tape; :class:`FrameRecordingMode` records over a frame instead of over the eager mode;
- the frames of :mod:`hybrid._core.functional` (a hybridize trace, ``Block.apply``, a block inside a JAX
  transformation, a ``hybrid.compile`` step, shape inference): parameters, keys and writes belong to
  the functional run.

The *state store* (``_context.current().store``) owns the state that outlives a call: gradients and their
freshness, optimizer states, the loss scaler, optimizer updates, host callbacks. The gradient and
optimizer state, ``backward``, ``Trainer.step``, ``amp`` and the metrics ask it. The stores:

- :data:`EAGER_STORE` outside a compiled step: state lives on its objects, updates run now;
- the :class:`hybrid._core.functional.CompileFrame` of the ``hybrid.compile`` step being traced, whatever
  frames and recordings are inside it: state is cells, inputs and outputs of the step.

Both are fixed when the context is made. A mode or store acts on the object it is given through that
object's own methods (:mod:`hybrid._core.protocols`), so this module imports none of them.
"""
from __future__ import annotations

import threading
from typing import Any, Callable, Sequence

import jax

from . import lazy as _lazy, stream as _stream
from .cells import Cell
from .protocols import BlockCall, CompiledCall, GradWrite, StateStore, StoredParam, UpdateTarget
from .state_lock import state_lock
from .watch import Watchable

__all__ = ["Mode", "EagerMode", "RecordingMode", "FrameRecordingMode", "EAGER", "EagerStore", "EAGER_STORE",
           "holds_tracers", "call_depth"]


class _Depth(threading.local):
    value = 0


call_depth = _Depth()  # nesting of Block calls, so that errors are located once, at the outermost call


def holds_tracers(value: Any) -> bool:
    """Whether ``value`` holds arrays of a JAX transformation (they must not outlive the call); the
    recorded arrays of ``autograd.record()`` are not such arrays."""
    return any(isinstance(leaf, jax.core.Tracer) and not isinstance(leaf, _lazy.LazyArray)
               for leaf in jax.tree_util.tree_leaves(value))


class EagerStore:
    """The state store outside compiled steps: state is written where it lives, updates run now
    (staged on the gradients' recording when they have one)."""

    __slots__ = ()

    def read_cell(self, cell: Cell, getter: Callable[[], Any], outside: Callable[[], Any] | None = None) -> Any:
        return (outside or getter)()

    def write_cell(self, cell: Cell, getter: Callable[[], Any], setter: Callable[[Any], None], value: Any) -> None:
        setter(value)

    def fresh_grads(self, params: Sequence[StoredParam]) -> Sequence[StoredParam]:
        """``params`` itself when every gradient is fresh."""
        fresh = [p.grad_state.fresh for p in params]
        if all(fresh):
            return params
        return [p for p, f in zip(params, fresh) if f]

    def set_grad_fresh(self, param: StoredParam, fresh: bool) -> None:
        param.grad_state.fresh = fresh

    def store_grads(self, write: GradWrite) -> None:
        write.outside()

    def apply_update(self, trainer: UpdateTarget, program: Any, active: list, rescale: Any) -> None:
        trainer.update_now(program, active, rescale)

    def host_call(self, fn: Callable, *args: Any) -> bool:
        return False

    def depends_on(self, watched: Watchable) -> None:
        pass


EAGER_STORE = EagerStore()


class Mode:
    """What every mode answers. The defaults are the eager answers; see :class:`EagerMode`."""

    __slots__ = ()
    recording = False          # operations go on a tape
    inline_hybridized = False  # hybridized children are traced inline (a hybridize trace)
    state_store: StateStore = EAGER_STORE  # the state store of a context in this mode

    # -- parameters ------------------------------------------------------------------
    def read_param(self, param: StoredParam) -> jax.Array:
        """``param.data()``. Raises the parameter's error when it holds no data."""
        with state_lock:  # see hybrid._core.state_lock: the array read is the one a recording holds
            value = param.own_data
            if value is None:
                raise param.no_data_error()
            return value

    def write_param(self, param: StoredParam, value: Any) -> None:
        """``param.set_data(value)``."""
        param.store_data(value)

    # -- blocks ----------------------------------------------------------------------
    def call_block(self, block: BlockCall, args: tuple, kwargs: dict) -> Any:
        """``block(*args, **kwargs)`` after its hooks."""
        if _lazy.under_transform():  # jax.jit(lambda x: net(x)): nothing may write state
            return block._call_in_transform(args, kwargs)
        if block._uses_compiled():
            return block._compiled_op()((args, kwargs))
        return block._run_python(args, kwargs)

    def run_cached(self, op: CompiledCall, entry: Any, arrays: list) -> Any:
        """A hybridized block's compiled forward ``entry`` called on ``arrays``."""
        return op._run_eager(entry, arrays)

    def program_rng(self) -> tuple:
        """The ``(key, counter)`` inputs of a compiled forward that draws random numbers."""
        return _stream.base_key(), _stream.next_counter()

    def next_key(self) -> jax.Array:
        """``hybrid.random.next_key()``."""
        return _stream.next_key_eager()

    def assign_attribute(self, block: BlockCall, name: str, value: Any) -> None:
        """``block.name = value`` where ``value`` holds arrays; the attribute is then set as usual
        unless this raises."""
        if holds_tracers(value):
            raise block._traced_attribute_error(name)

    def deferred_init(self, block: BlockCall) -> None:
        """``block`` is about to initialise parameters whose shapes waited for this call."""

    def before_trace(self, op: CompiledCall, args: tuple) -> None:
        """The cached op ``op`` is about to trace its block for ``args``: parameters that wait for their
        shapes are initialised first, concretely (inside a frame the trace does it)."""
        op.init_deferred(args)

    def read_derived(self, cell: Cell, sources: list, getter: Callable[[], Any]) -> Any:
        """A value computed from the cells ``sources`` that the compiled step being traced may read as
        an input; None here: compute it from the sources."""
        return None


class EagerMode(Mode):
    """The bottom: no tape, no frame."""

    __slots__ = ()


EAGER = EagerMode()


class RecordingMode(Mode):
    """Inside ``autograd.record()`` over the eager mode: every operation goes on ``tape``."""

    __slots__ = ("tape",)
    recording = True

    def __init__(self, tape: _lazy.Tape):
        self.tape = tape

    def read_param(self, param: StoredParam) -> jax.Array:
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

    def call_block(self, block: BlockCall, args: tuple, kwargs: dict) -> Any:
        if block._uses_compiled():
            return block._compiled_op()((args, kwargs))
        out = block._run_python(args, kwargs)
        if call_depth.value == 1:  # an input returned as it is becomes a recorded value too
            out = jax.tree_util.tree_map(self.tape.recorded, out)
        return out

    def run_cached(self, op: CompiledCall, entry: Any, arrays: list) -> Any:
        return op._run_recorded(entry, arrays, self)


class FrameRecordingMode(RecordingMode):
    """``autograd.record()`` inside a frame (a ``hybrid.compile`` step, say): values come from the frame
    (``parent``) and are noted on the tape; everything else is the frame's."""

    __slots__ = ("parent", "inline_hybridized", "state_store")

    def __init__(self, tape: _lazy.Tape, parent: Mode):
        super().__init__(tape)
        self.parent = parent
        self.inline_hybridized = parent.inline_hybridized
        self.state_store = parent.state_store

    def read_param(self, param: StoredParam) -> jax.Array:
        with state_lock:
            value = self.parent.read_param(param)
            self.tape.read_param(param, value)
            return value

    def record_params(self, params: list, avals: list, stored: Callable[[list], list]) -> Sequence[int]:
        return self.tape.slots_of([self.read_param(p) for p in params], False)

    def call_block(self, block: BlockCall, args: tuple, kwargs: dict) -> Any:
        self.state_store.depends_on(block)
        return super().call_block(block, args, kwargs)

    def write_param(self, param: StoredParam, value: Any) -> None:
        self.parent.write_param(param, value)

    def program_rng(self) -> tuple:
        return self.parent.program_rng()

    def next_key(self) -> jax.Array:
        return self.parent.next_key()

    def assign_attribute(self, block: BlockCall, name: str, value: Any) -> None:
        self.parent.assign_attribute(block, name, value)

    def deferred_init(self, block: BlockCall) -> None:
        self.parent.deferred_init(block)

    def before_trace(self, op: CompiledCall, args: tuple) -> None:
        self.parent.before_trace(op, args)


def mode_of(frame: Mode | None, recording: bool, tape: _lazy.Tape | None) -> Mode:
    """The mode of a context with this ``frame`` (or None), ``recording`` flag and ``tape`` (a recording
    context's tape, else the tape a ``pause()`` keeps or None)."""
    if recording:
        assert tape is not None  # every scope that starts recording gives its tape
        return RecordingMode(tape) if frame is None else FrameRecordingMode(tape, frame)
    return EAGER if frame is None else frame
