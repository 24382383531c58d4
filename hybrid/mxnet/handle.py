"""MXNet's mutable arrays: :class:`NDArray` (``mx.nd``) and its NumPy-interface subclass (``mx.np.ndarray``).

A handle holds an immutable value (a ``jax.Array``, or a value recorded inside ``autograd.record()`` or
traced by ``hybridize``) and rebinds it on every in-place write (``x[idx] = v``, ``x += y``, ``out=``,
``copyto``), so two names for one handle see each other's writes, as in MXNet. Where the value lives is
the handle's *source*:

- its own value (the common case: ``_source is None``);
- an attached gradient's Parameter (``x.attach_grad()`` makes ``x`` an unnamed :class:`hybrid.Parameter`,
  so inside ``record()`` its reads are tape inputs like any parameter's and the recorded step stays one
  program; ``backward()`` writes the parameter's gradient, which ``x.grad`` is a handle on);
- a contiguous block of another handle (``x[i]``, ``x[a:b]``, ``x[i, j]``: MXNet's views, which read and
  write the values of the handle they were taken from).

hybrid's own API keeps ``jax.Array``: Blocks called with handles unwrap them and wrap their outputs
(:func:`register`), and a handle is a pytree node holding its value, so ``jax.jit`` and the compiled paths
see plain values.
"""
from __future__ import annotations

import functools
import operator
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np

from .. import autograd as _autograd
from .._core import context as _context, scopes as _scopes
from .._core.lazy import LazyArray
from ..parameter import Parameter
from ._staged import UNSTAGED, staged_call
from .base import MXNetError
from .context import Context, to_device

__all__ = ["NDArray", "ndarray", "wrap", "unwrap", "handle_function", "value_of"]


def _live_tape(values: Any) -> Any:
    """The open recording a value among ``values`` belongs to (outside ``record()``): work on it is staged
    there too, so that an update written after ``backward()`` (``p[:] = p - lr * p.grad``) runs in the
    step's one program instead of forcing the recording first."""
    for value in values:
        if type(value) is LazyArray and not value._tape.released:
            return value._tape
    return None


def _computed(fn: Callable, args: Any, kwargs: dict | None = None, stable: bool = False,
              scalars: bool = False) -> Any:
    """``fn(*args, **kwargs)``; while recording, or on the open recording of a lazy argument (see
    :func:`_live_tape`), it is recorded there. A ``stable`` function (the same object at every call, pure
    but for the training flag) is recorded as one node (:mod:`._staged`; ``scalars``: Python numbers are
    its inputs, not constants)."""
    recording = _autograd.is_recording()
    if recording:
        tape = _context.stack.top.tape
    else:
        tape = _live_tape(args)
        if tape is None and kwargs:
            tape = _live_tape(kwargs.values())
        if tape is None:
            return fn(*args, **kwargs) if kwargs else fn(*args)
    if stable:
        result = staged_call(tape, fn, args, kwargs, scalars)
        if result is not UNSTAGED:
            return result
    if recording:
        return fn(*args, **kwargs) if kwargs else fn(*args)
    with _scopes.recording_on(tape):
        return fn(*args, **kwargs) if kwargs else fn(*args)


@functools.lru_cache(maxsize=None)
def _method_caller(name: str) -> Callable:
    """``f(x, *args, **kwargs) = x.<name>(*args, **kwargs)``, one function per method name (so that a
    recorded method call is staged under a stable key)."""
    def call_method(value: Any, *args: Any, **kwargs: Any) -> Any:
        return getattr(value, name)(*args, **kwargs)
    call_method.__name__ = name
    return call_method


@functools.lru_cache(maxsize=None)
def _mxnet_operator(name: str) -> Callable:
    from ..gluon1.ops import F
    return getattr(F, name)


