"""Lazy recording of JAX computations: the one module that uses JAX internals (``jax._src``).

Inside ``autograd.record()`` every JAX operation on a recorded value (a block output, a
``jax.numpy`` call, an operator, ``p.data()``) is *staged* on a :class:`Tape` instead of being
run: the result is a :class:`LazyArray`, a JAX tracer that knows its shape and dtype.
The tape is compiled and run as one XLA program when Python needs a value (``float``,
``print``, ``np.asarray``, ``if``, any use outside ``record()``) or at the step boundary
(``trainer.step``), so forward, loss, backward and update of a step become one program.
Compiled programs are cached by a structural key built while recording (operation and
parameters, input shapes and dtypes, which value feeds which), never by hashing a jaxpr.

Gradients are nodes of the tape too (:meth:`Tape.grad`): replaying the tape differentiates
the prefix that precedes each gradient node with ``jax.vjp``, which also gives gradients
of gradients (``create_graph``).

A ``LazyArray`` behaves as a concrete array: its value is computed on first need and kept,
and JAX operations on it outside the recording scope use that value.
"""
from __future__ import annotations

import functools
import itertools
import logging
import operator
import sys
import weakref
from collections import OrderedDict
from typing import Any, Callable, Sequence

import jax
import numpy as np
from jax._src import core
from jax._src.array import ArrayImpl
from jax._src import linear_util as lu
from jax._src.interpreters import partial_eval as pe

from . import _memory_report as memory_report, compile_log
from .graph.target import compiler_options
from ._state_lock import state_lock
from .errors import AutogradError

__all__ = ["LazyArray", "Tape", "concrete", "resolve", "is_member", "pack_of", "open_tape", "check_jax_version", "SUPPORTED_JAX"]

log = logging.getLogger("hybrid.lazy")

# The JAX versions whose internals (Trace, Tracer, custom_jvp/vjp staging) this module was
# written and tested against. Outside this range importing hybrid fails loudly.
SUPPORTED_JAX = ((0, 10, 0), (0, 11, 0))


def check_jax_version(version: str = jax.__version__) -> None:
    """Raise ImportError when ``version`` is outside :data:`SUPPORTED_JAX` (lower inclusive)."""
    parts = tuple(int("".join(c for c in p if c.isdigit()) or 0) for p in version.split(".")[:3])
    low, high = SUPPORTED_JAX
    if not (low <= parts < high):
        raise ImportError(f"hybrid's recording of imperative code supports jax >= {'.'.join(map(str, low))} and "
                          f"< {'.'.join(map(str, high))}; jax {version} is installed. Install a supported jax "
                          "(pip install 'jax>=0.10,<0.11').")


check_jax_version()


def _force(tracer: "LazyArray") -> Any:
    value = tracer._value
    if value is None:
        tracer._tape.materialize()
        value = tracer._value
        if value is None and tracer._packed is not None:
            pack, index = tracer._packed
            value = tracer._value = pack.value(index)
    return value


class LazyArray(core.Tracer):
    """A recorded value: shape and dtype now, the data when first needed."""

    __slots__ = ("_tape", "_slot", "_value", "_packed")

    def __init__(self, tape: "Tape", aval: Any, slot: int, packed: tuple | None = None):
        self._trace = tape.trace  # core.Tracer.__init__, inlined: thousands are made per second
        self.aval = aval
        self._tape = tape
        self._slot = slot
        self._value = None
        self._packed = packed  # (_Pack, index) when the tape computes it inside a packed buffer

    # the value, computed on demand -----------------------------------------------------
    def full_lower(self):
        # JAX calls this when an operation runs outside the recording trace: use the value.
        return _force(self)

    @property
    def dimension_as_value(self):
        # A staging trace (jit, make_jaxpr) that meets a recorded value asks this hook, whose
        # result it uses instead: the value, computed under that trace's parent.
        return self._lower_for_staging

    def _lower_for_staging(self):
        return _force(self)

    def to_concrete_value(self):
        return self._value  # only once computed: JAX asks this on hot paths

    def __array__(self, dtype=None, copy=None):
        return np.asarray(_force(self), dtype=dtype)

    def __bool__(self):
        return bool(_force(self))

    def __int__(self):
        return int(_force(self))

    def __float__(self):
        return float(_force(self))

    def __complex__(self):
        return complex(_force(self))

    def __index__(self):
        return _force(self).__index__()

    def __hex__(self):
        return hex(_force(self))

    def __oct__(self):
        return oct(_force(self))

    def __repr__(self):
        return repr(_force(self))

    def __str__(self):
        return str(_force(self))

    def __format__(self, spec):
        return format(_force(self), spec)

    def __reduce__(self):
        return _force(self).__reduce__()

    def __dlpack__(self, *args, **kwargs):
        return _force(self).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return _force(self).__dlpack_device__()

    def item(self, *args):
        return _force(self).item(*args)

    def tolist(self):
        return _force(self).tolist()

    def tobytes(self, order="C"):
        return _force(self).tobytes(order)

    def block_until_ready(self):
        packed = self._packed
        if self._value is None and packed is not None and packed[0].values is None and packed[0].buffers is not None:
            jax.block_until_ready(packed[0].buffers)  # waiting needs no split
        else:
            _force(self).block_until_ready()
        return self

    def copy_to_host_async(self):
        _force(self).copy_to_host_async()

    def is_deleted(self):
        return False

    @property
    def sharding(self):
        return _force(self).sharding

    @property
    def device(self):
        return _force(self).device

    def devices(self):
        return _force(self).devices()

    @property
    def committed(self):
        return _force(self).committed

    @property
    def addressable_shards(self):
        return _force(self).addressable_shards

    @property
    def is_fully_replicated(self):
        return _force(self).is_fully_replicated

    @property
    def nbytes(self):
        return self.aval.size * self.aval.dtype.itemsize

    def backward(self, out_grad: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
        """``autograd.backward(self, out_grad, retain_graph, train_mode)`` (Gluon's ``loss.backward()``)."""
        from . import autograd
        autograd.backward(self, head_grads=None if out_grad is None else [out_grad], retain_graph=retain_graph,
                          train_mode=train_mode)


# Reductions called as methods (``loss.mean()``, ``l.sum()``) and arithmetic operators on recorded values
# (``l * 0.5``, ``a + b``) are staged as one call each, from a cache keyed by the operation, its static
# arguments and the operands' shapes and dtypes. JAX's own route through its jitted functions costs the
# recording several times more. Operands that are arrays or Python numbers enter as inputs, as on JAX's
# route, so a number that changes from step to step does not make a new program.
_STAGED_METHODS = ("sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin", "any", "all")
_STAGED_OPERATORS = ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "matmul")
_OPERANDS = {int, float, bool, ArrayImpl}  # (and LazyArray): the other operand types staged from the cache
_STAGED: dict = {}  # key -> (function of the operands returning [result], [result aval])


