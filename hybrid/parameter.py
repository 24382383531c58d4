"""Parameter and Constant: named, mutable cells holding a JAX array and its gradient."""
from __future__ import annotations

import operator
import warnings
from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping, Sequence, overload

import jax
import jax.numpy as jnp
import numpy as np

from ._core import context as _context, functional as _functional, lazy as _lazy
from . import init as _init
from ._core.cells import DATA, GRAD, Cell
from ._core.watch import Watched
from .errors import DeferredInitializationError, ShapeError, UninitializedParameterError

if TYPE_CHECKING:
    from _typeshed import SupportsKeysAndGetItem

__all__ = ["Parameter", "Constant", "ParameterDict"]

_GRAD_REQS = ("write", "add", "null")
_DATA = operator.attrgetter("_data")
_GRAD_REQ = operator.attrgetter("_grad_req")


_warned_x64 = False


def _supported_dtype(dtype: Any, name: str | None) -> np.dtype:
    """``dtype`` as JAX will hold it: 64-bit types become 32-bit unless x64 is enabled (warned once)."""
    global _warned_x64
    requested = np.dtype(jnp.dtype(dtype))
    held = np.dtype(jax.dtypes.canonicalize_dtype(requested))
    if held != requested and not _warned_x64:
        _warned_x64 = True
        warnings.warn(f"Parameter {name!r}: {requested.name} is held as {held.name} because JAX's 64-bit mode is "
                      "off. Enable it before creating arrays with jax.config.update('jax_enable_x64', True) (or "
                      "the environment variable JAX_ENABLE_X64=1) to compute in float64.", stacklevel=3)
    return held


def _single_device(device: Any) -> Any:
    """``device`` as one ``jax.Device`` (Gluon's ``ctx``: a device, an object naming one in ``jax_device``
    such as ``hybrid.mxnet.cpu()``, or a list holding one), else None."""
    if isinstance(device, (list, tuple)) and len(device) == 1:
        device = device[0]
    device = getattr(device, "jax_device", device)
    return device if isinstance(device, jax.Device) else None


def _normalize_shape(shape: Any) -> tuple[int, ...] | None:
    if shape is None:
        return None
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    out = []
    for dim in shape:
        dim = int(dim)
        if dim < -1:
            raise ValueError(f"parameter dimensions must be >= 0 (0 or -1 = unknown), got shape {tuple(shape)}")
        out.append(0 if dim == -1 else dim)
    return tuple(out)


def _shape_known(shape: tuple[int, ...] | None) -> bool:
    return shape is not None and all(d > 0 for d in shape)


class GradState:
    """The gradient of a Parameter, for the trainer and the recorder.

    ``value``: an array, a value of the recording computing it, a reference to a packed value of that
    recording (what ``backward`` stores; resolved on first read), or None. ``fresh``: written by
    ``backward`` since the last optimizer step. ``dropped``: consumed by a step that did not keep it.
    """

    __slots__ = ("value", "fresh", "dropped")

    def __init__(self) -> None:
        self.value: Any = None
        self.fresh = False
        self.dropped = False

    def set(self, value: Any, fresh: bool = True) -> None:
        """Replace the gradient; ``fresh`` marks it as written by backward since the last step."""
        self.value, self.fresh, self.dropped = value, fresh, False

    def drop(self) -> None:
        """The gradient was consumed by a step that did not keep it."""
        self.value, self.dropped = None, True

    def resolved(self) -> Any:
        """The value, a reference to a packed value resolved (to a LazyArray or an array)."""
        value = self.value
        if _lazy.is_member(value):
            value = self.value = _lazy.resolve(value)
        return value


def data_of(params: Sequence["Parameter"]) -> list:
    """The arrays ``params`` hold (their stored data, or LazyArrays of a recording writing them; not read
    through a recording or a compiled step's frame)."""
    return list(map(_DATA, params))


def assign_all(params: Sequence["Parameter"], values: Sequence) -> None:
    """:meth:`Parameter.assign_data` for many parameters."""
    for param, value in zip(params, values):
        param._data = value


def consume_grads(params: Sequence["Parameter"], keep: bool = True, store: Any = None) -> None:
    """An optimizer step used the gradients of ``params``: they are no longer fresh, and unless ``keep``
    they are dropped (reading one then raises). Given a state ``store`` (the current context's, or the
    frame tracing a compiled step), the store marks them instead and ``keep`` does not apply (a compiled
    step's own ``keep_grads`` decides what it drops)."""
    if store is not None:
        for param in params:
            store.set_grad_fresh(param, False)
    elif keep:
        for param in params:
            param.grad_state.fresh = False
    else:
        for param in params:
            state = param.grad_state
            state.value, state.fresh, state.dropped = None, False, True


def open_recording(grads: Sequence) -> Any:
    """The recording, still open, that computes any of ``grads`` (values of ``grad_state``), else None.
    An optimizer update of them is staged on it (``stage_update``), so that the step runs as one program."""
    return _lazy.open_tape(grads)


