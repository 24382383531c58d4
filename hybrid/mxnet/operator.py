"""``mxnet.operator``: custom-operator classes can be defined and registered, so model files that declare
them import; running one (``F.Custom(op_type=...)``) is not supported: write the computation with ``F``/
``jax.numpy`` in a HybridBlock, and a custom gradient with ``jax.custom_vjp`` (or ``autograd.Function``)."""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["CustomOp", "CustomOpProp", "register", "get_all_registered_operators", "REGISTERED"]

REGISTERED: dict[str, type] = {}

_UNSUPPORTED = ("MXNet custom operators (mx.operator.CustomOp) do not run in hybrid: write the computation with "
                "F / jax.numpy in a HybridBlock, and a custom gradient with jax.custom_vjp or autograd.Function")


class CustomOp:
    """Base class of MXNet custom operators; ``forward``/``backward`` never run here."""

    def __init__(self, *args: Any, **kwargs: Any):
        pass

    def forward(self, is_train: bool, req: Any, in_data: Any, out_data: Any, aux: Any) -> None:
        raise NotImplementedError(_UNSUPPORTED)

    def backward(self, req: Any, out_grad: Any, in_data: Any, out_data: Any, in_grad: Any, aux: Any) -> None:
        raise NotImplementedError(_UNSUPPORTED)

    def assign(self, dst: Any, req: str, src: Any) -> None:
        raise NotImplementedError(_UNSUPPORTED)


class CustomOpProp:
    """Base class of MXNet custom-operator properties (kept so that declarations import)."""

    def __init__(self, need_top_grad: bool = True):
        self.need_top_grad_ = need_top_grad

    def list_arguments(self) -> list[str]:
        return ["data"]

    def list_outputs(self) -> list[str]:
        return ["output"]

    def list_auxiliary_states(self) -> list[str]:
        return []

    def infer_shape(self, in_shape: list) -> tuple:
        return in_shape, (in_shape[0],) * len(self.list_outputs()), ()

    def create_operator(self, ctx: Any, in_shapes: Any, in_dtypes: Any) -> CustomOp:
        raise NotImplementedError(_UNSUPPORTED)


def register(reg_name: str) -> Callable[[type], type]:
    """Record a ``CustomOpProp`` subclass under ``reg_name`` (declaration only; see the module docstring)."""
    def decorate(prop_cls: type) -> type:
        REGISTERED[reg_name] = prop_cls
        return prop_cls
    return decorate


def get_all_registered_operators() -> list[str]:
    """Names given to :func:`register`."""
    return list(REGISTERED)
