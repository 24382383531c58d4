"""Running MXNet custom operators (``F.Custom``/``nd.Custom`` on a registered ``CustomOpProp``).

A call binds the property to its string attributes and input shapes and dtypes (:class:`Bound`, cached per
signature, as MXNet binds an operator per executor): ``infer_shape``/``infer_type`` fix the outputs,
``declare_backward_dependency`` what backward receives, and ``create_operator`` the :class:`CustomOp`
whose ``forward``/``backward`` run as host code on NDArray handles. On the JAX side a call is one
:class:`hybrid.autograd.Function` whose forward and backward are ``jax.pure_callback`` calls, so the
same operator runs eagerly, recorded, hybridized and compiled; XLA fuses nothing across a callback.
"""
from __future__ import annotations

import functools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._core import context as _context, lazy as _lazy, scopes as _scopes
from ..autograd import Function
from .base import MXNetError
from .context import current_context
from .handle import NDArray, ndarray

__all__ = ["Bound", "Kernel", "bound", "prop_of"]

# MXNet's type codes, which create_operator receives
_TYPE_CODES = {"float32": 0, "float64": 1, "float16": 2, "uint8": 3, "int32": 4, "int8": 5, "int64": 6,
               "bool": 7, "int16": 8, "uint16": 9, "uint32": 10, "uint64": 11, "bfloat16": 12}

_PROPS: dict[tuple, Any] = {}
_BOUND: dict[tuple, "Bound"] = {}


def prop_of(op_type: str, prop_cls: type, attrs: dict[str, str]) -> Any:
    """The ``CustomOpProp`` of ``op_type`` constructed with ``attrs`` (strings, as MXNet passes them);
    one per distinct attributes. Raises MXNetError naming ``op_type`` when the constructor fails."""
    key = (op_type, prop_cls, tuple(sorted(attrs.items())))
    prop = _PROPS.get(key)
    if prop is None:
        try:
            prop = prop_cls(**attrs)
        except Exception as error:
            raise MXNetError(f"custom operator {op_type!r}: {prop_cls.__name__}(**{attrs}) failed: "
                             f"{type(error).__name__}: {error}") from error
        _PROPS[key] = prop
    return prop


def _shape(value: Any, op_type: str, what: str) -> tuple[int, ...]:
    try:
        return tuple(int(d) for d in value)
    except TypeError:
        raise MXNetError(f"custom operator {op_type!r}: infer_shape gave {value!r} as the shape of {what}; "
                         "a shape is a list or tuple of integers") from None


def _lists(result: Any, op_type: str, method: str, counts: tuple[int, int, int]) -> tuple[list, list, list]:
    """MXNet's 2- or 3-list answer of ``infer_shape``/``infer_type``, its lengths checked."""
    if not isinstance(result, (tuple, list)) or len(result) not in (2, 3):
        raise MXNetError(f"custom operator {op_type!r}: {method} must return 2 or 3 lists (inputs, outputs[, "
                         f"auxiliary states]), got {result!r:.200}")
    parts = [list(part) for part in result] + ([[]] if len(result) == 2 else [])
    for part, count, what in zip(parts, counts, ("input", "output", "auxiliary state")):
        if len(part) != count:
            raise MXNetError(f"custom operator {op_type!r}: {method} gave {len(part)} {what} entries, the "
                             f"operator has {count}")
    return parts[0], parts[1], parts[2]


class _Slot(NDArray):
    """An array the operator writes (an output, an input gradient): a full write of an array whose shape
    does not broadcast to the slot's raises, naming the operator and what infer_shape gave."""

    _where: str | None = None

    def _fitted(self, value: Any) -> Any:
        where = self._where
        shape = getattr(value, "shape", None)
        if where is not None and shape is not None and tuple(shape) != self.shape:
            try:
                np.broadcast_shapes(tuple(shape), self.shape)
            except ValueError:
                raise MXNetError(f"{where} has shape {self.shape} (from infer_shape), but the array written to it "
                                 f"has shape {tuple(shape)}: make infer_shape return the shapes forward "
                                 "writes") from None
        return super()._fitted(value)

    def _new(self, value: Any) -> NDArray:
        return NDArray(value)


class _NpSlot(_Slot, ndarray):
    def _new(self, value: Any) -> NDArray:
        return ndarray(value)