def _staged(tracer: "LazyArray", key: Any, operands: list, make: Callable[[], Callable]) -> Any:
    """The recorded result of ``make()(*operands)`` (a one-result function fixed by ``key``), staged on
    ``tracer``'s tape; its result's shape and dtype are found once per key."""
    staged = _STAGED.get(key)
    if staged is None:
        fn = make()
        specs = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in map(core.typeof, operands)]
        with core.set_current_trace(core.eval_trace):
            (out,) = jax.eval_shape(fn, *specs)
        if len(_STAGED) > 4096:
            _STAGED.clear()
        staged = _STAGED[key] = (fn, [core.ShapedArray(out.shape, out.dtype, weak_type=out.weak_type)])
    fn, out_avals = staged
    return tracer._tape.call(fn, key, operands, out_avals, keyed_inputs=False)[0]


def _staged_method(name: str) -> Callable:
    def method(self: LazyArray, *args: Any, **kwargs: Any) -> Any:
        if core.trace_ctx.trace is self._trace:  # recording on this value's tape
            key = ("method", name, args, tuple(kwargs.items()), self.aval)
            try:
                hash(key)
            except TypeError:  # an array argument (``where=``): JAX's route
                pass
            else:
                return _staged(self, key, [self], lambda: lambda value: [getattr(value, name)(*args, **kwargs)])
        return core.Tracer.__getattr__(self, name)(*args, **kwargs)
    method.__name__ = name
    return method


def _staged_operator(name: str, reflected: bool) -> Callable:
    op = getattr(operator, name)
    jax_method = getattr(core.Tracer, f"__{'r' if reflected else ''}{name}__")

    def method(self: LazyArray, other: Any) -> Any:
        kind = type(other)
        if core.trace_ctx.trace is self._trace and (kind in _OPERANDS or kind is LazyArray):
            if name == "pow" and not reflected and kind is int:  # x ** 2: a static power, as on JAX's route
                return _staged(self, ("operator", "pow", other, self.aval), [self], lambda: lambda a: [a ** other])
            other_aval = other.aval if kind is LazyArray or kind is ArrayImpl else core.typeof(other)
            key = ("operator", name, reflected, self.aval, other_aval)
            operands = [other, self] if reflected else [self, other]
            return _staged(self, key, operands, lambda: lambda a, b: [op(a, b)])
        return jax_method(self, other)
    method.__name__ = f"__{'r' if reflected else ''}{name}__"
    return method


for _name in _STAGED_METHODS:
    setattr(LazyArray, _name, _staged_method(_name))
for _name in _STAGED_OPERATORS:
    setattr(LazyArray, f"__{_name}__", _staged_operator(_name, False))
    setattr(LazyArray, f"__r{_name}__", _staged_operator(_name, True))


class _NotRecorded:
    """``backward`` of JAX's array type: an AttributeError (so ``hasattr`` stays False) that says why."""

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        raise AttributeError(
            "this jax.Array has no backward(): it was not computed inside `with autograd.record():`. Compute the "
            "loss inside the scope, e.g. `with autograd.record(): loss = loss_fn(net(x), y)`, then call "
            "loss.backward()")


if not hasattr(ArrayImpl, "backward"):
    ArrayImpl.backward = _NotRecorded()

Tracer = core.Tracer  # JAX's classes that other modules extend, named here where jax._src is imported
_DEVICE_ARRAY = {ArrayImpl}
_REFERENCE = {tuple}
_FIRST, _SECOND = operator.itemgetter(0), operator.itemgetter(1)
_LAZY = {LazyArray}
_TAPE_OF = operator.attrgetter("_tape")
_SLOT_OF = operator.attrgetter("_slot")


def concrete(x: Any) -> Any:
    """The value of ``x`` as an ordinary array (computing the tape if needed); other values unchanged."""
    return _force(x) if isinstance(x, LazyArray) else x


# -- nodes -------------------------------------------------------------------------------
class _Node:
    """One staged operation: ``run(trace_env_values) -> outputs`` on the slots ``inputs``."""

    __slots__ = ("kind", "op", "params", "inputs", "outputs")

    def __init__(self, kind: str, op: Any, params: Any, inputs: tuple, outputs: tuple):
        self.kind, self.op, self.params, self.inputs, self.outputs = kind, op, params, inputs, outputs


_ABSTRACT: dict = {}


def _params_key(params: dict) -> Any:
    try:
        key = tuple(params.items())
        hash(key)
        return key
    except TypeError:
        return None


def _out_avals(prim: core.Primitive, avals: tuple, params: dict, pkey: Any) -> tuple[list, bool]:
    key = (prim, pkey, avals) if pkey is not None else None
    hit = _ABSTRACT.get(key) if key is not None else None
    if hit is None:
        out, effects = prim.abstract_eval(*avals, **params)
        multiple = prim.multiple_results
        hit = (list(out) if multiple else [out], bool(effects))
        if key is not None:
            if len(_ABSTRACT) > 4096:
                _ABSTRACT.clear()
            _ABSTRACT[key] = hit
    return hit


def _fun_key(fun: lu.WrappedFun) -> Any:
    """A structural key of a WrappedFun: the function and the arguments of its transforms, leaving
    out the per-call output stores (and the thunks that read them)."""
    parts = [fun.f]
    for gen, args in fun.transforms:
        items = []
        for a in args:
            if isinstance(a, (lu.Store, lu.EqualStore)) or getattr(a, "__module__", None) == lu.__name__:
                items.append("store")
                continue
            try:
                hash(a)
                items.append(a)
            except TypeError:
                items.append(_Unhashable())
        parts.append((gen, tuple(items)))
    return tuple(parts)