class Parameter(Watched):
    """A trainable (or state) array of a Block.

    Args:
        name: display name; a block registering the parameter as an attribute
            uses the attribute name in ``collect_params`` keys.
        grad_req: ``'write'`` (backward overwrites the gradient), ``'add'``
            (backward accumulates) or ``'null'`` (no gradient).
        shape: tuple of ints; a 0 (or -1) is unknown and filled in at the first
            forward when ``allow_deferred_init`` is true.
        dtype: NumPy-style dtype of the data.
        lr_mult, wd_mult: multipliers of the learning rate and weight decay.
        init: initializer (or its name) used in preference to the block's.
        allow_deferred_init: allow ``initialize()`` before the shape is known.
        differentiable: False for state that is never differentiated (e.g.
            BatchNorm's running statistics).
    """

    gluon1_name: str | None = None  # the name given to Gluon 1.x's self.params.get, if it made this one

    def __init__(self, name: str | None = "weight", grad_req: str = "write", shape: Any = None,
                 dtype: Any = "float32", lr_mult: float = 1.0, wd_mult: float = 1.0, init: Any = None,
                 allow_deferred_init: bool = False, differentiable: bool = True,
                 stype: str = "default", grad_stype: str = "default"):
        if stype != "default" or grad_stype != "default":
            raise ValueError(f"Parameter {name!r}: only dense storage ('default') is supported, "
                             f"got stype={stype!r}, grad_stype={grad_stype!r}")
        self._name = name
        self._shape = _normalize_shape(shape)
        self._dtype = _supported_dtype(dtype, self._name)
        self.init = _init.create(init)
        self.lr_mult = float(lr_mult)
        self.wd_mult = float(wd_mult)
        self.allow_deferred_init = allow_deferred_init
        self._differentiable = differentiable
        self._grad_req = "null"
        self.grad_req = grad_req if differentiable else "null"
        self._data: jax.Array | None = None
        self.grad_state = GradState()
        self._deferred: _init.Initializer | None = None
        self._device: Any = None  # the jax.Device given to initialize / reset_device, if one
        self._init_name: str | None = name  # the name the initializer sees (Parameter.initialize)

    # -- metadata -----------------------------------------------------------
    @property
    def name(self) -> str | None:
        return self._name

    def adopt_name(self, name: str) -> None:
        """Take ``name`` unless the parameter has one (a block registering it under an attribute)."""
        if self._name is None:
            self._name = name

    @property
    def shape(self) -> tuple[int, ...] | None:
        """The shape; unknown dimensions are 0 until the first forward fills them in."""
        return self._shape

    @shape.setter
    def shape(self, new_shape: Any) -> None:
        new_shape = _normalize_shape(new_shape)
        if self._shape is not None and new_shape is not None:
            compatible = len(self._shape) == len(new_shape) and all(
                old in (0, new) for old, new in zip(self._shape, new_shape))
            if not compatible:
                raise ShapeError(f"Parameter {self._name!r} has shape {self._shape} (0 = unknown); "
                                 f"it cannot become {new_shape}")
        self._shape = new_shape

    @property
    def dtype(self) -> np.dtype:
        return self._dtype

    @property
    def grad_req(self) -> str:
        return self._grad_req

    @grad_req.setter
    def grad_req(self, req: str) -> None:
        if req not in _GRAD_REQS:
            raise ValueError(f"Parameter {self._name!r}: grad_req must be one of {_GRAD_REQS}, got {req!r}")
        if not self._differentiable:
            req = "null"
        if req != self._grad_req:
            self._grad_req = req
            if req == "null":
                self.grad_state.value = None
            self._changed()

    @staticmethod
    def grad_reqs(params: Sequence["Parameter"]) -> list[str]:
        """The ``grad_req`` of each of ``params``, in one pass (what the backward engine asks of the
        parameters a recording read)."""
        return list(map(_GRAD_REQ, params))

    @staticmethod
    def set_grads(params: Sequence["Parameter"], grads: Sequence) -> None:
        """Give each of ``params`` its fresh gradient (``grads`` may be references to packed values): what
        ``backward`` writes, in one pass without a call per parameter."""
        for param, grad in zip(params, grads):
            state = param.grad_state
            state.value, state.fresh, state.dropped = grad, True, False

    @property
    def lr_mult(self) -> float:
        """Multiplier of the learning rate for this parameter."""
        return self._lr_mult

    @lr_mult.setter
    def lr_mult(self, value: float) -> None:
        self._lr_mult = value
        self._changed(forward=False)  # trainers and compiled steps bake the multipliers into their updates

    @property
    def wd_mult(self) -> float:
        """Multiplier of the weight decay for this parameter."""
        return self._wd_mult

    @wd_mult.setter
    def wd_mult(self, value: float) -> None:
        self._wd_mult = value
        self._changed(forward=False)

    @property
    def differentiable(self) -> bool:
        return self._differentiable

    @property
    def is_initialized(self) -> bool:
        """True once the parameter holds data."""
        return self._data is not None

    @property
    def is_deferred(self) -> bool:
        """True while initialisation waits for the first forward call to learn the shape."""
        return self._data is None and self._deferred is not None

    @property
    def own_data(self) -> Any:
        """The array the parameter holds itself, whatever mode is active (:meth:`data` reads the
        mode's value): a JAX array, a value of the recording writing it, or None before initialisation."""
        return self._data

    def __repr__(self) -> str:
        return f"Parameter {self._name} (shape={self._shape}, dtype={self._dtype.name})"

    # -- initialisation -----------------------------------------------------
    def initialize(self, init: Any = None, device: Any = None, default_init: Any = None,
                   force_reinit: bool = False, ctx: Any = None, *, name: str | None = None) -> None:
        """Create the data with ``init`` (else the parameter's own init, else ``default_init``).

        ``name`` is the name the initializer is given (``Initializer.for_parameter``): a
        ``ParameterDict`` passes its key (``'0.weight'``); by default the parameter's own name.

        With an unknown shape and ``allow_deferred_init`` the initialisation waits
        for the first forward call. ``device`` (Gluon 1.x: ``ctx``): a ``jax.Device`` (or a list
        holding one) puts the data there; None, or a list of several devices, leaves it on JAX's
        default device (several devices: ``Trainer(devices=...)``). Raises ValueError when the
        shape is unknown and deferral is not allowed.
        """
        device = ctx if device is None else device
        if self._data is not None and not force_reinit:
            warnings.warn(f"Parameter {self._name!r} is already initialized, ignoring. "
                          "Pass force_reinit=True to re-initialize.", stacklevel=2)
            return
        chosen = _init.create(init) or self.init or _init.create(default_init) or _init.Uniform()
        self._data = None
        self.grad_state.set(None, False)
        self._device = _single_device(device)
        self._init_name = self._name if name is None else name
        if not _shape_known(self._shape):
            if not self.allow_deferred_init:
                raise ValueError(f"Cannot initialize Parameter {self._name!r}: its shape {self._shape} has "
                                 "unknown dimensions and allow_deferred_init is False. Give the layer "
                                 "its input size (e.g. in_units / in_channels).")
            self._deferred = chosen
            return
        self._init_now(chosen)

    def _init_now(self, initializer: _init.Initializer) -> None:
        shape = self._shape
        assert shape is not None  # the callers checked _shape_known(self._shape)
        device = getattr(self, "_device", None)
        with _functional.no_frame(), jax.ensure_compile_time_eval():
            data = initializer.for_parameter(self._init_name, shape, self._dtype)
            if tuple(data.shape) != self._shape:
                raise ShapeError(f"initializer {initializer!r} returned shape {tuple(data.shape)} for "
                                 f"Parameter {self._name!r} of shape {self._shape}")
            if device is not None:
                data = jax.device_put(data, device)
        self._data = data
        self._deferred = None

    def finish_deferred_init(self) -> None:
        """Initialise now if initialisation was deferred and the shape is known."""
        if self._deferred is not None and self._data is None:
            if not _shape_known(self._shape):
                raise DeferredInitializationError(
                    f"Parameter {self._name!r} still has unknown shape {self._shape} after shape inference")
            self._init_now(self._deferred)

    # -- data and gradient --------------------------------------------------
    def data(self, device: Any = None, ctx: Any = None) -> jax.Array:
        """The current value (a JAX array of ``shape`` and ``dtype``); ``device``/``ctx`` are accepted
        for Gluon code (one device).

        Raises DeferredInitializationError while the shape waits for the first
        forward, UninitializedParameterError before ``initialize()``.
        """
        return _context.stack.top.mode.read_param(self)

    def no_data_error(self) -> Exception:
        """The error :meth:`data` raises while the parameter holds no data."""
        if self._deferred is not None:
            return DeferredInitializationError(
                f"Parameter {self._name!r} has unknown shape {self._shape}; it is initialised "
                "at the first forward call of its block")
        return UninitializedParameterError(
            f"Parameter {self._name!r} has not been initialized. Call .initialize() on the "
            "parameter or on its block (e.g. net.initialize()) before using it")

    def list_data(self) -> list[jax.Array]:
        """Gluon compatibility: the data on every device (one device here)."""
        return [self.data()]

    def list_device(self) -> list:
        """Gluon 2.0's ``list_device``: the devices holding the data, a list of ``jax.Device`` (one device
        unless the parameter is placed on a mesh). While initialisation waits for the first forward
        call: the device it will use. Raises UninitializedParameterError before ``initialize()``."""
        if self._data is None:
            if self._deferred is not None:
                device = getattr(self, "_device", None)
                return [device if device is not None else jax.devices()[0]]
            raise UninitializedParameterError(
                f"Parameter {self._name!r} has not been initialized, so it is on no device yet. Call "
                ".initialize() on the parameter or on its block first")
        return sorted(self._data.devices(), key=lambda d: d.id)

    def list_ctx(self) -> list:
        """Gluon 1.x's name of :meth:`list_device`."""
        return self.list_device()

    def set_data(self, value: Any) -> None:
        """Replace the value. Shape must match (unknown dimensions are filled in); dtype is cast."""
        _context.current().mode.write_param(self, value)

    def store_data(self, value: Any) -> None:
        """:meth:`set_data` outside frames: the parameter holds ``value`` itself (a recorded value is
        written when the recording runs)."""
        if isinstance(value, _lazy.LazyArray) and not value._tape.released:
            self._check_shape(value.shape)
            old, self._data = self._data, value.astype(self._dtype) if value.dtype != self._dtype else value
            value._tape.write(Cell(DATA, self), self._data, self._set_computed, replaces=old)
            return
        if isinstance(value, jax.core.Tracer):
            raise _functional.refusal(f"Parameter {self._name!r}.set_data would store a traced value")
        array = jnp.asarray(value, dtype=self._dtype)
        self._check_shape(array.shape)
        self.shape = tuple(array.shape)
        self._data = array
        self._deferred = None

    # -- the state interface of the trainer and the recorder (no checks: callers hold arrays of the right
    # shape); grad_state holds the gradient --
    def assign_data(self, value: Any) -> None:
        """Replace the data by an array of the parameter's shape and dtype (an update's result)."""
        self._data = value

    def _check_shape(self, shape: tuple) -> None:
        if self._shape is not None and _shape_known(self._shape) and tuple(shape) != self._shape:
            raise ShapeError(f"Parameter {self._name!r} expects shape {self._shape}, got {tuple(shape)}")

    def _set_computed(self, value: jax.Array) -> None:
        """Store the computed value of a recorded write (if nothing replaced it since)."""
        if isinstance(self._data, _lazy.LazyArray):
            self._data = value

    def grad(self, device: Any = None, ctx: Any = None) -> jax.Array:
        """The gradient written by ``autograd.backward`` (zeros until the first one).

        Raises RuntimeError for ``grad_req='null'``, or when the last gradient was consumed
        inside a ``hybrid.compile`` step that did not keep gradients.
        """
        if self._grad_req == "null":
            raise RuntimeError(f"Parameter {self._name!r} has grad_req='null' and no gradient")
        if self._data is None:
            self.data()  # raises the right uninitialised error
        return _context.current().store.read_cell(Cell(GRAD, self), self._stored_grad, self._checked_grad)

    def _checked_grad(self) -> jax.Array:
        if self.grad_state.dropped:
            raise RuntimeError(f"the gradient of Parameter {self._name!r} was consumed by a compiled step that did "
                               "not keep it; read it before the step, or keep gradients with keep_grads=True "
                               "(hybrid.compile(..., keep_grads=True) or Trainer(..., keep_grads=True))")
        return self._stored_grad()

    def _stored_grad(self) -> jax.Array:
        grad = self._grad_value()
        if grad is None:
            data = self._data
            if data is None:
                raise self.no_data_error()
            with _functional.no_frame(), jax.ensure_compile_time_eval():
                grad = self.grad_state.value = jnp.zeros(data.shape, data.dtype)
        return grad

    def _grad_value(self) -> Any:
        return self.grad_state.resolved()

    def list_grad(self) -> list[jax.Array]:
        """Gluon compatibility: the gradient on every device (one device here)."""
        return [self.grad()]

    def zero_grad(self) -> None:
        """Set the gradient to zeros (needed between steps when ``grad_req='add'``)."""
        if self._grad_req != "null" and self._data is not None:
            zeros = jnp.zeros(self._data.shape, self._data.dtype)
            _context.current().store.write_cell(Cell(GRAD, self), self._stored_grad, self._set_grad, zeros)

    def scale_grad(self, fn: Any) -> None:
        """Replace the gradient (if there is one) by ``fn(gradient)``, keeping its freshness."""
        if self._grad_req == "null" or self._data is None:
            return
        store = _context.current().store
        cell = Cell(GRAD, self)
        grad = store.read_cell(cell, self._stored_grad, self._kept_grad)
        if grad is not None:
            store.write_cell(cell, self._stored_grad, self._set_grad, fn(grad))

    def set_grad(self, value: Any) -> None:
        """Replace the gradient by ``value`` (cast to the parameter's dtype, broadcast to its shape), keeping
        its freshness. Raises RuntimeError for ``grad_req='null'``."""
        if self._grad_req == "null":
            raise RuntimeError(f"Parameter {self._name!r} has grad_req='null' and no gradient")
        data = self._data if self._data is not None else self.data()  # data() raises the uninitialised error
        value = jnp.broadcast_to(jnp.asarray(value, dtype=self._dtype), data.shape)
        _context.current().store.write_cell(Cell(GRAD, self), self._stored_grad, self._set_grad, value)

    def _kept_grad(self) -> Any:
        """The gradient outside a compiled step, or None when there is none (never written, or dropped)."""
        state = self.grad_state
        return state.resolved() if state.value is not None and not state.dropped else None

    def _set_grad(self, value: jax.Array) -> None:
        self.grad_state.value = value
        self.grad_state.dropped = False

    def accumulate_grad(self, value: jax.Array) -> Any:
        """Write or add ``value`` according to grad_req and mark the gradient fresh; returns the new
        gradient (inside a ``hybrid.compile`` step, a cell of the step)."""
        store = _context.current().store
        cell = Cell(GRAD, self)
        if self._grad_req == "add":
            old = store.read_cell(cell, self._stored_grad, self._kept_grad)
            if old is not None:
                value = old + value
        store.write_cell(cell, self._stored_grad, self._set_grad, value)
        store.set_grad_fresh(self, True)
        return value

    def grad_is_fresh(self) -> bool:
        """Whether backward wrote the gradient since the last optimizer step (trace-aware)."""
        return bool(_context.current().store.fresh_grads((self,)))

    def mark_grad_consumed(self) -> None:
        """The gradient was used by an optimizer step (trace-aware)."""
        consume_grads((self,), store=_context.current().store)

    def cast(self, dtype: Any) -> None:
        """Convert data and gradient to ``dtype``."""
        self._dtype = _supported_dtype(dtype, self._name)
        if self._data is not None:
            self._data = self._data.astype(self._dtype)
        if self.grad_state.value is not None:
            self.grad_state.value = self._grad_value().astype(self._dtype)
        self._changed()

    def reset_device(self, device: Any) -> None:
        """Move the data (and gradient) to ``device`` (a ``jax.Device``, or a list holding one)."""
        self._device = _single_device(device)
        if self._device is not None:
            device = self._device
        if self._data is not None:
            self._data = jax.device_put(self._data, device)
        if self.grad_state.value is not None:
            self.grad_state.value = jax.device_put(self._grad_value(), device)

    reset_ctx = reset_device