class Bound:
    """A custom operator bound to its attributes and its inputs' shapes and dtypes.

    Raises:
        MXNetError (naming the op_type): the wrong number of inputs, an ``infer_shape`` or ``infer_type``
            answer of the wrong length or disagreeing with the inputs given.
    """

    def __init__(self, op_type: str, prop: Any, shapes: Sequence[tuple], dtypes: Sequence[np.dtype]):
        self.op_type, self.prop = op_type, prop
        self.arguments = list(prop.list_arguments())
        self.outputs = list(prop.list_outputs())
        self.aux = list(prop.list_auxiliary_states())
        n_args, n_out, n_aux = len(self.arguments), len(self.outputs), len(self.aux)
        if len(shapes) != n_args + n_aux:
            aux = f" and auxiliary states {self.aux}" if self.aux else ""
            raise MXNetError(f"custom operator {op_type!r} takes {n_args + n_aux} input(s) (arguments "
                             f"{self.arguments}{aux}), got {len(shapes)}")
        self.in_shapes, self.in_dtypes = [tuple(s) for s in shapes], [np.dtype(d) for d in dtypes]
        counts = (n_args, n_out, n_aux)
        ishape, oshape, ashape = _lists(prop.infer_shape([list(s) for s in self.in_shapes[:n_args]]), op_type,
                                        "infer_shape", counts)
        given = self.in_shapes
        for i, s in enumerate(ishape + ashape):
            if _shape(s, op_type, "an input") != given[i]:
                name = (self.arguments + self.aux)[i]
                raise MXNetError(f"custom operator {op_type!r}: infer_shape gives input {name!r} the shape "
                                 f"{tuple(s)}, but it has shape {given[i]}")
        self.out_shapes = [_shape(s, op_type, f"output {self.outputs[i]!r}") for i, s in enumerate(oshape)]
        _, otype, _ = _lists(prop.infer_type([d.type for d in self.in_dtypes[:n_args]]), op_type,
                                 "infer_type", counts)
        self.out_dtypes = [np.dtype(t) for t in otype]
        self.deps = sorted(set(int(d) for d in prop.declare_backward_dependency(
            list(range(n_out)), list(range(n_out, n_out + n_args)),
            list(range(n_out + n_args, 2 * n_out + n_args)))))
        self.operator: Any = None
        self.forward_callbacks = {flag: functools.partial(self.host_forward, flag) for flag in (False, True)}
        self.forward_result = [jax.ShapeDtypeStruct(s, d) for s, d in zip(self.out_shapes, self.out_dtypes)]
        self.backward_result = [jax.ShapeDtypeStruct(s, d) for s, d in
                                zip(self.in_shapes[:n_args], self.in_dtypes[:n_args])]

    # -- host code ------------------------------------------------------------------------------------
    def _created(self) -> Any:
        if self.operator is None:
            codes = [_TYPE_CODES.get(d.name, 0) for d in self.in_dtypes]
            self.operator = self.prop.create_operator(current_context(), [list(s) for s in self.in_shapes], codes)
        return self.operator

    def _handles(self, arrays: Sequence[Any]) -> list:
        from .numpy_extension import is_np_array
        cls = ndarray if is_np_array() else NDArray
        return [cls(jnp.asarray(a)) for a in arrays]

    def _slots(self, shapes: Sequence[tuple], dtypes: Sequence[np.dtype], names: Sequence[str], what: str) -> list:
        from .numpy_extension import is_np_array
        cls = _NpSlot if is_np_array() else _Slot
        slots = []
        for shape, dtype, name in zip(shapes, dtypes, names):
            slot = cls(jnp.zeros(shape, dtype))
            slot._where = f"custom operator {self.op_type!r}: {what} {name!r}"
            slots.append(slot)
        return slots

    def _run(self, method: str, training: bool, **arrays: Any) -> None:
        op = self._created()
        with _scopes.no_frame(), _context.scope(training=training):
            try:
                getattr(op, method)(**arrays)
            except MXNetError:
                raise
            except Exception as error:
                raise MXNetError(f"custom operator {self.op_type!r}: {type(op).__name__}.{method} raised "
                                 f"{type(error).__name__}: {error}") from error

    def _kept(self, aux: list, values: Sequence[Any], method: str) -> None:
        for handle, value, name in zip(aux, values, self.aux):
            if handle.value is not value:
                raise MXNetError(f"custom operator {self.op_type!r}: {method} wrote the auxiliary state {name!r}; "
                                 "hybrid passes auxiliary states as read-only inputs")

    def host_forward(self, is_train: bool, *arrays: Any) -> tuple:
        """Outputs (NumPy) of ``forward`` on the arguments and auxiliary states ``arrays``."""
        n = len(self.arguments)
        in_data, aux = self._handles(arrays[:n]), self._handles(arrays[n:])
        before = [a.value for a in aux]
        out_data = self._slots(self.out_shapes, self.out_dtypes, self.outputs, "output")
        self._run("forward", is_train, is_train=is_train, req=["write"] * len(out_data), in_data=in_data,
                  out_data=out_data, aux=aux)
        self._kept(aux, before, "forward")
        return tuple(np.asarray(o.value) for o in out_data)

    def host_backward(self, *arrays: Any) -> tuple:
        """Input gradients (NumPy) of ``backward`` given the declared dependencies then the auxiliary
        states ``arrays``; entries not declared reach backward as None."""
        n_out, n_args = len(self.outputs), len(self.arguments)
        given = self._handles(arrays)
        blobs: list[Any] = [None] * (2 * n_out + n_args)
        for index, handle in zip(self.deps, given):
            blobs[index] = handle
        aux = given[len(self.deps):]
        before = [a.value for a in aux]
        in_grad = self._slots(self.in_shapes[:n_args], self.in_dtypes[:n_args], self.arguments,
                              "the gradient of input")
        req = ["write" if jnp.issubdtype(d, jnp.inexact) else "null" for d in self.in_dtypes[:n_args]]
        self._run("backward", True, req=req, out_grad=blobs[:n_out], in_data=blobs[n_out:n_out + n_args],
                  out_data=blobs[n_out + n_args:], in_grad=in_grad, aux=aux)
        self._kept(aux, before, "backward")
        return tuple(np.asarray(g.value) for g in in_grad)