class _Unhashable:
    """A key part equal to nothing else, so that a program using it is never reused."""

    __slots__ = ()


_IMPLIED = ("in",)


def _input_key(value: Any) -> tuple:
    """What a program compiled for ``value`` depends on: shape, dtype and weak type (cheap to get)."""
    try:
        return ("in", value.shape, value.dtype, getattr(value, "weak_type", False))
    except AttributeError:
        return ("in", type(value))


class LazyTrace(core.Trace):
    """The JAX trace of a recording scope: stages every operation on the tape."""

    __slots__ = ("_tape",)

    def __init__(self, tape: "Tape"):
        super().__init__()
        # weak: the tape holds its trace, and a cycle would leave every finished tape to Python's
        # garbage collector, whose collections then cost each step more the more objects a process holds
        self._tape = weakref.ref(tape)
        self.requires_low = False

    @property
    def tape(self) -> "Tape":
        return self._tape()

    def stage_value(self, val):
        # a constant made into an array (jnp.asarray of NumPy data): an ordinary array of the parent trace
        with core.set_current_trace(self.tape.parent):
            return self.tape.parent.stage_value(val)

    def process_primitive(self, prim, tracers, params, /):
        return self.tape.prim(prim, tracers, params)

    def process_call(self, prim, f, tracers, params, /):
        return f.call_wrapped(*tracers)

    def process_custom_jvp_call(self, prim, fun, jvp, tracers, /, *, symbolic_zeros):
        return self.tape.region(prim, fun, tracers, (jvp,), dict(symbolic_zeros=symbolic_zeros),
                                (_fun_key(jvp), symbolic_zeros))

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, /, *, out_trees, symbolic_zeros):
        return self.tape.region(prim, fun, tracers, (fwd, bwd),
                                dict(out_trees=out_trees, symbolic_zeros=symbolic_zeros),
                                (_fun_key(fwd), _fun_key(bwd), symbolic_zeros))

    def cur_qdd(self, x):
        return None


# -- programs ------------------------------------------------------------------------------
_PROGRAMS: "OrderedDict[tuple, tuple[Callable, tuple | None]]" = OrderedDict()  # key -> (program, picks)
_PROGRAMS_BY_TOKEN: dict[int, set] = {}
_LAST_RUN: list = [None]  # the entry of _PROGRAMS run last, which is its last entry
MAX_PROGRAMS = 256


def forget_token(token: int) -> None:
    """Release every cached program that calls the function registered under ``token``."""
    for key in _PROGRAMS_BY_TOKEN.pop(token, ()):
        if _PROGRAMS.pop(key, None) is _LAST_RUN[0]:
            _LAST_RUN[0] = None


def cached_programs() -> int:
    """How many tape programs are compiled and cached."""
    return len(_PROGRAMS)


class Stats:
    """Counters of compiles and flushes (``hybrid.autograd.stats``), for tests and the debug log."""

    compiles = 0
    flushes = 0


def _evaluate(nodes: Sequence[_Node], env: list, start: int = 0) -> None:
    """Run ``nodes[start:]`` on ``env`` (a list indexed by slot)."""
    for index in range(start, len(nodes)):
        node = nodes[index]
        for slot, value in zip(node.outputs, _run_node(nodes, index, node, env)):
            env[slot] = value


def _run_node(nodes: Sequence[_Node], index: int, node: _Node, env: list) -> Sequence:
    """The outputs of ``nodes[index]`` computed from ``env``."""
    kind = node.kind
    if kind == "grad":
        return _run_grad(nodes, index, node, env)
    args = [env[s] for s in node.inputs]
    if kind == "prim":
        out = node.op.bind(*args, **node.params)
        return out if node.op.multiple_results else (out,)
    if kind == "call":
        return node.op(*args)
    return _run_region(node, args, env)


def _run_region(node: _Node, args: list, env: list) -> list:
    """A custom_jvp/custom_vjp call: the recorded primal replayed under its primitive and rules."""
    inner, in_slots, out_slots = node.params["region"]

    def replay(*values):
        local = list(env)
        for slot, value in zip(in_slots, values):
            local[slot] = value
        _evaluate(inner, local)
        return [local[s] for s in out_slots]

    fun = lu.wrap_init(replay, debug_info=node.params["debug_info"])
    return node.op.bind(*args, subfuns=(fun, *node.params["rules"]), **node.params["bind"])


def _run_grad(nodes: Sequence[_Node], index: int, node: _Node, env: list) -> list:
    """Gradients of the heads with respect to ``wrt``: the nodes before this one that depend on ``wrt``
    replayed under jax.vjp (the others, and those not yet run, are run as constants of it). The slots
    ``cut`` (values an earlier backward freed) are constants too: no gradient flows through them."""
    heads, head_grads, wrt, create_graph, cut = node.params
    fixed = set(wrt)
    stopped = set(cut) - fixed

    def prefix(wrt_values):
        local = list(env)
        for slot, value in zip(wrt, wrt_values):
            local[slot] = value  # inputs of the tape; node outputs are replaced when produced
        active = set(wrt)
        for i in range(index):
            n = nodes[i]
            if n.kind == "grad":  # its gradients are constants unless create_graph
                dependent = n.params[3] and not active.isdisjoint(n.inputs + tuple(n.params[2]))
            else:
                dependent = not active.isdisjoint(n.inputs)
            if not dependent and None not in map(local.__getitem__, n.outputs):
                continue  # computed already and independent of wrt
            for slot, value in zip(n.outputs, _run_node(nodes, i, n, local)):
                if slot in fixed:
                    continue
                if slot in stopped:
                    local[slot] = jax.lax.stop_gradient(value) if env[slot] is None else env[slot]
                    continue
                local[slot] = value
                if dependent:
                    active.add(slot)
        return [local[h] for h in heads], local

    outs, vjp_fn, local = jax.vjp(prefix, [env[s] for s in wrt], has_aux=True)
    # the primal values computed under vjp serve the rest of the program (values computed before stay)
    env[:] = [value if value is not None else new for value, new in zip(env, local)]
    cts = [jax.numpy.ones(o.shape, o.dtype) if g is None else env[g] for o, g in zip(outs, head_grads)]
    (grads,) = vjp_fn(cts)
    if not create_graph:
        grads = [jax.lax.stop_gradient(g) for g in grads]
    return grads