class Constant(Parameter):
    """A parameter holding a fixed value; it never gets a gradient.

    Args:
        value: array-like; its shape and dtype become the parameter's.
        name: display name.

    Gluon 1.x's order ``Constant('name', value)`` is recognised (a string first and an array second) and
    swapped; the value is then float32 unless it is a JAX array, as in Gluon 1.x. Raises TypeError when
    ``value`` is a string.
    """

    def __init__(self, value: Any, name: str | None = "const"):
        if isinstance(value, str):
            if name is None or isinstance(name, str):
                raise TypeError(f"Constant: value must be array-like, got the string {value!r}; write "
                                "Constant(value, name='...') (Gluon 1.x's Constant(name, value) is accepted too)")
            value, name = name, value  # Gluon 1.x: Constant(name, value), float32 unless a JAX array
            if not isinstance(value, jax.Array):
                value = np.asarray(value, dtype=np.float32)
        array = np.asarray(value)
        if array.dtype == np.float64:
            array = array.astype(np.float32)
        super().__init__(name=name, grad_req="null", shape=array.shape, dtype=array.dtype,
                         init=_init.Constant(array), differentiable=False)
        self.value = array

    def __repr__(self) -> str:
        return f"Constant {self._name} (shape={self._shape}, dtype={self._dtype.name})"


