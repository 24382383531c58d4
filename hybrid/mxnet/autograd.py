"""``mxnet.autograd``: hybrid's scopes and backward engine (``hybrid.autograd``) on the alias's handles.

``backward`` and ``grad`` take handles (or arrays) as heads, head gradients and variables; ``grad`` returns
handles. ``mark_variables`` attaches gradients as ``x.attach_grad()`` does, and makes the given handles the
variables' gradient buffers.
"""
from __future__ import annotations

from typing import Any

from .. import autograd as _autograd
from ..autograd import (Function, is_recording, is_training, pause, predict_mode, record, set_recording,
                        set_training, train_mode)
from .handle import NDArray, _ParamData, _ParamGrad, unwrap, wrap

__all__ = ["record", "pause", "train_mode", "predict_mode", "is_recording", "is_training", "set_recording",
           "set_training", "backward", "grad", "mark_variables", "get_symbol", "Function"]


def _listed(x: Any) -> list:
    return list(x) if isinstance(x, (list, tuple)) else [x]


def backward(heads: Any, head_grads: Any = None, retain_graph: bool = False, train_mode: bool = True) -> None:
    """Write the gradients of ``heads`` (handles computed inside ``record()``) into the attached arrays and
    parameters they depend on; ``head_grads`` are the heads' cotangents (default ones)."""
    _autograd.backward(unwrap(heads), unwrap(head_grads), retain_graph=retain_graph, train_mode=train_mode)


def grad(heads: Any, variables: Any, head_grads: Any = None, retain_graph: bool | None = None,
         create_graph: bool = False, train_mode: bool = True) -> Any:
    """The gradients of ``heads`` with respect to ``variables`` (handles or arrays used inside ``record()``),
    as handles: one, or a list matching ``variables``."""
    cls = type(variables[0] if isinstance(variables, (list, tuple)) and variables else variables)
    cls = cls if issubclass(cls, NDArray) else NDArray
    grads = _autograd.grad(unwrap(heads), unwrap(variables), head_grads=unwrap(head_grads),
                           retain_graph=retain_graph, create_graph=create_graph, train_mode=train_mode)
    return wrap(grads, cls)


def mark_variables(variables: Any, gradients: Any, grad_reqs: Any = "write") -> None:
    """Attach gradients to ``variables`` (handles) whose buffers are the handles ``gradients``: after
    ``backward()``, ``gradients[i]`` holds the gradient of ``variables[i]``."""
    variables, gradients = _listed(variables), _listed(gradients)
    reqs = _listed(grad_reqs) if isinstance(grad_reqs, (list, tuple)) else [grad_reqs] * len(variables)
    if not (len(variables) == len(gradients) == len(reqs)):
        raise ValueError(f"autograd.mark_variables: {len(variables)} variables, {len(gradients)} gradients and "
                         f"{len(reqs)} grad_reqs; give one of each per variable")
    for i, (variable, gradient, req) in enumerate(zip(variables, gradients, reqs)):
        if not isinstance(variable, NDArray) or not isinstance(gradient, NDArray):
            raise TypeError(f"autograd.mark_variables: variable {i} and its gradient must be NDArrays, got "
                            f"{type(variable).__name__} and {type(gradient).__name__}")
        initial = gradient.value
        variable.attach_grad(req)
        source = variable._source
        assert type(source) is _ParamData
        gradient._source, gradient._value = _ParamGrad(source.param), None
        gradient._assign(initial)


def get_symbol(*args: Any, **kwargs: Any) -> Any:
    """Not available: the recorder keeps no Symbol; ``hybrid.inspect(net, x)`` shows a hybridized graph."""
    raise NotImplementedError("autograd.get_symbol: hybrid records no Symbol; use hybrid.inspect(net, x) to see a "
                              "hybridized graph")