@functools.lru_cache(maxsize=64)
def _kept_positions(n: int, donate: tuple[int, ...]) -> tuple[int, ...]:
    """The positions among ``n`` inputs that are not in ``donate``."""
    chosen = set(donate)
    return tuple(i for i in range(n) if i not in chosen)


def _identity(value: Any) -> list:
    return [value]


# Arrays of at least this many bytes are returned as they are rather than copied into a packed buffer:
# the copy costs more than the output it saves (a ResNet-18 step kept its gradients 11% slower packed).
PACK_BELOW_BYTES = 64 * 1024


class _PackLayout:
    """Where each of a list of arrays lies in the outputs of a program: arrays smaller than
    :data:`PACK_BELOW_BYTES` in one flat buffer per dtype, larger ones as they are. ``pack(*arrays)``
    and ``unpack(outputs)`` convert between the two forms."""

    def __init__(self, avals: Sequence):
        dtypes: list = []
        self.places = []  # (buffer, start, stop, shape) per packed array
        self.packed: list[int] = []  # indices of the packed arrays
        self.direct: list[int] = []  # indices of the arrays returned as they are
        ends: list[int] = []
        for index, aval in enumerate(avals):
            dtype = np.dtype(aval.dtype)
            size = int(np.prod(aval.shape, dtype=np.int64))
            if size * dtype.itemsize >= PACK_BELOW_BYTES:
                self.direct.append(index)
                continue
            if dtype not in dtypes:
                dtypes.append(dtype)
                ends.append(0)
            buffer = dtypes.index(dtype)
            start = ends[buffer]
            ends[buffer] = start + size
            self.places.append((buffer, start, ends[buffer], tuple(aval.shape)))
            self.packed.append(index)
        self.groups = [[self.packed[i] for i, place in enumerate(self.places) if place[0] == b]
                       for b in range(len(dtypes))]
        self.buffer_avals = ([core.ShapedArray((n,), d) for n, d in zip(ends, dtypes)]
                             + [avals[i] for i in self.direct])
        self.split = jax.jit(self._split)

    def pack(self, *arrays: Any) -> list:
        return ([jax.numpy.concatenate([arrays[i].ravel() for i in group]) for group in self.groups]
                + [arrays[i] for i in self.direct])

    def _split(self, buffers: list) -> list:
        return [buffers[b][start:stop].reshape(shape) for b, start, stop, shape in self.places]

    def unpack(self, outputs: list) -> list:
        """The arrays, in order, from the outputs of :meth:`pack` (one program call splits the buffers)."""
        n = len(self.groups)
        values = [None] * (len(self.packed) + len(self.direct))
        if n:
            for index, value in zip(self.packed, self.split(outputs[:n])):
                values[index] = value
        for index, value in zip(self.direct, outputs[n:]):
            values[index] = value
        return values


_LAYOUTS: dict[tuple, _PackLayout] = {}
_LAYOUT_BY_AVALS: dict[tuple, tuple] = {}  # ids of aval objects -> (the avals, their layout)


def _pack_layout(avals: list) -> _PackLayout:
    """The (cached) layout of arrays of ``avals``; found by the avals' identities first (the common
    case: the same cached avals every step), else by their shapes and dtypes."""
    ids = tuple(map(id, avals))
    hit = _LAYOUT_BY_AVALS.get(ids)
    if hit is not None and all(map(operator.is_, hit[0], avals)):
        return hit[1]
    key = tuple((a.shape, a.dtype) for a in avals)
    layout = _LAYOUTS.get(key)
    if layout is None:
        if len(_LAYOUTS) > 256:
            _LAYOUTS.clear()
        layout = _LAYOUTS[key] = _PackLayout(avals)
    if len(_LAYOUT_BY_AVALS) > 256:
        _LAYOUT_BY_AVALS.clear()
    _LAYOUT_BY_AVALS[ids] = (list(avals), layout)
    return layout


class _Pack:
    """Values that a tape program returns packed (small ones in one flat buffer per dtype instead of one
    output per array, which is cheaper for XLA and for dispatch); split, all together, on first need.

    Its members are referred to as ``(pack, index)`` pairs (:func:`is_member`); :meth:`member` gives
    the value a pair stands for, so that no LazyArray is made for a member nobody reads."""

    __slots__ = ("layout", "buffers", "values", "on_split", "dropped", "tape", "slots", "avals")

    def __init__(self, layout: _PackLayout, on_split: Callable[["_Pack", list], None] | None, tape: "Tape",
                 slots: Sequence[int], avals: list):
        self.layout, self.buffers, self.values, self.on_split = layout, None, None, on_split
        self.dropped = "this value was recorded on a tape that ended before computing it"
        self.tape = tape  # which holds the pack (a pending write) only until it runs
        self.slots, self.avals = slots, avals

    def fill(self, buffers: list) -> None:
        self.buffers = buffers

    def member(self, index: int) -> Any:
        """The ``index``-th value: the array once the pack is split, else a LazyArray standing for it."""
        if self.values is not None:
            return self.values[index]
        return LazyArray(self.tape, self.avals[index], self.slots[index], (self, index))

    def value(self, index: int) -> Any:
        if self.values is None:
            if self.buffers is None:
                raise AutogradError(self.dropped)
            with core.set_current_trace(core.eval_trace):
                self.values = self.layout.unpack(self.buffers)
            self.buffers = None
            if self.on_split is not None:
                self.on_split(self, self.values)
        return self.values[index]


def is_member(value: Any) -> bool:
    """Whether ``value`` is a ``(pack, index)`` reference to a packed value (see :meth:`Tape.packed`)."""
    return type(value) is tuple


def resolve(value: Any) -> Any:
    """The value a ``(pack, index)`` reference stands for (a LazyArray or an array); other values unchanged."""
    return value[0].member(value[1]) if type(value) is tuple else value


def open_tape(values: Sequence) -> "Tape | None":
    """The recording that the first of ``values`` recorded on one still open (a LazyArray or a reference to a
    packed value) belongs to, else None."""
    for value in values:
        if type(value) is tuple:
            tape = value[0].tape
        elif type(value) is LazyArray:
            tape = value._tape
        else:
            continue
        if not tape.released:
            return tape
    return None