class ParameterDict(dict):
    """What ``Block.collect_params()`` returns: a ``dict`` from structural names to Parameters (so it
    compares, iterates and indexes like one, as in Gluon 2.0) with Gluon 1.x ``ParameterDict``'s methods.

    A Parameter shared by several blocks appears under each of its names; the methods act on it once.
    """

    _block: Any = None  # the block of ``block.params``, where get() creates parameters

    @classmethod
    def _of_block(cls, block: Any, params: Mapping[str, "Parameter"]) -> "ParameterDict":
        """``block.params``: a ParameterDict whose :meth:`get` and :meth:`get_constant` create parameters
        of ``block``."""
        own = cls(params)
        own._block = block
        return own

    def get(self, name: str, default: Any = None, **kwargs: Any) -> Any:
        """The Parameter called ``name``, else ``default`` (``dict.get``, as Gluon 2.0).

        On a block's own ``self.params``, Gluon 1.x's ``get(name, shape=..., init=..., dtype=...,
        allow_deferred_init=..., grad_req=..., lr_mult=..., wd_mult=..., differentiable=...)``: the
        block's parameter ``name``, created (and registered under ``name``) if the block has none, its full
        1.x name ``block.prefix + name``. For an existing parameter the keywords are checked: unknown
        dimensions (0) of ``shape`` are filled in, another known shape, dtype, ``grad_req``, ``lr_mult``
        or ``wd_mult`` raises ValueError. A Gluon 1.x block's ``get(name)`` creates too; elsewhere it only
        looks up. Raises TypeError for keywords on other ParameterDicts (e.g. ``collect_params()``), which
        only look up, and for keywords Parameter does not take.
        """
        block = self._block
        if block is None or (not kwargs and (name in self or not getattr(block, "_gluon1", False))):
            if kwargs:
                raise TypeError(f"ParameterDict.get({name!r}, {', '.join(kwargs)}=...): this ParameterDict (e.g. "
                                "from collect_params()) only looks parameters up. Create them in the block, "
                                "with Gluon 1.x's self.params.get(name, shape=...) or as block attributes "
                                "(self.weight = hybrid.Parameter('weight', shape=...))")
            return dict.get(self, name, default)
        where = f"{type(block).__name__}.params.get({name!r})"

        def make(full_name: str) -> Parameter:
            try:
                return Parameter(full_name, **kwargs)
            except TypeError as exc:
                raise TypeError(f"{where}: {exc}; it takes the keywords of hybrid.Parameter (shape, dtype, init, "
                                "grad_req, lr_mult, wd_mult, allow_deferred_init, differentiable)") from None
        param = block._gluon1_parameter(name, make, lambda p: _merge_gluon1_keywords(p, kwargs, where))
        dict.__setitem__(self, name, param)
        return param

    def get_constant(self, name: str, value: Any = None) -> "Constant":
        """Gluon 1.x's ``self.params.get_constant(name, value)`` on a block's own ``self.params``: the
        block's Constant ``name``, created from ``value`` if the block has none: a JAX array keeps its
        dtype, other array-likes become float32 (as Gluon 1.x's ``nd.array(value)``).

        Raises KeyError when there is none and ``value`` is None, ValueError when ``name`` is a Parameter
        that is not a Constant or a Constant of another value, TypeError on other ParameterDicts.
        """
        block = self._block
        if block is None:
            raise TypeError(f"ParameterDict.get_constant({name!r}): only a block's own self.params creates "
                            "constants (Gluon 1.x)")
        where = f"{type(block).__name__}.params.get_constant({name!r})"

        def make(full_name: str) -> Constant:
            if value is None:
                raise KeyError(f"{where}: the block has no constant {name!r}; pass its value to create it")
            # Gluon 1.x makes an NDArray of the value: float32 unless it is an array of the framework already
            array = value if isinstance(value, jax.Array) else np.asarray(value, dtype=np.float32)
            return Constant(array, name=full_name)

        def reuse(param: Parameter) -> None:
            if not isinstance(param, Constant):
                raise ValueError(f"{where}: {name!r} is a {type(param).__name__}, not a Constant")
            if value is not None and (np.shape(value) != param.shape or
                                      not np.array_equal(np.asarray(value), param.value)):
                raise ValueError(f"{where}: the constant exists with another value (shape {param.shape})")
        param = block._gluon1_parameter(name, make, reuse)
        dict.__setitem__(self, name, param)
        return param

    @overload
    def update(self, other: SupportsKeysAndGetItem[str, Parameter], /, **kwargs: Parameter) -> None: ...

    @overload
    def update(self, other: Iterable[tuple[str, Parameter]], /, **kwargs: Parameter) -> None: ...

    @overload
    def update(self, /, **kwargs: Parameter) -> None: ...

    def update(self, other: Any = (), /, **kwargs: Parameter) -> None:
        """Add the Parameters of ``other`` (a mapping or ``(name, Parameter)`` pairs) and ``kwargs``.

        Raises ValueError, before anything is added, when a name is already bound to a different
        Parameter, and TypeError for a value that is not a Parameter.
        """
        items = list(other.items() if hasattr(other, "items") else other) + list(kwargs.items())
        for name, param in items:
            if not isinstance(param, Parameter):
                raise TypeError(f"ParameterDict.update: {name!r} must be a Parameter, got {type(param).__name__}")
            existing = dict.get(self, name)
            if existing is not None and existing is not param:
                raise ValueError(f"ParameterDict.update: the name {name!r} is already bound to another Parameter "
                                 f"({existing!r}); a ParameterDict cannot hold two Parameters under one name")
        dict.update(self, items)

    def copy(self) -> "ParameterDict":
        """A shallow copy (the same Parameters), as a ParameterDict."""
        return ParameterDict(self)

    def _unique(self) -> list[tuple[str, Parameter]]:
        """(first name, Parameter) for each distinct Parameter, in order."""
        seen: dict[int, tuple[str, Parameter]] = {}
        for name, param in self.items():
            seen.setdefault(id(param), (name, param))
        return list(seen.values())

    # -- Gluon 1.x ParameterDict methods --------------------------------------------------------
    def initialize(self, init: Any = _init.Uniform(), ctx: Any = None, device: Any = None, verbose: bool = False,
                   force_reinit: bool = False) -> None:
        """Initialise every parameter; a parameter's own ``init`` wins over ``init``.

        ``device`` (Gluon 1.x: ``ctx``) as in :meth:`Parameter.initialize`. Already initialised
        parameters are left unchanged (one warning) unless ``force_reinit``. ``verbose`` prints a
        line per initialised parameter: name, shape and initializer.
        """
        self._initialize(init, ctx if device is None else device, verbose, force_reinit, "ParameterDict.initialize")

    def _initialize(self, init: Any, device: Any, verbose: bool, force_reinit: bool, who: str) -> None:
        skipped = 0
        for name, param in self._unique():
            if param._data is not None and not force_reinit:
                skipped += 1
                continue
            param.initialize(None, device, default_init=init, force_reinit=force_reinit, name=name)
            if verbose:
                used = param.init or _init.create(init) or _init.Uniform()
                state = "at the first forward call" if param._data is None else "now"
                print(f"{who}: {name} {param.shape} with {used!r} ({state})")
        if skipped:
            warnings.warn(f"{who}: {skipped} parameter(s) already initialized were left unchanged; pass "
                          "force_reinit=True to re-initialize them.", stacklevel=4)

    def setattr(self, name: str, value: Any) -> None:
        """Set attribute ``name`` of every parameter, e.g. ``setattr('grad_req', 'null')`` to freeze them or
        ``setattr('lr_mult', 0.5)``. Raises what setting the attribute raises (ValueError for a bad
        ``grad_req``)."""
        for _, param in self._unique():
            setattr(param, name, value)

    def zero_grad(self) -> None:
        """Set every gradient to zeros (parameters with ``grad_req='null'`` or no data are skipped)."""
        for _, param in self._unique():
            param.zero_grad()

    def reset_device(self, device: Any) -> None:
        """Move every parameter's data and gradient to ``device`` (a ``jax.Device``)."""
        for _, param in self._unique():
            param.reset_device(device)

    def reset_ctx(self, ctx: Any) -> None:
        """Gluon 1.x's name of :meth:`reset_device`."""
        self.reset_device(ctx)

    def list_device(self) -> list:
        """The devices (``jax.Device``) holding the initialised parameters, each once, in order of id.
        Parameters still waiting for initialisation count with the device they will use."""
        devices: dict[Any, None] = {}
        for _, param in self._unique():
            if param._data is not None or param._deferred is not None:
                devices.update(dict.fromkeys(param.list_device()))
        return sorted(devices, key=lambda d: d.id)

    def list_ctx(self) -> list:
        """Gluon 1.x's name of :meth:`list_device`."""
        return self.list_device()

    def save(self, filename: str, strip_prefix: str = "") -> None:
        """Save the parameters, under their names less ``strip_prefix``, to ``filename`` (atomic; the
        ``.npz`` format of ``Block.save_parameters``, which ``Block.load_parameters`` reads).

        Raises ValueError when a name does not start with ``strip_prefix``, and
        UninitializedParameterError / DeferredInitializationError for a parameter without data,
        naming the file and the parameter; nothing is written then.
        """
        for name in self:
            if not name.startswith(strip_prefix):
                raise ValueError(f"ParameterDict.save({filename!r}): parameter {name!r} does not start with "
                                 f"strip_prefix {strip_prefix!r}. Nothing was written.")
        save_parameter_file(filename, ((name[len(strip_prefix):], p) for name, p in self.items()),
                            "ParameterDict.save")

    def load(self, filename: str, ctx: Any = None, allow_missing: bool = False, ignore_extra: bool = False,
             restore_prefix: str = "", cast_dtype: bool = False, dtype_source: str = "current",
             device: Any = None) -> None:
        """Load a file written by :meth:`save` or ``Block.save_parameters`` (or an MXNet ``.params`` file)
        into these parameters: the file's names, with ``restore_prefix`` put in front, are this dict's.

        Checks everything before changing anything. Raises ValueError when a name of this dict does not
        start with ``restore_prefix``, or names missing/extra parameters (unless ``allow_missing`` /
        ``ignore_extra``); ShapeError on shape mismatches; TypeError on dtype mismatches unless
        ``cast_dtype`` (then ``dtype_source``: ``'current'`` keeps the parameters' dtypes, ``'saved'``
        adopts the file's); FileNotFoundError / FormatError (a ValueError) for a missing or corrupted
        file. Every message names the file. ``device`` (Gluon 1.x: ``ctx``) moves the loaded parameters.
        """
        for name in self:
            if not name.startswith(restore_prefix):
                raise ValueError(f"ParameterDict.load({filename!r}): parameter {name!r} does not start with "
                                 f"restore_prefix {restore_prefix!r}")
        params = {name[len(restore_prefix):]: p for name, p in self.items()}
        parameter_file_loader(params, filename, None, ctx if device is None else device, allow_missing,
                              ignore_extra, cast_dtype, dtype_source, "the ParameterDict")()