@functools.lru_cache(maxsize=None)
def _array_method(name: str, legacy: bool) -> Callable:
    """The handle method ``name``: the value's method (``legacy``: MXNet's operator of that name, the value
    first), staged as one node while recording, returning handles."""
    caller = _method_caller(name)

    def method(self: "NDArray", *args: Any, **kwargs: Any) -> Any:
        fn = _mxnet_operator(name) if legacy else caller
        values = (self.value,) + unwrap(args) if args else (self.value,)
        return wrap(_computed(fn, values, unwrap(kwargs) if kwargs else None, True), type(self))
    method.__name__ = method.__qualname__ = name
    return method


# jax.Array's computing methods, defined on the handles (the others are reached through __getattr__)
_ARRAY_METHODS = ("all", "any", "argmax", "argmin", "argpartition", "argsort", "choose", "clip", "compress",
                  "conj", "conjugate", "cumprod", "cumsum", "diagonal", "dot", "flatten", "max", "mean", "min",
                  "prod", "ptp", "ravel", "repeat", "reshape", "round", "searchsorted", "sort", "squeeze", "std",
                  "sum", "swapaxes", "take", "trace", "transpose", "var")
# methods of MXNet 1.x's NDArray whose meaning differs from jax.Array's (flatten keeps the first axis,
# arg-reductions and sorts give float32): served by the MXNet operator of that name
_MXNET_METHODS = ("flatten", "argmax", "argmin", "argsort", "sort", "topk")


class _ParamData:
    """The value of an attached handle: its Parameter's data."""

    __slots__ = ("param",)

    def __init__(self, param: Parameter):
        self.param = param

    def read(self) -> Any:
        return self.param.data()

    def write(self, value: Any) -> None:
        if _autograd.is_recording():
            raise MXNetError(
                "assigning to an NDArray that has an attached gradient inside autograd.record() would make "
                "its gradient undefined: write it after backward(), outside the record() scope (in-place "
                "operations such as +=, x[idx] = v and out=x are not allowed on it while recording)")
        self.param.set_data(value)


class _ParamGrad:
    """The gradient of an attached handle (``x.grad``)."""

    __slots__ = ("param",)

    def __init__(self, param: Parameter):
        self.param = param

    def read(self) -> Any:
        return self.param.grad()

    def write(self, value: Any) -> None:
        self.param.set_grad(value)


class _Rows:
    """A view: a contiguous block ``index`` (see :func:`_is_view`) of another handle."""

    __slots__ = ("base", "index")

    def __init__(self, base: "NDArray", index: Any):
        self.base, self.index = base, index

    def read(self) -> Any:
        return self.base.value[self.index]

    def write(self, value: Any) -> None:
        base = self.base
        base._assign(base.value.at[self.index].set(value))


def _is_view(index: Any) -> bool:
    """Whether MXNet returns a view for ``index``: a contiguous block, that is leading integers, then at
    most one step-1 slice, then whole axes (``x[i]``, ``x[a:b]``, ``x[i, j]``, ``x[i, a:b]``)."""
    parts = index if type(index) is tuple else (index,)
    sliced = False
    for part in parts:
        if type(part) is slice:
            if sliced and part != slice(None):
                return False
            if part.step not in (None, 1):
                return False
            sliced = True
        elif sliced or isinstance(part, bool) or not isinstance(part, (int, np.integer)):
            return False
    return True


def _index_part(part: Any) -> Any:
    if isinstance(part, NDArray):
        part = part.value
        return part.astype(np.int32) if jnp.issubdtype(part.dtype, jnp.floating) else part  # MXNet takes floats
    if type(part) is list and any(isinstance(p, NDArray) for p in part):
        return jnp.asarray(unwrap(part))
    return part


def _index_value(index: Any) -> Any:
    """An index with handles replaced by their values (float index arrays as int32, as MXNet accepts them)."""
    if type(index) is tuple:
        return tuple(_index_part(i) for i in index)
    return _index_part(index)