def pack_of(value: Any) -> "_Pack | None":
    """The pack that ``value`` (a reference or a LazyArray) is a member of, else None."""
    if type(value) is tuple:
        return value[0]
    packed = value._packed if type(value) is LazyArray else None
    return packed[0] if packed is not None else None


# -- the tape ------------------------------------------------------------------------------
class Tape:
    """The staged computation of one recording: inputs, nodes, live values, pending writes.

    Slots number every value: tape inputs (arrays from outside) and node outputs alike.
    ``key`` grows with each input and node, so equal keys mean equal computations.
    """

    def __init__(self, parent_trace: Any):
        self.parent = parent_trace
        self.trace = LazyTrace(self)
        self.nodes: list[_Node] = []
        self.avals: list = []
        self.key: list = []
        self.input_slots: list[int] = []
        self.input_values: list = []
        self.input_ids: dict[int, int] = {}   # id(array) -> slot (the arrays are kept alive)
        self.input_position: list = []        # slot -> index in input_values (None: a node's output)
        self.held: list = []
        self.live: dict[int, Any] = {}        # slot -> weakref to the LazyArray standing for it
        self.writes: dict[Any, tuple] = {}    # cell -> (slots, setter taking their values as a list)
        # cell -> (holders, input slots it replaces, slots of their new values): what donation may reuse
        self.replaced: dict[Any, tuple] = {}
        self.param_slots: dict[Any, int] = {}  # Parameter -> slot of the value read while recording
        self.tokens: set[int] = set()
        self.cacheable = True
        self.released = False
        # heads of each backward()/grad() that freed its graph (retain_graph=False), in order, and the
        # node outputs they freed (found from them on first need: the common step differentiates once)
        self.freed_heads: list[list[int]] = []
        self._freed: set[int] = set()
        self._freed_upto = 0

    # recording ---------------------------------------------------------------------------
    def input(self, value: Any, keyed: bool = True) -> int:
        """The slot of an array from outside the tape (one slot per array object). ``keyed=False``
        leaves its shape and dtype out of the key: the caller's node key already implies them."""
        slot = self.input_ids.get(id(value))
        if slot is not None:
            return slot
        held = value
        if isinstance(value, LazyArray):  # a value of an earlier tape: use its data
            value = _force(value)
            self.input_ids[id(held)] = len(self.avals)
            self.held.append(held)  # keeps id(held) unique while the tape lives
        slot = len(self.avals)
        self.avals.append(None)  # found by aval() when an operation needs it
        self.input_position.append(len(self.input_values))
        self.input_slots.append(slot)
        self.input_values.append(value)
        self.input_ids[id(value)] = slot
        self.key.append(_input_key(value) if keyed else _IMPLIED)
        return slot

    def values_of(self, slots: Sequence[int]) -> list:
        """The arrays of input slots."""
        return list(map(self.input_values.__getitem__, map(self.input_position.__getitem__, slots)))

    def aval(self, slot: int) -> Any:
        """The abstract value (shape, dtype) of a slot."""
        aval = self.avals[slot]
        if aval is None:
            aval = self.avals[slot] = core.typeof(self.input_values[self.input_position[slot]])
        return aval

    def avals_of(self, slots: Sequence[int]) -> list:
        """:meth:`aval` of many slots."""
        avals = list(map(self.avals.__getitem__, slots))
        if any(map(operator.is_, avals, itertools.repeat(None))):
            avals = list(map(self.aval, slots))
        return avals

    def read_param(self, param: Any, value: Any) -> None:
        """Note that ``value`` stands for ``param`` on this tape (for ``backward``)."""
        if param not in self.param_slots:
            self.param_slots[param] = self.slot_of(value)

    def read_params(self, params: Sequence, values: Sequence, avals: Sequence | None = None) -> Sequence[int]:
        """:meth:`read_param` for many parameters; returns the slots of ``values``. ``avals`` (their
        known shapes and dtypes) leaves them out of the key: the caller's node key implies them."""
        known = self.param_slots
        if avals is not None and known.keys().isdisjoint(params):
            slots = self.new_inputs(values, avals)
            if slots is not None:
                known.update(zip(params, slots))
                return slots
        slots = self.slots_of(values, avals is None)
        setdefault = known.setdefault
        for param, slot in zip(params, slots):
            setdefault(param, slot)
        if avals is not None:
            avals_list = self.avals
            for slot, aval in zip(slots, avals):
                if avals_list[slot] is None:
                    avals_list[slot] = aval
        return slots

    def new_inputs(self, values: Sequence, avals: Sequence | None = None, findable: bool = True) -> range | None:
        """Slots for arrays none of which is on the tape yet, all at once, with one key part (the
        caller's node key implies their shapes and dtypes, or ``avals`` gives them); None when one
        of them is on the tape already or is a LazyArray.

        ``findable=False`` is for arrays that nothing looks up on this tape afterwards (an optimizer's
        states, staged just before the step runs): they are not indexed, and one that is on the tape
        already gets a second slot (the tape then holds it twice, so its buffer is not donated)."""
        if LazyArray in set(map(type, values)):
            return None
        if findable:
            ids = self.input_ids
            keys = list(map(id, values))
            if not ids.keys().isdisjoint(keys):
                return None
        start, n, at = len(self.avals), len(values), len(self.input_values)
        slots = range(start, start + n)
        self.avals.extend(avals if avals is not None else [None] * n)
        self.input_position.extend(range(at, at + n))
        self.input_slots.extend(slots)
        self.input_values.extend(values)
        if findable:
            ids.update(zip(keys, slots))
        self.key.append(("inputs", n))
        return slots

    def recorded(self, value: Any) -> Any:
        """``value`` as a value of this tape: an input array is passed through an identity node."""
        if isinstance(value, LazyArray) and value._tape is self or id(value) not in self.input_ids:
            return value
        slot = self.input_ids[id(value)]
        return self.add("call", _identity, None, [slot], [self.aval(slot)], ("call", "identity"))[0]

    def packed(self, slots: Sequence[int], on_split: Callable[[Any, list], None] | None = None) -> list[tuple]:
        """References ``(pack, index)`` to the values of ``slots``, which the program computes packed (see
        :class:`_PackLayout`: small ones in one flat buffer per dtype, one output instead of one per array);
        :func:`resolve` turns one into its value. The values are split together when one is first needed:
        then ``on_split(pack, values)`` runs."""
        member_avals = self.avals_of(slots)
        layout = _pack_layout(member_avals)
        pack = _Pack(layout, on_split, self, slots, member_avals)
        buffers = self.add("call", layout.pack, None, slots, layout.buffer_avals, ("call", "pack", layout),
                           slots_only=True)
        self.write_group(pack, buffers, pack.fill)
        return list(zip(itertools.repeat(pack), range(len(slots))))

    def slots_of(self, values: Sequence, keyed: bool = True) -> list[int]:
        """:meth:`slot_of` for many values (the common cases of :meth:`input` inlined: this runs for
        every parameter and optimizer state of every step)."""
        ids, out = self.input_ids, []
        avals, position, input_slots, input_values, key = (self.avals, self.input_position, self.input_slots,
                                                           self.input_values, self.key)
        for value in values:
            if type(value) is LazyArray:
                out.append(value._slot if value._tape is self else self.input(value, keyed))
                continue
            slot = ids.get(id(value))
            if slot is None:
                slot = ids[id(value)] = len(avals)
                avals.append(None)
                position.append(len(input_values))
                input_slots.append(slot)
                input_values.append(value)
                key.append(_input_key(value) if keyed else _IMPLIED)
            out.append(slot)
        return out

    def own_slots(self, values: Sequence) -> list[int] | None:
        """The slots of ``values`` when every one is a LazyArray recorded on this tape, or every one a
        reference to a member of one pack of this tape, else None (a cheap check for the common case: the
        gradients of this recording's backward)."""
        types = set(map(type, values))
        if types == _REFERENCE:
            packs = set(map(_FIRST, values))
            if len(packs) != 1:
                return None
            (pack,) = packs
            if pack.tape is not self:
                return None
            return list(map(pack.slots.__getitem__, map(_SECOND, values)))
        if types != _LAZY or set(map(_TAPE_OF, values)) != {self}:
            return None
        return list(map(_SLOT_OF, values))

    def slot_of(self, value: Any, keyed: bool = True) -> int:
        if isinstance(value, LazyArray) and value._tape is self:
            return value._slot
        return self.input(value, keyed)

    def lazy(self, slot: int) -> LazyArray:
        ref = self.live.get(slot)
        tracer = ref() if ref is not None else None
        if tracer is None:
            tracer = LazyArray(self, self.aval(slot), slot)
            self.live[slot] = weakref.ref(tracer)
        return tracer

    def _check_open(self) -> None:
        if self.released:
            raise AutogradError("this recording ended at the last trainer.step() (or backward() without "
                                "retain_graph=True); start a new `with autograd.record():` scope")

    def add(self, kind: str, op: Any, params: Any, in_slots: Sequence[int], out_avals: Sequence,
            op_key: Any, slots_only: bool = False) -> list:
        """Stage one node; returns a LazyArray per output (or the output slots)."""
        self._check_open()
        first = len(self.avals)
        self.avals.extend(out_avals)
        self.input_position.extend(itertools.repeat(None, len(out_avals)))
        outputs = tuple(range(first, first + len(out_avals)))
        self.nodes.append(_Node(kind, op, params, tuple(in_slots), outputs))
        self.key.append((op_key, tuple(in_slots)))
        return list(outputs) if slots_only else [self.lazy(s) for s in outputs]

    def prim(self, prim: core.Primitive, args: Sequence, params: dict) -> Any:
        slots = self.slots_of(args)
        avals = tuple(map(self.aval, slots))
        pkey = _params_key(params)
        if pkey is None:
            self.cacheable = False
        out_avals, _ = _out_avals(prim, avals, params, pkey)
        outs = self.add("prim", prim, params, slots, out_avals, (prim, pkey))
        return outs if prim.multiple_results else outs[0]

    def call(self, fn: Callable, key: Any, args: Sequence, out_avals: Sequence, token: int | None = None,
             slots_only: bool = False, keyed_inputs: bool = True, slots: Sequence[int] | None = None) -> list:
        """Stage ``fn(*args) -> list of arrays``, a pure function identified by the hashable ``key``.
        ``token`` names what the function depends on (see :func:`forget_token`). Returns a
        LazyArray per result, or with ``slots_only`` their slots (for results only written).
        ``keyed_inputs=False`` when ``key`` determines the shapes and dtypes of ``args``; ``slots``
        when the caller has the slots of ``args`` already (``args`` is not read then)."""
        if token is not None:
            self.tokens.add(token)
        if slots is None:
            slots = self.slots_of(args, keyed_inputs)
        return self.add("call", fn, None, slots, out_avals, ("call", key), slots_only)

    def region(self, prim: core.Primitive, fun: lu.WrappedFun, tracers: Sequence, rules: tuple, bind: dict,
               rule_key: Any) -> list[LazyArray]:
        """Stage a custom_jvp/custom_vjp call: its primal function is recorded as a sub-tape that is
        replayed under ``prim`` with the original rules, so that its derivative rules hold."""
        in_slots = [self.slot_of(t) for t in tracers]
        node_start, key_start = len(self.nodes), len(self.key)
        with core.set_current_trace(self.trace):
            outs = fun.call_wrapped(*tracers)
        out_slots = [self.slot_of(o) for o in outs]
        inner = self.nodes[node_start:]
        inner_key = tuple(self.key[key_start:])
        del self.nodes[node_start:], self.key[key_start:]
        params = dict(region=(inner, in_slots, out_slots), rules=rules, bind=bind, debug_info=fun.debug_info)
        out_avals = [self.aval(s) for s in out_slots]
        return self.add("region", prim, params, in_slots, out_avals,
                        ("region", prim, rule_key, inner_key, tuple(out_slots)))

    def grad(self, heads: Sequence, head_grads: Sequence, wrt_slots: Sequence[int], create_graph: bool,
             slots_only: bool = False) -> list:
        """Stage the gradients of ``sum(head * head_grad)`` with respect to the values in ``wrt_slots``.
        Values freed by an earlier differentiation (:meth:`free`) are constants of it."""
        head_slots = [self.slot_of(h) for h in heads]
        grad_slots = [None if g is None else self.slot_of(g) for g in head_grads]
        wrt_slots = list(wrt_slots)
        cut = tuple(sorted(self.freed())) if self.freed_heads else ()
        ins = [s for s in head_slots + grad_slots if s is not None]
        return self.add("grad", None, (head_slots, grad_slots, wrt_slots, create_graph, cut), ins,
                        self.avals_of(wrt_slots),
                        ("grad", tuple(head_slots), tuple(grad_slots), tuple(wrt_slots), create_graph, cut),
                        slots_only)

    def free(self, head_slots: Sequence[int]) -> None:
        """Free the graph of the values ``head_slots`` (a backward without ``retain_graph``): they cannot be
        differentiated again, and the values computed on the way become constants for later gradients,
        as in MXNet. Tape inputs (parameters, arrays from outside) stay differentiable."""
        self.freed_heads.append(list(head_slots))

    def freed(self) -> set[int]:
        """The node outputs freed so far (see :meth:`free`)."""
        pending = self.freed_heads[self._freed_upto:]
        if pending:
            position = self.input_position
            for heads in pending:
                reached = self.depends_on(heads, stop=self._freed)
                self._freed.update(s for s in reached if position[s] is None)
            self._freed_upto = len(self.freed_heads)
        return self._freed

    def write(self, cell: Any, value: Any, setter: Callable[[Any], None], replaces: Any = None) -> None:
        """Call ``setter(value's data)`` at the next materialisation. ``replaces`` is the array the
        cell held; at the step boundary its buffer is reused when nothing else holds it."""
        self.write_group(cell, [self.slot_of(value)], lambda values: setter(values[0]),
                         () if replaces is None else (replaces,))

    def write_group(self, cell: Any, slots: Sequence[int], setter: Callable[[list], None],
                    replaces: Sequence = (), holders: int = 0, replaced_slots: Sequence[int] = ()) -> None:
        """:meth:`write` for many values at once: ``setter(list of data)``. ``replaces[i]`` is the array
        that ``slots[i]``'s value replaces; ``holders`` counts the references to each replaced array that
        the setter itself drops (the cells still holding it)."""
        self.writes[cell] = (tuple(slots), setter)
        if replaced_slots:
            self.replaced[cell] = (holders, tuple(replaced_slots), tuple(slots[:len(replaced_slots)]))
            return
        ids = self.input_ids
        pairs = [(ids[id(old)], new) for old, new in zip(replaces, slots) if id(old) in ids]
        if pairs:
            olds, news = zip(*pairs)
            self.replaced[cell] = (holders, olds, news)

    def drop_packed(self, values: Sequence, reason: str) -> None:
        """Do not compute the packs of the packed values among ``values`` (references or LazyArrays;
        nothing will read them): reading one later raises AutogradError(``reason``)."""
        for pack in set(map(pack_of, values)) - {None}:
            if self.writes.pop(pack, None) is not None:
                pack.dropped = reason

    def depends_on(self, heads: Sequence[int], stop: set[int] | None = None) -> set[int]:
        """The slots (inputs and node outputs) that the slots ``heads`` are computed from, not looking
        past the slots in ``stop`` (constants: their own inputs are not included)."""
        needed = set(heads)
        if stop:
            for node in reversed(self.nodes):
                if not needed.isdisjoint(node.outputs) and not stop.issuperset(needed.intersection(node.outputs)):
                    needed.update(node.inputs)
                    if node.kind == "grad":
                        needed.update(node.params[2])
            return needed
        for node in reversed(self.nodes):
            if needed.intersection(node.outputs):
                needed.update(node.inputs)
                if node.kind == "grad":
                    needed.update(node.params[2])
        return needed

    # running -------------------------------------------------------------------------------
    def materialize(self, final: bool = False) -> None:
        """Compute every value still needed (live LazyArrays, pending writes) in one program.

        ``final`` ends the recording (the step boundary): inputs whose cells are overwritten
        and that nothing else holds are donated, and no node can be added afterwards."""
        with state_lock:  # the donation check, the run and the writes happen together
            self._materialize(final)

    def _materialize(self, final: bool) -> None:
        if self.released:
            return
        pending = [(s, t) for s, ref in self.live.items() if (t := ref()) is not None and t._value is None]
        write_cells = list(self.writes)
        write_slots = list(itertools.chain.from_iterable(map(_FIRST, map(self.writes.__getitem__, write_cells))))
        if pending or write_cells:
            donate, first = self._donation(write_cells) if final else ((), [])
            # the replacement of every donated input first and in the same order, so that XLA gives it
            # the donated buffer
            self._run(first + [s for s, _ in pending] + write_slots, write_cells, donate, pending)
        if final:
            self.release()

    def release(self) -> None:
        """Drop the recording; values already computed stay with their LazyArrays."""
        self.released = True
        self.nodes, self.input_values, self.input_ids, self.live, self.held = [], [], {}, {}, []

    def _run(self, requested: list, write_cells: list, donate: tuple, pending: list) -> None:
        """Run the program computing the slots ``requested`` (the donated inputs' replacements, then the
        ``pending`` (slot, LazyArray) pairs' slots, then those of the writes of ``write_cells``), donating
        the inputs at positions ``donate``; give the pending values and apply the writes."""
        key = (tuple(self.key), tuple(requested), donate)
        entry = _PROGRAMS.get(key) if self.cacheable else None
        new = entry is None
        if new:
            entry = self._compile(key, requested, donate)
        elif entry is not _LAST_RUN[0]:  # least recently used goes first (it is already last otherwise)
            _PROGRAMS.move_to_end(key)
        if self.cacheable:
            _LAST_RUN[0] = entry
        program, picks, memory, nested = entry
        top_level = type(self.parent) is core.EvalTrace  # else part of a program being traced (hybrid.compile)
        if not top_level:
            program = nested
        Stats.flushes += 1
        if log.isEnabledFor(logging.DEBUG):
            log.debug("running a recorded program: %d nodes, %d values computed, %d writes, %d buffers reused",
                      len(self.nodes), len(set(requested)), len(write_cells), len(donate))
        values = self.input_values
        if donate:
            given = list(map(values.__getitem__, donate))
            kept = list(map(values.__getitem__, _kept_positions(len(values), donate)))
        else:
            given, kept = [], values
        if memory and top_level:
            memory[0].note_run()
        elif top_level:
            memory_report.track("recorded step", program, (given, kept), memory)
        with core.set_current_trace(self.parent):
            if new:
                with compile_log.timed(f"compiled a recorded step program ({len(self.nodes)} operations)",
                                       f"{len(values)} input arrays"):
                    results = program(given, kept)
            else:
                results = program(given, kept)
        del given
        if picks is not None:  # one result per requested slot
            results = list(map(results.__getitem__, picks))
        at = len(donate)
        for (_, tracer), value in zip(pending, results[at:]):
            tracer._value = value
        at += len(pending)
        writes, self.writes, self.replaced = self.writes, {}, {}
        for cell in write_cells:
            slots, setter = writes[cell]
            setter(results[at:at + len(slots)])
            at += len(slots)

    def _donation(self, write_cells: list) -> tuple[tuple[int, ...], list[int]]:
        """Positions (in the input list) of inputs that only the tape and a cell being overwritten hold,
        and the slots of the values replacing them."""
        if not self.replaced or self.parent is not core.eval_trace:
            return (), []
        position, values, refcount = self.input_position, self.input_values, sys.getrefcount
        donate: list[int] = []
        first: list[int] = []
        for cell in write_cells:
            entry = self.replaced.get(cell)
            if entry is None:
                continue
            holders, olds, news = entry
            ats = list(map(position.__getitem__, olds))
            group = list(map(values.__getitem__, ats))
            # references to each: the input list, `group`, getrefcount's argument and the cells being overwritten
            limit = 3 + holders
            free = list(map(limit.__ge__, map(refcount, group)))
            if set(map(type, group)) != _DEVICE_ARRAY:  # NumPy arrays and scalars have no buffer to give
                free = [ok and type(value) is ArrayImpl for ok, value in zip(free, group)]
            donate += itertools.compress(ats, free)
            first += itertools.compress(news, free)
        if len(set(donate)) < len(donate):  # an input replaced by two writes: the last one's value
            chosen = dict(zip(donate, first))
            donate, first = list(chosen), list(chosen.values())
        return tuple(donate), first

    def _compile(self, key: tuple, requested: list[int], donate: tuple[int, ...]) -> tuple[Callable, tuple | None]:
        """The program computing the slots ``requested`` (each once) and the position of each requested
        slot's value among its results (None when no slot is requested twice: they come in order)."""
        outputs = list(dict.fromkeys(requested))
        picks = None  # each slot requested once: the results as they come
        if len(outputs) < len(requested):
            where = {slot: i for i, slot in enumerate(outputs)}
            picks = tuple(map(where.__getitem__, requested))
        nodes, n_slots = list(self.nodes), len(self.avals)
        chosen = set(donate)
        donated_slots = [self.input_slots[i] for i in donate]
        kept_slots = [s for i, s in enumerate(self.input_slots) if i not in chosen]

        # A gradient node differentiating tape inputs replays the nodes before it under jax.vjp and
        # keeps their values: running them first as well would only trace them twice.
        inputs = set(self.input_slots)
        start = next((i for i, n in enumerate(nodes) if n.kind == "grad"), 0)
        if start and not inputs.issuperset(nodes[start].params[2]):
            start = 0

        def run(given, kept):
            env = [None] * n_slots
            for slot, value in zip(donated_slots, given):
                env[slot] = value
            for slot, value in zip(kept_slots, kept):
                env[slot] = value
            _evaluate(nodes, env, start=start)
            return [env[s] for s in outputs]

        options = dict(donate_argnums=(0,) if donate else ())
        program = jax.jit(run, compiler_options=compiler_options(), **options)
        # the program's memory record (made at its first run), and the program called inside other traces,
        # where jit takes no compiler options
        entry = (program, picks, [], jax.jit(run, **options))
        Stats.compiles += 1
        log.debug("compiling a recorded program: %d inputs, %d nodes, %d outputs, %d donated%s",
                  len(self.input_slots), len(nodes), len(outputs), len(donate),
                  "" if self.cacheable else " (not cached: an operation has unhashable parameters)")
        if self.cacheable:
            _PROGRAMS[key] = entry
            for token in self.tokens:
                _PROGRAMS_BY_TOKEN.setdefault(token, set()).add(key)
            while len(_PROGRAMS) > MAX_PROGRAMS:
                old, _ = _PROGRAMS.popitem(last=False)
                for keys in _PROGRAMS_BY_TOKEN.values():
                    keys.discard(old)
        return entry