def _merge_gluon1_keywords(param: Parameter, kwargs: dict, where: str) -> None:
    """Check Gluon 1.x ``get`` keywords against an existing parameter; fill its unknown dimensions."""
    shape = kwargs.get("shape")
    if shape is not None:
        shape = _normalize_shape(shape)
        assert shape is not None  # a shape given normalizes to a tuple
        if param.shape is None:
            param.shape = shape
        elif len(shape) != len(param.shape) or any(a and b and a != b for a, b in zip(shape, param.shape)):
            raise ValueError(f"{where}: the parameter exists with shape {param.shape}, asked for {shape}")
        else:
            param._shape = tuple(a or b for a, b in zip(param.shape, shape))
    dtype = kwargs.get("dtype")
    if dtype is not None and np.dtype(jnp.dtype(dtype)) != param.dtype and \
            _supported_dtype(dtype, param.name) != param.dtype:
        raise ValueError(f"{where}: the parameter exists with dtype {param.dtype}, asked for {np.dtype(dtype)}")
    for attr in ("grad_req", "lr_mult", "wd_mult"):
        if attr in kwargs and kwargs[attr] != getattr(param, attr) and not (
                attr == "grad_req" and not param.differentiable):
            raise ValueError(f"{where}: the parameter exists with {attr}={getattr(param, attr)!r}, asked for "
                             f"{kwargs[attr]!r}")