class NDArray:
    """MXNet's ``NDArray``: a mutable handle over an immutable JAX value (``x.value``).

    Operators and methods return new handles; ``x[idx] = v``, ``x += y`` and ``copyto`` rebind the value.
    ``attach_grad()`` gives the handle a gradient, written by ``backward()`` and read as ``x.grad``.
    """

    __slots__ = ("_value", "_source", "__weakref__")
    _legacy = True  # MXNet 1.x semantics: comparisons keep the dtype, x[i] of a vector has shape (1,)

    def __init__(self, value: Any, source: Any = None):
        self._value = value
        self._source = source

    # -- the value --------------------------------------------------------------------------------------
    @property
    def value(self) -> Any:
        """The current immutable value (a ``jax.Array``, or a recorded or traced value)."""
        source = self._source
        return self._value if source is None else source.read()

    def _assign(self, value: Any) -> None:
        """Rebind the value (every name for this handle sees it)."""
        source = self._source
        if source is None:
            self._value = value
        else:
            source.write(value)

    def _fitted(self, value: Any) -> Any:
        """``value`` broadcast to this handle's shape in its dtype (what a full write stores)."""
        current = self.value
        if getattr(value, "dtype", None) == current.dtype and getattr(value, "shape", None) == current.shape:
            return value
        return _computed(lambda v: jnp.broadcast_to(jnp.asarray(v, dtype=current.dtype), current.shape), (value,))

    def __jax_array__(self) -> Any:
        return self.value

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        values = np.asarray(self.value)
        return values if dtype is None else values.astype(dtype)

    # -- metadata ---------------------------------------------------------------------------------------
    @property
    def shape(self) -> tuple:
        return tuple(self.value.shape)

    @property
    def dtype(self) -> Any:
        """MXNet 1.x gives the NumPy scalar type (``numpy.float32``)."""
        return self.value.dtype.type

    @property
    def ndim(self) -> int:
        return self.value.ndim

    @property
    def size(self) -> int:
        return int(self.value.size)

    @property
    def context(self) -> Context:
        """The :class:`~hybrid.mxnet.Context` of the device holding the value."""
        value = self.value
        devices = value.devices() if isinstance(value, jax.Array) and hasattr(value, "devices") else ()
        try:
            device = next(iter(devices))
        except (StopIteration, TypeError):
            device = jax.devices()[0]
        return Context("gpu" if device.platform in ("gpu", "cuda", "rocm") else "cpu", device.id)

    ctx = context

    @property
    def stype(self) -> str:
        return "default"

    @property
    def T(self) -> "NDArray":
        return self._new(self.value.T)

    def __len__(self) -> int:
        return len(self.value)

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def _scalar(self) -> Any:
        """The one value of a size-1 array (MXNet's NDArrays of shape (1,) convert like 0-d ones)."""
        value = self.value
        return value.reshape(()) if value.ndim and value.size == 1 else value

    def __bool__(self) -> bool:
        return bool(self._scalar())

    def __float__(self) -> float:
        return float(self._scalar())

    def __int__(self) -> int:
        return int(self._scalar())

    def __index__(self) -> int:
        return operator.index(self._scalar())

    __hash__ = object.__hash__

    # -- conversions ------------------------------------------------------------------------------------
    def _new(self, value: Any) -> "NDArray":
        return type(self)(value)

    def asnumpy(self) -> np.ndarray:
        """A writable NumPy copy of the values."""
        return np.array(self.value)

    def asscalar(self) -> Any:
        """The one value of a size-1 array as a NumPy scalar; ValueError for any other size."""
        if self.size != 1:
            raise ValueError(f"NDArray.asscalar: the array has shape {self.shape}, not a single value")
        return self.asnumpy().reshape(())[()]

    def item(self, *args: Any) -> Any:
        """The value as a Python scalar (``ndarray.item()``)."""
        return self.asnumpy().item(*args)

    def tolist(self) -> list:
        return self.asnumpy().tolist()

    def astype(self, dtype: Any, copy: bool = True) -> "NDArray":
        """The values as ``dtype``; the handle itself when the dtype is already that and ``copy=False``."""
        dtype = np.dtype(dtype)
        if not copy and self.value.dtype == dtype:
            return self
        return self._new(self.value.astype(dtype))

    def copy(self) -> "NDArray":
        """A new handle with the same values (a later write to one leaves the other)."""
        return self._new(self.value)

    def copyto(self, other: Any) -> Any:
        """Write the values into the handle ``other`` (returned), or copy them onto the Context ``other``."""
        if isinstance(other, NDArray):
            if other.shape != self.shape:
                raise ValueError(f"NDArray.copyto: shapes differ, {self.shape} into {other.shape}")
            other._assign(other._fitted(self.value))
            return other
        return self._new(jax.device_put(self.value, to_device(other)))

    def as_in_context(self, context: Any) -> "NDArray":
        """The handle itself when it is on ``context`` already, else a copy there."""
        if context == self.context:
            return self
        return self.copyto(context)

    as_in_ctx = as_in_context

    def as_np_ndarray(self) -> "ndarray":
        """The same values as an ``mx.np.ndarray``."""
        return ndarray(self.value)

    def as_nd_ndarray(self) -> "NDArray":
        """The same values as an MXNet 1.x ``NDArray``."""
        return NDArray(self.value)

    def tostype(self, stype: str) -> "NDArray":
        if stype != "default":
            raise MXNetError(f"NDArray.tostype({stype!r}): only dense ('default') storage is supported")
        return self

    def wait_to_read(self) -> None:
        value = self.value
        if hasattr(value, "block_until_ready"):
            value.block_until_ready()

    # -- autograd ---------------------------------------------------------------------------------------
    def attach_grad(self, grad_req: str = "write", stype: str | None = None) -> None:
        """Give the handle a gradient (zeros) that ``backward()`` writes (``'write'``) or adds to (``'add'``).

        The handle becomes an unnamed Parameter holding its current value; re-attaching starts a new one.
        """
        if stype not in (None, "default"):
            raise MXNetError(f"NDArray.attach_grad: only dense gradients are supported, got stype={stype!r}")
        value = self.value
        param = Parameter(None, grad_req=grad_req, shape=value.shape, dtype=value.dtype)
        param.set_data(value)
        self._source = _ParamData(param)
        self._value = None

    @property
    def grad(self) -> "NDArray | None":
        """The gradient of an attached handle (a handle, so ``x.grad[:] = 0`` writes it); None otherwise."""
        source = self._source
        if type(source) is not _ParamData or source.param.grad_req == "null":
            return None
        return type(self)(None, _ParamGrad(source.param))

    def detach(self) -> "NDArray":
        """A handle on the same values that gradients do not flow through."""
        return self._new(jax.lax.stop_gradient(self.value))

    def backward(self, out_grad: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
        """``autograd.backward(self, out_grad)``: write the gradients of the attached arrays and parameters
        this head was computed from inside ``record()``."""
        _autograd.backward(self.value, None if out_grad is None else unwrap(out_grad), retain_graph=retain_graph,
                           train_mode=train_mode)

    # -- indexing ---------------------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> "NDArray":
        if _is_view(index):
            view = type(self)(None, _Rows(self, index))
            if self._legacy and view.value.ndim == 0:  # MXNet 1.x has no 0-d arrays: x[i] of a vector is (1,)
                return self._new(self.value[index].reshape(1))
            return view
        result = self.value[_index_value(index)]
        if self._legacy and result.ndim == 0:
            result = result.reshape(1)
        return self._new(result)

    def __setitem__(self, index: Any, value: Any) -> None:
        value = unwrap(value)
        if (type(index) is slice and index == slice(None)) or index is Ellipsis:
            self._assign(self._fitted(value))
            return
        current = self.value
        self._assign(_computed(lambda c, v: c.at[_index_value(index)].set(jnp.asarray(v, dtype=c.dtype)),
                               (current, value)))

    # -- display ----------------------------------------------------------------------------------------
    def __repr__(self) -> str:
        shape = "x".join(str(d) for d in self.shape)
        return f"\n{self.asnumpy()}\n<{type(self).__name__} {shape} @{self.context}>"

    def __format__(self, spec: str) -> str:
        if spec and self.size == 1:
            return format(self._scalar().item(), spec)
        return format(str(self), spec)

    def __getattr__(self, name: str) -> Any:
        """The value's method of that name (MXNet's operator methods included), returning handles."""
        if name.startswith("__"):
            raise AttributeError(name)
        attribute = getattr(self.value, name)
        if not callable(attribute):
            return attribute
        return functools.partial(_array_method(name, legacy=False), self)

    def __dir__(self) -> list:
        return sorted(set(object.__dir__(self)) | set(dir(self.value)))

    # -- pickling (DataLoader workers, deepcopy) ---------------------------------------------------------
    def __reduce__(self) -> Any:
        return (type(self), (np.asarray(self.value),))


class ndarray(NDArray):
    """``mx.np.ndarray``: the handle with NumPy's semantics (0-d scalars, boolean comparisons, NumPy repr)."""

    __slots__ = ()
    _legacy = False

    @property
    def dtype(self) -> Any:
        return self.value.dtype

    def __repr__(self) -> str:
        text = repr(self.asnumpy())
        text = text.replace(", dtype=float32)", ")")
        context = self.context
        if context.device_type != "cpu":
            text = text[:-1] + f", ctx={context})"
        return text

    def __str__(self) -> str:
        return str(self.asnumpy())

    def asscalar(self) -> Any:
        raise AttributeError("mxnet.numpy.ndarray object has no attribute asscalar: use item()")


# -- wrapping and unwrapping ------------------------------------------------------------------------------
_CONTAINERS = (tuple, list, dict)


def value_of(x: Any) -> Any:
    """``x``'s value when it is a handle, else ``x``."""
    return x.value if isinstance(x, NDArray) else x


def unwrap(tree: Any) -> Any:
    """``tree`` with every handle (also inside lists, tuples and dicts) replaced by its value."""
    kind = type(tree)
    if kind is tuple or kind is list:
        return kind(x.value if isinstance(x, NDArray) else unwrap(x) if type(x) in (tuple, list, dict) else x
                    for x in tree)
    if kind is dict:
        return {k: unwrap(v) for k, v in tree.items()}
    return tree.value if isinstance(tree, NDArray) else tree


_ARRAY_TYPES: set = set()  # the concrete types met that are jax.Arrays (isinstance against it is slow)


def wrap(tree: Any, cls: type = NDArray) -> Any:
    """``tree`` with every array (also inside lists and tuples) made a new handle of ``cls``."""
    kind = type(tree)
    if kind in _ARRAY_TYPES:
        return cls(tree)
    if isinstance(tree, jax.Array):
        _ARRAY_TYPES.add(kind)
        return cls(tree)
    if kind is list or kind is tuple:
        return kind(wrap(x, cls) for x in tree)
    return tree


def handle_function(fn: Callable, cls: type = NDArray, name: str | None = None) -> Callable:
    """``fn`` taking handles or arrays and returning handles of ``cls``; ``out=`` (a handle) receives the
    result, as in MXNet."""
    def call(*args: Any, **kwargs: Any) -> Any:
        out = kwargs.pop("out", None) if kwargs else None
        values = [a.value if isinstance(a, NDArray) else unwrap(a) if type(a) in _CONTAINERS else a
                  for a in args]
        if kwargs or _autograd.is_recording() or _live_tape(values) is not None:
            result = _computed(fn, values, unwrap(kwargs) if kwargs else None, True)
        else:  # eager: the common case, called directly
            result = fn(*values)
        result = cls(result) if type(result) in _ARRAY_TYPES else wrap(result, cls)
        if out is None:
            return result
        if isinstance(out, NDArray):
            out._assign(out._fitted(value_of(result)))
            return out
        raise TypeError(f"{call.__name__}: out= must be an NDArray, got {type(out).__name__}")
    call.__name__ = call.__qualname__ = name or getattr(fn, "__name__", "function")
    call.__doc__ = getattr(fn, "__doc__", None)
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


# -- operators ---------------------------------------------------------------------------------------------
def _binary(op: Callable, name: str, reflected: bool = False, comparison: bool = False) -> Callable:
    def method(self: NDArray, other: Any) -> Any:
        if isinstance(other, NDArray):
            other = other.value
        elif not isinstance(other, (jax.Array, int, float, bool, complex, np.ndarray, np.generic)):
            return NotImplemented
        value = self.value
        args = (other, value) if reflected else (value, other)
        if _autograd.is_recording() or type(value) is LazyArray or type(other) is LazyArray:
            result = _computed(op, args, None, True, True)
        else:  # eager: the common case, called directly
            result = op(*args)
        if self._legacy and result.dtype != value.dtype and (comparison or value.dtype != np.bool_):
            result = result.astype(value.dtype)  # MXNet 1.x keeps the left operand's dtype
        return type(self)(result)
    method.__name__ = name
    return method


def _inplace(op: Callable, name: str) -> Callable:
    def in_dtype(a: Any, b: Any) -> Any:
        return op(a, b).astype(a.dtype)

    def method(self: NDArray, other: Any) -> NDArray:
        self._assign(_computed(in_dtype, (self.value, value_of(other)), stable=True, scalars=True))
        return self
    method.__name__ = name
    return method


def _unary(op: Callable, name: str) -> Callable:
    def method(self: NDArray) -> NDArray:
        return type(self)(_computed(op, (self.value,), stable=True))
    method.__name__ = name
    return method


_ARITHMETIC = {"add": operator.add, "sub": operator.sub, "mul": operator.mul, "truediv": operator.truediv,
               "floordiv": operator.floordiv, "mod": operator.mod, "pow": operator.pow,
               "matmul": operator.matmul}
_COMPARISONS = {"eq": operator.eq, "ne": operator.ne, "lt": operator.lt, "le": operator.le, "gt": operator.gt,
                "ge": operator.ge}
_BITWISE = {"and": operator.and_, "or": operator.or_, "xor": operator.xor}

for _name, _op in {**_ARITHMETIC, **_BITWISE}.items():
    setattr(NDArray, f"__{_name}__", _binary(_op, f"__{_name}__"))
    setattr(NDArray, f"__r{_name}__", _binary(_op, f"__r{_name}__", reflected=True))
    setattr(NDArray, f"__i{_name}__", _inplace(_op, f"__i{_name}__"))
for _name, _op in _COMPARISONS.items():
    setattr(NDArray, f"__{_name}__", _binary(_op, f"__{_name}__", comparison=True))
for _name, _op in {"neg": operator.neg, "pos": operator.pos, "abs": operator.abs, "invert": operator.invert}.items():
    setattr(NDArray, f"__{_name}__", _unary(_op, f"__{_name}__"))
NDArray.__div__ = NDArray.__truediv__  # type: ignore[attr-defined]
NDArray.__rdiv__ = NDArray.__rtruediv__  # type: ignore[attr-defined]
NDArray.__idiv__ = NDArray.__itruediv__  # type: ignore[attr-defined]


for _name in _ARRAY_METHODS:
    setattr(NDArray, _name, _array_method(_name, legacy=_name in _MXNET_METHODS))
    if _name in _MXNET_METHODS:
        setattr(ndarray, _name, _array_method(_name, legacy=False))
NDArray.topk = _array_method("topk", legacy=True)  # type: ignore[attr-defined]


def _flatten(handle: NDArray) -> tuple:
    return (handle.value,), type(handle)


def _unflatten(cls: type, children: Any) -> NDArray:
    return cls(children[0])


for _cls in (NDArray, ndarray):
    jax.tree_util.register_pytree_node(_cls, _flatten, lambda cls, children: _unflatten(cls, children))


def _register_with_blocks() -> None:
    """Blocks called with handles see their values and return handles of the same kind."""
    from .._compiled.inputs import register_handle
    for cls in (NDArray, ndarray):
        register_handle(cls, value_of, lambda outputs, cls=cls: wrap(outputs, cls))


_register_with_blocks()
