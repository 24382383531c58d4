"""``mxnet.operator``: MXNet's Python custom operators.

Subclass :class:`CustomOpProp` (the operator's inputs, outputs, shapes and types) and :class:`CustomOp`
(its ``forward`` and ``backward`` on NDArrays), register the property with ``@register('name')``, and call
it as ``F.Custom(*inputs, op_type='name', **attrs)`` (``nd.Custom``, in ``hybrid_forward``, and in
symbol files). The property is constructed with the attributes as strings, as MXNet passes them.

``forward`` and ``backward`` run as host code (:mod:`hybrid.mxnet._custom_op`): eagerly, inside
``autograd.record()``, and in hybridized or compiled programs through ``jax.pure_callback``.
"""
from __future__ import annotations

from typing import Any, Callable

from ..gluon1.ops.custom import CUSTOM_KERNELS
from ._custom_op import Kernel

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators", "REGISTERED"]

REGISTERED: dict[str, type] = {}


class CustomOp:
    """Base class of MXNet custom operators: override ``forward`` and ``backward``, and write results with
    :meth:`assign`."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def forward(self, is_train: bool, req: list[str], in_data: list, out_data: list, aux: list) -> None:
        """Write the outputs ``out_data`` (NDArrays of the shapes ``infer_shape`` gave) from ``in_data``."""

    def backward(self, req: list[str], out_grad: list, in_data: list, out_data: list, in_grad: list,
                 aux: list) -> None:
        """Write the input gradients ``in_grad``; entries of ``out_grad``/``in_data``/``out_data`` that
        ``declare_backward_dependency`` left out are None."""

    def assign(self, dst: Any, req: str, src: Any) -> None:
        """Write ``src`` into ``dst`` as ``req`` says: 'write'/'inplace' replace, 'add' adds, 'null' skips."""
        from .numpy_extension import is_np_array
        if req == "null":
            return
        index: Any = () if is_np_array() else slice(None)
        if req in ("write", "inplace"):
            dst[index] = src
        elif req == "add":
            dst[index] = dst[index] + src
        else:
            raise ValueError(f"CustomOp.assign: req must be 'null', 'write', 'inplace' or 'add', got {req!r}")


class CustomOpProp:
    """Base class of MXNet custom-operator properties: the defaults are one input ``data``, one output
    ``output`` of its shape and dtype, no auxiliary states, and a backward that needs every input, output
    and (when ``need_top_grad``) output gradient."""

    def __init__(self, need_top_grad: bool = True):
        self.need_top_grad_ = need_top_grad

    def list_arguments(self) -> list[str]:
        return ["data"]

    def list_outputs(self) -> list[str]:
        return ["output"]

    def list_auxiliary_states(self) -> list[str]:
        return []

    def infer_shape(self, in_shape: list) -> tuple:
        """(input shapes, output shapes[, auxiliary state shapes]) from the input shapes (lists)."""
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def infer_type(self, in_type: list) -> tuple:
        """(input dtypes, output dtypes[, auxiliary state dtypes]) from the input dtypes."""
        return in_type, [in_type[0]] * len(self.list_outputs()), [in_type[0]] * len(self.list_auxiliary_states())

    def infer_storage_type(self, in_stype: list) -> tuple:
        return in_stype, ["default"] * len(self.list_outputs()), ["default"] * len(self.list_auxiliary_states())

    def declare_backward_dependency(self, out_grad: list, in_data: list, out_data: list) -> list:
        """The ids (from the three lists) of the arrays backward reads."""
        deps = list(out_grad) if self.need_top_grad_ else []
        return deps + list(in_data) + list(out_data)

    def create_operator(self, ctx: Any, in_shapes: list, in_dtypes: list) -> CustomOp:
        """The :class:`CustomOp` for inputs of these shapes (lists) and MXNet type codes (0 is float32)."""
        return CustomOp()


def register(reg_name: str) -> Callable[[type], type]:
    """Register a ``CustomOpProp`` subclass as the custom operator ``reg_name`` (``op_type=reg_name``)."""
    def decorate(prop_cls: type) -> type:
        REGISTERED[reg_name] = prop_cls
        CUSTOM_KERNELS[reg_name] = Kernel(reg_name, prop_cls)
        return prop_cls
    return decorate


def get_all_registered_operators() -> list[str]:
    """Names given to :func:`register`."""
    return list(REGISTERED)