# a pytree node like dict (keys in sorted order), so jax.tree_util sees the Parameters inside it
jax.tree_util.register_pytree_node(
    ParameterDict, lambda d: (tuple(d[k] for k in sorted(d)), tuple(sorted(d))),
    lambda keys, values: ParameterDict(zip(keys, values)))


def save_parameter_file(filename: str, named: Iterable[tuple[str, Parameter]], who: str,
                        deduplicate: bool = False) -> None:
    """Write ``named`` parameters' data as an ``.npz`` archive, or a ``.safetensors`` file when ``filename``
    ends so (atomically); ``deduplicate`` keeps a
    Parameter listed under several names only under its first. Raises, before writing, for a parameter
    without data, naming ``who``, the file and the parameter."""
    from .formats.params_file import save_parameter_arrays
    arrays, seen = {}, set()
    for name, param in named:
        if deduplicate and id(param) in seen:
            continue
        seen.add(id(param))
        if param._data is None:
            where = f"{who}({filename!r}): parameter {name!r}"
            if param._deferred is not None:
                raise DeferredInitializationError(
                    f"{where} has unknown shape {param.shape} until the first forward call; run the network on "
                    "a batch (or give the layers their input sizes) before saving. Nothing was written.")
            raise UninitializedParameterError(f"{where} is not initialized (call initialize() first). "
                                              "Nothing was written.")
        arrays[name] = np.asarray(param.data())
    save_parameter_arrays(filename, arrays)