def bound(op_type: str, prop_cls: type, attrs: dict[str, str], inputs: Sequence[Any]) -> Bound:
    """The :class:`Bound` operator for these attributes and inputs (cached by their shapes and dtypes)."""
    shapes = tuple(tuple(np.shape(x)) for x in inputs)
    dtypes = tuple(np.dtype(jnp.result_type(x)) for x in inputs)
    key = (op_type, prop_cls, tuple(sorted(attrs.items())), shapes, dtypes)
    found = _BOUND.get(key)
    if found is None:
        found = _BOUND[key] = Bound(op_type, prop_of(op_type, prop_cls, attrs), shapes, dtypes)
    return found


def _host(fn: Any, result: list, arrays: Sequence[Any]) -> list:
    """``fn(*arrays)`` as JAX arrays: called at once when JAX runs eagerly (its errors reach the caller as
    raised), else through ``jax.pure_callback`` (recorded, traced, compiled)."""
    eager = not _lazy.under_transform() and not isinstance(_lazy.current_trace(), _lazy.LazyTrace)
    if eager and not any(isinstance(a, jax.core.Tracer) for a in arrays):
        return [jnp.asarray(v) for v in fn(*arrays)]
    return list(jax.pure_callback(fn, result, *arrays, vmap_method="sequential"))


@functools.partial(jax.custom_jvp, nondiff_argnums=(0, 1))
def _callback(op: Bound, step: Any, *arrays: Any) -> list:
    """``op``'s forward (``step`` is ``is_train``) or backward (``step`` is None) on ``arrays``; it has no
    derivative of its own."""
    if step is None:
        return _host(op.host_backward, op.backward_result, arrays)
    return _host(op.forward_callbacks[step], op.forward_result, arrays)


@_callback.defjvp
def _callback_jvp(op: Bound, step: Any, primals: tuple, tangents: tuple) -> tuple:
    raise MXNetError(f"custom operator {op.op_type!r}: its forward and backward are host code without derivatives "
                     "(an MXNet custom operator gives first-order gradients only), so a gradient of its gradient "
                     "(create_graph=True, jax.grad of jax.grad, jax.jvp) cannot be taken through it")


class _Call(Function):
    """One call of a bound custom operator: forward and backward are host callbacks."""

    def __init__(self, op: Bound, is_train: bool):
        super().__init__()
        self.op, self.is_train = op, is_train

    def forward(self, *inputs: Any) -> tuple:
        op = self.op
        outs = _callback(op, self.is_train, *inputs)
        n_out, n_args = len(op.outputs), len(op.arguments)
        blobs = [None] * n_out + list(inputs[:n_args]) + list(outs)
        self.save_for_backward([blobs[i] for i in op.deps if i >= n_out], list(inputs[n_args:]))
        return tuple(outs)

    def backward(self, *out_grads: Any) -> tuple:
        op = self.op
        saved, aux = self.saved_tensors
        n_out = len(op.outputs)
        needed = [out_grads[i] for i in op.deps if i < n_out] + list(saved) + list(aux)
        grads = _callback(op, None, *needed)
        return tuple(grads) + (None,) * len(op.aux)


class Kernel:
    """What the operator table runs for a registered op_type (:class:`hybrid.gluon1.ops.custom.CustomKernel`)."""

    def __init__(self, op_type: str, prop_cls: type):
        self.op_type, self.prop_cls = op_type, prop_cls

    def input_names(self, attrs: dict[str, str]) -> list[str]:
        prop = prop_of(self.op_type, self.prop_cls, attrs)
        return list(prop.list_arguments()) + list(prop.list_auxiliary_states())

    def num_outputs(self, attrs: dict[str, str]) -> int:
        return len(prop_of(self.op_type, self.prop_cls, attrs).list_outputs())

    def __call__(self, inputs: list, attrs: dict[str, str], training: bool) -> list:
        arrays = [x if isinstance(x, jax.Array) else jnp.asarray(x) for x in inputs]
        return list(_Call(bound(self.op_type, self.prop_cls, attrs, arrays), training)(*arrays))
