"""Recorded values and the JAX trace that stages operations on a tape.

A :class:`LazyArray` is a JAX tracer that knows its shape and dtype; its data is computed by its
tape on first need (``float``, ``print``, ``np.asarray``, ``if``, any use outside ``record()``) and
kept. :class:`LazyTrace` is the JAX trace of a recording scope: every ``bind`` on it is staged on
the tape. The helpers at the end are the only places that read or change JAX's trace state.
"""
from __future__ import annotations

import operator
import weakref
from typing import Any, Callable

import jax
import numpy as np
from jax._src import core
from jax._src.array import ArrayImpl
from jax._src import linear_util as lu
from jax._src.interpreters import partial_eval as pe


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


def force(tracer: "LazyArray") -> Any:
    value = tracer._value
    if value is None:
        tracer._tape.materialize()
        value = tracer._value
        packed = tracer._packed
        if value is None and packed is not None:
            value = tracer._value = packed.pack.value(packed.position)
    return value


class LazyArray(core.Tracer):
    """A recorded value: shape and dtype now, the data when first needed."""

    __slots__ = ("_tape", "_slot", "_value", "_packed")

    def __init__(self, tape: Any, aval: Any, slot: int, packed: Any = None):
        self._trace = tape.trace  # core.Tracer.__init__, inlined: thousands are made per second
        self.aval = aval
        self._tape = tape
        self._slot = slot
        self._value = None
        self._packed = packed  # a PackRef when the tape computes it inside a packed buffer

    # the value, computed on demand -----------------------------------------------------
    def full_lower(self):
        # JAX calls this when an operation runs outside the recording trace: use the value.
        return force(self)

    @property
    def dimension_as_value(self):
        # A staging trace (jit, make_jaxpr) that meets a recorded value asks this hook, whose
        # result it uses instead: the value, computed under that trace's parent.
        return self._lower_for_staging

    def _lower_for_staging(self):
        return force(self)

    def to_concrete_value(self):
        return self._value  # only once computed: JAX asks this on hot paths

    def __array__(self, dtype=None, copy=None):
        return np.asarray(force(self), dtype=dtype)

    def __bool__(self):
        return bool(force(self))

    def __int__(self):
        return int(force(self))

    def __float__(self):
        return float(force(self))

    def __complex__(self):
        return complex(force(self))

    def __index__(self):
        return force(self).__index__()

    def __hex__(self):
        return hex(force(self))

    def __oct__(self):
        return oct(force(self))

    def __repr__(self):
        return repr(force(self))

    def __str__(self):
        return str(force(self))

    def __format__(self, spec):
        return format(force(self), spec)

    def __reduce__(self):
        return force(self).__reduce__()

    def __dlpack__(self, *args, **kwargs):
        return force(self).__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        return force(self).__dlpack_device__()

    def item(self, *args):
        return force(self).item(*args)

    def tolist(self):
        return force(self).tolist()

    def tobytes(self, order="C"):
        return force(self).tobytes(order)

    def block_until_ready(self):
        packed = self._packed
        if (self._value is None and packed is not None and packed.pack.values is None
                and packed.pack.buffers is not None):
            jax.block_until_ready(packed.pack.buffers)  # waiting needs no split
        else:
            force(self).block_until_ready()
        return self

    def copy_to_host_async(self):
        force(self).copy_to_host_async()

    def is_deleted(self):
        return False

    @property
    def sharding(self):
        return force(self).sharding

    @property
    def device(self):
        return force(self).device

    def devices(self):
        return force(self).devices()

    @property
    def committed(self):
        return force(self).committed

    @property
    def addressable_shards(self):
        return force(self).addressable_shards

    @property
    def is_fully_replicated(self):
        return force(self).is_fully_replicated

    @property
    def nbytes(self):
        return self.aval.size * self.aval.dtype.itemsize

    def backward(self, out_grad: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
        """``autograd.backward(self, out_grad, retain_graph, train_mode)`` (Gluon's ``loss.backward()``)."""
        _BACKWARD_ENGINE[0](self, out_grad, retain_graph, train_mode)


# Reductions called as methods (``loss.mean()``, ``l.sum()``) and arithmetic operators on recorded values
# (``l * 0.5``, ``a + b``) are staged as one call each, from a cache keyed by the operation, its static
# arguments and the operands' shapes and dtypes. JAX's own route through its jitted functions costs the
# recording far more: recording ``y.mean()`` took 2.0 us per call staged against 121 us on JAX's route,
# ``y * 0.5`` 2.1 us against 180 us (a Dense output, best of 5 x 300 calls). Operands that are arrays or
# Python numbers enter as inputs, as on JAX's
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
    ArrayImpl.backward = _NotRecorded()  # type: ignore[attr-defined]  # a descriptor added to JAX's array class

# the backward engine (hybrid._core.gradients, which drives the tape from above the modes) registers
# itself here, so that ``loss.backward()`` reaches it without the recorder importing it
_BACKWARD_ENGINE: list[Callable] = [None]  # type: ignore[list-item]


def set_backward_engine(engine: Callable) -> None:
    """Make ``engine(head, out_grad, retain_graph, train_mode)`` the implementation of ``LazyArray.backward``."""
    _BACKWARD_ENGINE[0] = engine


Tracer = core.Tracer  # JAX's classes that other modules extend, named here where jax._src is imported


def concrete(x: Any) -> Any:
    """The value of ``x`` as an ordinary array (computing the tape if needed); other values unchanged."""
    return force(x) if isinstance(x, LazyArray) else x


def fun_key(fun: lu.WrappedFun) -> Any:
    """A structural key of a WrappedFun: the function and the arguments of its transforms, leaving
    out the per-call output stores (and the thunks that read them)."""
    parts: list[Any] = [fun.f]
    for gen, args in fun.transforms:
        items: list[Any] = []
        for a in args:
            if isinstance(a, (lu.Store, lu.EqualStore)) or getattr(a, "__module__", None) == lu.__name__:
                items.append("store")
                continue
            try:
                hash(a)
                items.append(a)
            except TypeError:
                items.append(Unhashable())
        parts.append((gen, tuple(items)))
    return tuple(parts)


class Unhashable:
    """A key part equal to nothing else, so that a program using it is never reused."""

    __slots__ = ()


class LazyTrace(core.Trace):
    """The JAX trace of a recording scope: stages every operation on the tape."""

    __slots__ = ("_tape",)

    def __init__(self, tape: Any):
        super().__init__()
        # weak: the tape holds its trace, and a cycle would leave every finished tape to Python's
        # garbage collector, whose collections then cost each step more the more objects a process holds
        # (mlp33 loop in a process holding 300k lists: 0.67 ms of CPU per step, 0.76 ms with a strong
        # reference, 2.5x the collections)
        self._tape = weakref.ref(tape)
        self.requires_low = False

    @property
    def tape(self) -> Any:
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
                                (fun_key(jvp), symbolic_zeros))

    def process_custom_vjp_call(self, prim, fun, fwd, bwd, tracers, /, *, out_trees, symbolic_zeros):
        return self.tape.region(prim, fun, tracers, (fwd, bwd),
                                dict(out_trees=out_trees, symbolic_zeros=symbolic_zeros),
                                (fun_key(fwd), fun_key(bwd), symbolic_zeros))

    def cur_qdd(self, x):
        return None


def recording_trace(tape: Any) -> Any:
    """Context manager making ``tape``'s trace the current JAX trace."""
    return core.set_current_trace(tape.trace)


def parent_trace(tape: Any) -> Any:
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