def parameter_file_loader(params: Mapping[str, Parameter], filename: str, data: bytes | None = None,
                          device: Any = None, allow_missing: bool = False, ignore_extra: bool = False,
                          cast_dtype: bool = False, dtype_source: str = "current",
                          owner: str = "the block") -> Callable[[], None]:
    """Loading of a parameter file into ``params`` (by name) in two phases: read and check everything now
    (from ``data`` when given, the file's bytes), and return the function that applies it (which cannot
    fail). ``owner`` names the receiver in error messages."""
    from .formats.mxnet_params import TargetNames
    from .formats.params_file import load_parameter_file
    if dtype_source not in ("current", "saved"):
        raise ValueError(f"{filename}: dtype_source must be 'current' or 'saved', got {dtype_source!r}")
    plan: list = []  # (parameter, name, dtype to cast it to or None)

    def check(declared: dict[str, tuple]) -> None:
        """Refuse the file from its names, shapes and dtypes, before its arrays are read."""
        present = {id(params[n]) for n in params if n in declared}
        missing = [n for n, p in params.items() if n not in declared and id(p) not in present]
        if missing and not allow_missing:
            raise ValueError(f"{filename}: parameter(s) {missing} of {owner} are not in the "
                             f"file (it holds {sorted(declared)[:8]}{'...' if len(declared) > 8 else ''}). "
                             "Pass allow_missing=True to keep their current values.")
        extra = [n for n in declared if n not in params]
        if extra and not ignore_extra:
            raise ValueError(f"{filename}: the file has parameter(s) {extra} that {owner} does "
                             f"not have (it has {sorted(params)[:8]}{'...' if len(params) > 8 else ''}). "
                             "Pass ignore_extra=True to skip them.")
        for name, param in params.items():
            if name not in declared:
                continue
            file_shape, file_dtype = tuple(declared[name][0]), np.dtype(declared[name][1])
            shape = param.shape
            if shape is not None and (len(shape) != len(file_shape) or
                                      any(d not in (0, a) for d, a in zip(shape, file_shape))):
                raise ShapeError(f"{filename}: parameter {name!r} has shape {file_shape} in the file, "
                                 f"but {owner} expects {shape}")
            cast = None
            if file_dtype != param.dtype:
                if not cast_dtype:
                    raise TypeError(f"{filename}: parameter {name!r} has dtype {file_dtype} in the file, "
                                    f"{owner} expects {param.dtype}; pass cast_dtype=True to convert")
                cast = file_dtype if dtype_source == "saved" else None
            plan.append((param, name, cast))

    first: dict[int, tuple[str, str | None]] = {}
    for name, param in params.items():
        first.setdefault(id(param), (name, getattr(param, "gluon1_name", None)))
    targets = TargetNames(frozenset(params), tuple(first.values()))
    loaded = load_parameter_file(filename, targets, check, data)
    plan = [(param, loaded[name], cast) for param, name, cast in plan]

    def apply() -> None:
        for param, array, new_dtype in plan:
            if new_dtype is not None:
                param.cast(new_dtype)
            param.set_data(array)
            if device is not None:
                param.reset_device(device)
    return apply


def unique_params(params: Iterable[Parameter] | dict) -> list[Parameter]:
    """Parameters in first-seen order, each once (shared parameters appear under several names)."""
    if isinstance(params, dict):
        params = params.values()
    seen: dict[int, Parameter] = {}
    for p in params:
        if not isinstance(p, Parameter):
            raise TypeError(f"expected Parameter objects, got {type(p).__name__}")
        seen.setdefault(id(p), p)
    return list(seen.values())
