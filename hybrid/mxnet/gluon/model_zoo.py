"""``mxnet.gluon.model_zoo``: ``vision`` is hybrid's model zoo (``hybrid.model_zoo``), without pretrained
weights, whose builders also take MXNet contexts (``ctx=mx.cpu()``, ``ctx=[mx.gpu(0)]``) where
``hybrid.model_zoo`` takes JAX devices."""
from __future__ import annotations

import functools
import inspect
import types
from typing import Any

from ... import model_zoo as _zoo
from ..context import Context, to_device

__all__ = ["vision", "get_model"]


def _devices(value: Any) -> Any:
    if isinstance(value, Context) or (isinstance(value, (list, tuple)) and any(isinstance(v, Context) for v in value)):
        return to_device(value)
    return value


def _taking_contexts(builder: Any) -> Any:
    @functools.wraps(builder)
    def build(*args: Any, **kwargs: Any) -> Any:
        for keyword in ("ctx", "device"):
            if keyword in kwargs:
                kwargs[keyword] = _devices(kwargs[keyword])
        return builder(*args, **kwargs)
    return build


class _Vision(types.ModuleType):
    """``hybrid.model_zoo`` with its functions (``get_model``, ``resnet18_v1``, ...) taking contexts."""

    def __getattr__(self, name: str) -> Any:
        value = getattr(_zoo, name)
        if inspect.isfunction(value):
            value = _taking_contexts(value)
            setattr(self, name, value)
        return value

    def __dir__(self) -> list[str]:
        return dir(_zoo)


vision = _Vision(f"{__name__}.vision", _zoo.__doc__)
get_model = vision.get_model