def recording_trace(tape: Tape) -> Any:
    """Context manager making ``tape``'s trace the current JAX trace."""
    return core.set_current_trace(tape.trace)


def parent_trace(tape: Tape) -> Any:
    """Context manager making the trace that was current when ``tape`` started current again."""
    return core.set_current_trace(tape.parent)


def eval_trace() -> Any:
    """Context manager running JAX operations eagerly (JAX's eval trace)."""
    return core.set_current_trace(core.eval_trace)


def current_trace() -> Any:
    """JAX's current trace (the eval trace outside any transformation)."""
    return core.trace_ctx.trace


def under_transform() -> bool:
    """Whether code runs inside a JAX transformation (``jit``, ``grad``, ``vmap``...), as opposed to eagerly
    or recorded by ``autograd.record()``."""
    trace = core.trace_ctx.trace
    return not isinstance(trace, (core.EvalTrace, LazyTrace))


def staged_out() -> bool:
    """Whether code runs inside a transformation that stages a program out (``jit`` and the loops and
    control flow traced for it), directly or under other transformations (``jit(grad(f))``): constants
    captured there are baked into the program."""
    trace = core.trace_ctx.trace
    while trace is not None:
        if isinstance(trace, pe.DynamicJaxprTrace):
            return True
        trace = getattr(trace, "parent_trace", None)
    return False


def set_trace(trace: Any) -> None:
    """Make ``trace`` JAX's current trace (None: the eval trace), without restoring it later."""
    core.trace_ctx.set_trace(trace if trace is not None else core.eval_trace)
