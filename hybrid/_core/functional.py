"""Run blocks as pure functions of arrays.

A :class:`Frame` maps Parameters to the arrays that stand for them (tracers
while a graph is traced, concrete arrays under eager autodiff).  While a frame
is active it is the context's mode (see :mod:`hybrid._core.modes`): ``Parameter.data()``
reads from it, ``Parameter.set_data()`` writes to it, and ``hybrid.random.next_key()``
draws from the frame's key.  This is the one place where the object world (mutable
Parameters) meets the functional world (arrays in, arrays out).
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from jax.experimental import io_callback

from . import cells as _cells, context as _context, modes as _modes, stream as _stream
from .cells import Cell
from .protocols import BlockCall, CompiledCall, GradWrite, StateStore, StoredParam, UpdateTarget
from .modes import holds_tracers  # noqa: F401 - also reached as _functional.holds_tracers
from .scopes import no_frame  # noqa: F401 - also reached as _functional.no_frame
from ..errors import TransformStateError
from .state_lock import state_lock
from .watch import Watchable


class Frame(_modes.Mode):
    """Parameter values, state updates and randomness of one functional run: the mode of a context
    with a frame (see :mod:`hybrid._core.modes`).

    ``key`` is None (draw from the global stream), a key, or ``(base_key, counter)``.
    In a plain Frame hybridized children call their compiled graph; in a
    :class:`TraceFrame` (hybridize tracing a graph) they are inlined. ``state_store`` is the state store
    of a context with this frame: the enclosing whole-step frame, else the eager store.
    """

    __slots__ = ("values", "updates", "accessed", "missing", "key", "key_count", "parent", "state_store")
    inline_hybridized = False
    whole_step = False

    def __init__(self, values: dict, key: Any = None, parent: "Frame | None" = None):
        self.values = values
        self.updates: dict = {}
        self.accessed: dict = {}
        self.missing: dict = {}
        # (base key, call counter), the inputs of a compiled program: derived here, before any layer
        # runs, so that the derivation is no part of the first layer that draws a key (repeated
        # layers then trace alike); unused, it is dead code
        self.key = jax.random.fold_in(*key) if isinstance(key, tuple) and key else key
        self.key_count = 0
        self.parent = parent
        self.state_store: StateStore = parent.state_store if parent is not None else _modes.EAGER_STORE

    def assign_attribute(self, block: BlockCall, name: str, value: Any) -> None:
        """``block.name = value`` inside ``forward``, where ``value`` holds arrays; the attribute is
        then set as usual unless this raises."""
        if not holds_tracers(value):
            return
        raise AttributeError(
            f"{type(block).__name__}.{name}: an attribute assigned inside forward holds a traced value here "
            "(a value_and_grad or functional run), which would outlive the call; return it from forward instead")

    def call_block(self, block: BlockCall, args: tuple, kwargs: dict) -> Any:
        """Run a block called while this frame is active."""
        self.state_store.depends_on(block)
        if block._active and not self.inline_hybridized:
            return block._get_cached_op()((args, kwargs))
        return block._run_forward((args, kwargs))

    def lookup(self, param: StoredParam) -> Any:
        """The array standing for ``param`` in this frame, or None if it is not supplied."""
        self.accessed[param] = True
        value = self.updates.get(param)
        if value is None:
            value = self.values.get(param)
        return value

    def store(self, param: StoredParam, value: Any) -> None:
        """Record ``param.set_data(value)`` made while this frame is active."""
        if param not in self.values and param not in self.updates:
            self.missing[param] = True
        self.accessed[param] = True
        self.updates[param] = value

    def next_key(self) -> jax.Array:
        """A fresh PRNG key derived from the frame's key; records that randomness is used.

        A frame without a key of its own draws from the enclosing frame, or else from the
        global stream."""
        if self.key is None:
            if self.parent is not None:
                return self.parent.next_key()
            self.key = _stream.next_key_eager()
        self.key_count += 1
        return jax.random.fold_in(self.key, self.key_count)

    def deferred_init(self, block: BlockCall) -> None:
        """``block`` is about to initialise parameters whose shapes waited for this call."""

    # -- the mode's answers (hybrid._core.modes.Mode) --
    def read_param(self, param: StoredParam) -> Any:
        with state_lock:
            value = self.lookup(param)
            if value is None:
                value = param.own_data
                if value is None:
                    raise param.no_data_error()
                self.missing[param] = True
            return value

    def write_param(self, param: StoredParam, value: Any) -> None:
        self.store(param, value)

    def run_cached(self, op: CompiledCall, entry: Any, arrays: list) -> Any:
        return op._call_in_frame(entry, arrays, self)

    def program_rng(self) -> tuple:
        return self.next_key(), np.uint32(0)

    def before_trace(self, op: CompiledCall, args: tuple) -> None:
        pass  # the trace initialises deferred parameters


class CompileFrame(Frame):
    """The frame of a whole-step trace (``hybrid.compile``), and the state store of the contexts inside it.

    Every piece of state the step reads or writes is a *cell* with a key, a getter and a
    setter (parameter data, gradients, optimizer states...). A cell read for the first time
    during discovery returns its current concrete value and is recorded in ``missing_cells``;
    the next trace receives it as an input. Writes are collected in ``writes`` and become
    outputs. Host inputs are values computed in Python before each call (learning rate,
    random counter). Gradient freshness and the autograd tape are local to the trace.
    """

    __slots__ = ("cell_inputs", "reads", "writes", "setters", "missing_cells", "host_values", "host_inputs",
                 "missing_host", "fresh", "watched")
    whole_step = True

    def __init__(self, cell_inputs: dict, host_values: dict):
        super().__init__({}, key=None)
        self.cell_inputs = cell_inputs
        self.reads: dict = {}
        self.writes: dict = {}
        self.setters: dict = {}
        self.missing_cells: dict = {}
        self.host_values = host_values
        self.host_inputs: dict = {}
        self.missing_host: dict = {}
        self.fresh: dict = {}
        self.watched: dict = {}  # blocks called and optimizers run in the step: the compiled step watches them
        self.state_store = self

    def read(self, key: Any, getter: Callable[[], Any]) -> Any:
        """The current value of a cell: written earlier in the step, an input, or (discovery) concrete."""
        if key in self.writes:
            return self.writes[key]
        self.reads[key] = getter
        if key in self.cell_inputs:
            return self.cell_inputs[key]
        value = getter()
        self.missing_cells[key] = getter
        return value

    def read_derived(self, key: Any, sources: list, getter: Callable[[], Any]) -> Any:
        """A cell computed from the cells ``sources`` as they are before the step (weights put in a
        kernel's layout, say): read as :meth:`read` does; None once the step has written one of them."""
        if any(source in self.writes for source in sources):
            return None
        return self.read(key, getter)

    def write(self, key: Any, getter: Callable[[], Any], setter: Callable[[Any], None], value: Any) -> None:
        """Set a cell; the value is written back with ``setter`` after every call."""
        self.writes[key] = value
        self.setters[key] = (getter, setter)

    def host_input(self, key: Any, compute: Callable[[], Any], shape: tuple, dtype: Any) -> Any:
        """A value computed on the host by ``compute()`` before each call, as a program input."""
        self.host_inputs[key] = (compute, shape, dtype)
        if key in self.host_values:
            return self.host_values[key]
        self.missing_host[key] = (compute, shape, dtype)
        with jax.ensure_compile_time_eval():
            if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
                return jax.random.key(0)
            return jnp.zeros(shape, dtype)

    def lookup(self, param: StoredParam) -> Any:
        if not param.is_initialized:
            return None
        return self.read(Cell(_cells.DATA, param), lambda: param.own_data)

    def store(self, param: StoredParam, value: Any) -> None:
        def getter(p: StoredParam = param) -> Any:
            return p.own_data

        def setter(new, p=param):
            p.assign_data(new)
        self.write(Cell(_cells.DATA, param), getter, setter, value)

    def assign_attribute(self, block: BlockCall, name: str, value: Any) -> None:
        """An attribute assigned in the step becomes a program output, set after every call."""
        def setter(new, block=block, name=name):
            object.__setattr__(block, name, new)
        self.write(Cell(_cells.ATTRIBUTE, block, name), lambda: None, setter, value)

    # -- the state store's answers (hybrid._core.protocols.StateStore) --
    def read_cell(self, cell: Cell, getter: Callable[[], Any], outside: Callable[[], Any] | None = None) -> Any:
        return self.read(cell, getter)

    def write_cell(self, cell: Cell, getter: Callable[[], Any], setter: Callable[[Any], None], value: Any) -> None:
        self.write(cell, getter, setter, value)

    def fresh_grads(self, params: Sequence[StoredParam]) -> list:
        fresh = self.fresh
        return [p for p in params if fresh.get(p, p.grad_state.fresh)]

    def set_grad_fresh(self, param: StoredParam, fresh: bool) -> None:
        self.fresh[param] = fresh  # local to the trace; the compiled step sets it after every call

    def store_grads(self, write: GradWrite) -> None:
        write.in_step(self)

    def apply_update(self, trainer: UpdateTarget, program: Any, active: list, rescale: Any) -> None:
        trainer.update_in_trace(self, program, active, rescale)

    def host_call(self, fn: Callable, *args: Any) -> bool:
        io_callback(fn, None, *args, ordered=True)
        return True

    def depends_on(self, watched: Watchable) -> None:
        self.watched[watched] = True

    def next_key(self) -> jax.Array:
        if self.key is None:
            base = self.host_input(Cell(_cells.RNG_BASE), _stream.base_key, (), _stream.base_key().dtype)
            counter = self.host_input(Cell(_cells.RNG_COUNTER), _stream.next_counter, (), jnp.uint32)
            self.key = jax.random.fold_in(base, counter)
        self.key_count += 1
        return jax.random.fold_in(self.key, self.key_count)


class TraceFrame(Frame):
    """The frame of hybridize tracing a forward into a graph: hybridized children are inlined, and
    attributes assigned in ``forward`` are collected as outputs."""

    __slots__ = ("attributes", "previous")
    inline_hybridized = True

    def __init__(self, values: dict, key: Any = None, parent: "Frame | None" = None):
        super().__init__(values, key, parent)
        self.attributes: dict = {}  # (block, name) -> traced value: outputs of the call, set after it
        self.previous: dict = {}    # (block, name) -> value before the trace (or _ABSENT)

    def assign_attribute(self, block: BlockCall, name: str, value: Any) -> None:
        self.attributes[(block, name)] = value
        self.previous.setdefault((block, name), block.__dict__.get(name, _ABSENT))

    def set_attributes(self, values: dict) -> None:
        """Give attributes the values of a functional run, ``{(block, name): value}``, until
        :meth:`restore_attributes`."""
        for (block, name), value in values.items():
            self.previous.setdefault((block, name), block.__dict__.get(name, _ABSENT))
            object.__setattr__(block, name, value)

    def restore_attributes(self) -> None:
        """Put back the values attributes had before the trace (the traced ones must not outlive it)."""
        for (block, name), value in self.previous.items():
            if value is _ABSENT:
                object.__delattr__(block, name)
            else:
                object.__setattr__(block, name, value)


class ApplyFrame(TraceFrame):
    """The frame of ``Block.apply``: parameters and attribute state come from a state dict, and every
    write (parameter updates in ``updates``, attributes in ``attributes``) is collected instead of
    reaching the blocks. Randomness draws only from the key given to ``apply``."""

    __slots__ = ()

    def next_key(self) -> jax.Array:
        if self.key is None:
            raise ValueError("this call uses randomness (e.g. Dropout in training mode): pass a PRNG key "
                             "to apply(..., key=jax.random.key(0))")
        return super().next_key()


def refusal(what: str) -> TransformStateError:
    return TransformStateError(
        f"{what} inside a JAX transformation (jax.jit, grad, vmap, ...), where the new value would be a "
        "tracer outliving it; nothing was changed. Inside transformations call the network as a pure "
        "function: out, new_state = net.apply(state, *inputs, training=..., key=...), with "
        "state = net.state(), then net.load_state(new_state) outside")


class TransformFrame(Frame):
    """The frame of a block called inside a JAX transformation without ``apply``: parameters are read
    from the blocks, and anything that would write state raises :class:`TransformStateError`
    (the blocks stay as they were). A pure inference call works."""

    __slots__ = ()

    def lookup(self, param: StoredParam) -> Any:
        return None

    def store(self, param: StoredParam, value: Any) -> None:
        raise refusal(f"Parameter {param.name!r} would be updated (running statistics?)")

    def assign_attribute(self, block: BlockCall, name: str, value: Any) -> None:
        raise refusal(f"attribute {name!r} would be assigned")

    def next_key(self) -> jax.Array:
        raise refusal("a random key would be drawn (dropout in training mode?)")

    def deferred_init(self, block: BlockCall) -> None:
        raise refusal("parameters with deferred shapes would be initialised (call the block once "
                       "outside the transformation first, or give the shapes)")


_ABSENT = object()


def current() -> Frame | None:
    """The innermost active frame, or None when parameters hold their own values."""
    return _context.current().frame


@contextmanager
def frame(values: dict, key: Any = None, frame_type: type = Frame) -> Iterator[Frame]:
    """Activate a new frame (nested in the current one) for the duration of the ``with`` block.
    Recording stops inside: a frame's run is differentiated as a whole by its caller."""
    new = frame_type(values, key, current())
    with _context.scope(frame=new, recording=False):
        yield new


@contextmanager
def activate_compile_frame(new: CompileFrame) -> Iterator[CompileFrame]:
    """Make ``new`` the current frame and the current whole-step frame."""
    with _context.scope(frame=new, tape=None, recording=False):
        yield new
