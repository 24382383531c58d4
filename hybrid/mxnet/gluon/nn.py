"""``mxnet.gluon.nn``: hybrid's layers (``hybrid.nn``) with Gluon 1.x's names, plus ``SymbolBlock``.

``Lambda`` and ``HybridLambda`` follow Gluon 1.x: ``HybridLambda``'s function is called as
``function(F, x, *args)`` with ``F`` MXNet's operator namespace, and a function given by name is MXNet's
operator of that name (``nd.<name>`` for ``Lambda``, ``F.<name>`` for ``HybridLambda``). The modules
``basic_layers``, ``conv_layers`` and ``activations`` are hybrid's, where the layers are defined."""
from __future__ import annotations

from typing import Any, Callable

from ... import nn as _nn
from ...nn import *  # noqa: F401,F403
from ...nn import __all__ as _layers
from ...nn import activations, basic_layers, conv_layers  # noqa: F401
from .block import SymbolBlock  # noqa: F401

__all__ = list(_layers) + ["SymbolBlock"]


def _check(layer: str, function: Any) -> None:
    if not (callable(function) or isinstance(function, str)):
        raise ValueError(f"{layer}: unrecognized function {function!r}: pass a callable or the name of an "
                         "MXNet operator")


class Lambda(_nn.Block):
    """``Lambda(function, prefix=None)``: a Block calling ``function(*args)``; a name is the ``mx.nd``
    operator of that name (``Lambda('tanh')``)."""

    def __init__(self, function: Callable | str, prefix: str | None = None):
        super().__init__(prefix=prefix)
        _check("Lambda", function)
        if isinstance(function, str):
            from .. import ndarray
            if not hasattr(ndarray, function):
                raise ValueError(f"Lambda: mx.nd has no operator {function!r}")
            function = getattr(ndarray, function)
        self._func_impl = function

    def forward(self, *args: Any) -> Any:
        return self._func_impl(*args)

    def __repr__(self) -> str:
        return f"Lambda({getattr(self._func_impl, '__name__', self._func_impl)})"


class HybridLambda(_nn.HybridBlock):
    """``HybridLambda(function, prefix=None)``: a HybridBlock calling ``function(F, x, *args)`` (Gluon 1.x's
    ``lambda F, x: F.relu(x)``); a name is the operator ``F.<name>`` (``HybridLambda('tanh')``)."""

    def __init__(self, function: Callable | str, prefix: str | None = None):
        super().__init__(prefix=prefix)
        _check("HybridLambda", function)
        if isinstance(function, str):
            from ...gluon1.blocks import operators
            if not hasattr(operators(), function):
                raise ValueError(f"HybridLambda: MXNet has no operator {function!r}")
            name = function
            self._func_name = name
            self._func = lambda F, *args: getattr(F, name)(*args)
        else:
            self._func_name = getattr(function, "__name__", type(function).__name__)
            self._func = function

    def hybrid_forward(self, F: Any, x: Any, *args: Any) -> Any:
        return self._func(F, x, *args)

    def __repr__(self) -> str:
        return f"HybridLambda({self._func_name})"
