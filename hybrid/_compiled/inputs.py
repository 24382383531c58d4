"""Foreign inputs of a block call made into JAX arrays: PyTorch tensors, Python lists of numbers, and
handle types registered by a layer above (the MXNet alias's mutable NDArray).

``Block.__call__`` asks :func:`needs_conversion` (a set lookup per input, so JAX and NumPy inputs cost
almost nothing) and, when it says yes, replaces the inputs by :func:`convert_inputs`'s. Tensors and lists
are converted at the top-level call only; handles at every call, and a call given a handle returns its
outputs wrapped by the handle type's ``wrap``.
"""
from __future__ import annotations

import sys
from typing import Any, Callable

import jax.numpy as jnp
import numpy as np

__all__ = ["needs_conversion", "convert_inputs", "from_torch", "register_handle"]

_NUMBERS = (bool, int, float, complex, np.number, np.bool_)
# Types that pass unchanged. convert_inputs adds every other type it leaves alone (JAX's array types among
# them), so that the next call with it takes the fast path. Lists, tuples and dicts never enter: what they
# hold decides.
_PASS: set[type] = {np.ndarray, bool, int, float, complex, str, type(None)}
_CONTAINERS = (list, tuple, dict)
# handle type -> (its value, the outputs of a call given one, wrapped)
_HANDLES: dict[type, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {}


def register_handle(cls: type, unwrap: Callable[[Any], Any], wrap: Callable[[Any], Any]) -> None:
    """Blocks called with instances of ``cls`` (or its subclasses: register each) see ``unwrap(x)``, and
    the call returns ``wrap(outputs)``."""
    _PASS.discard(cls)
    _HANDLES[cls] = (unwrap, wrap)


def needs_conversion(args: tuple, kwargs: dict) -> bool:
    """Whether an input may need converting (a type not known to pass unchanged)."""
    passing = _PASS
    for arg in args:
        if type(arg) not in passing:
            return True
    if kwargs:
        for value in kwargs.values():
            if type(value) not in passing:
                return True
    return False


def _torch_tensor_type() -> Any:
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    return getattr(torch, "Tensor", None)


def from_torch(tensor: Any) -> Any:
    """A JAX array with a copy of ``tensor``'s values (detached from autograd, moved to the CPU first).

    The values are copied, not shared through DLPack: a JAX array is immutable, and PyTorch may still write
    into the tensor's memory. bfloat16 passes exactly through float32; int64 becomes JAX's default integer
    type (int32 unless x64 is enabled), as for NumPy inputs.
    """
    import torch
    values = tensor.detach()
    if values.device.type != "cpu":
        values = values.cpu()
    if values.dtype == torch.bfloat16:
        return jnp.asarray(values.float().numpy()).astype(jnp.bfloat16)
    return jnp.asarray(values.resolve_conj().resolve_neg().numpy())


def _is_number_list(value: Any) -> bool:
    """Whether ``value`` is a non-empty list (or nested lists and tuples) of numbers only."""
    if not isinstance(value, (list, tuple)) or not value:
        return False
    return all(isinstance(v, _NUMBERS) or _is_number_list(v) for v in value)


def _convert(block: Any, where: str, value: Any, tensor_type: Any, lists: bool, found: list) -> Any:
    kind = type(value)
    if kind in _PASS:
        return value
    handle = _HANDLES.get(kind)
    if handle is not None:
        found.append(handle[1])
        return handle[0](value)
    if tensor_type is not None and isinstance(value, tensor_type):
        try:
            return from_torch(value)
        except (TypeError, RuntimeError) as exc:
            raise TypeError(f"{type(block).__name__}: {where} is a PyTorch tensor of dtype {value.dtype} on "
                            f"{value.device} that cannot become a JAX array ({exc})") from exc
    if kind is list and lists and _is_number_list(value):
        try:
            return jnp.asarray(np.asarray(value))
        except ValueError as exc:
            raise TypeError(f"{type(block).__name__}: {where} is a list of numbers that is not rectangular "
                            f"({exc}); give an array or a list of lists of equal lengths") from exc
    if kind in _CONTAINERS:
        if kind is dict:
            return {k: _convert(block, f"{where}[{k!r}]", v, tensor_type, False, found) for k, v in value.items()}
        items = [_convert(block, f"{where}[{i}]", v, tensor_type, False, found) for i, v in enumerate(value)]
        if all(a is b for a, b in zip(items, value)):
            return value  # nothing converted: the caller's own list
        return items if kind is list else tuple(items)
    _PASS.add(kind)
    return value


def convert_inputs(block: Any, args: tuple, kwargs: dict, top: bool = True) -> tuple[tuple, dict, Any]:
    """``args`` and ``kwargs`` with every registered handle (also inside lists, tuples and dicts) replaced by
    its value, and at the top-level call (``top``) every PyTorch tensor made a JAX array and every
    positional input that is a list of numbers made an array (``np.asarray`` rules: ``[1, 2]`` is int32,
    ``[1.0, 2]`` float32). Lists holding arrays (recurrent states) stay lists, tuples stay tuples, keyword
    lists stay lists; everything else is returned as it is. The third result wraps the call's outputs
    (when a handle was given) or is None.

    Raises TypeError naming ``block`` and the input for a list of numbers that is not rectangular and for
    a tensor that cannot be converted.
    """
    tensor_type = _torch_tensor_type() if top else None
    found: list = []
    args = tuple(_convert(block, f"input {i}", a, tensor_type, top, found) for i, a in enumerate(args))
    if kwargs:
        kwargs = {k: _convert(block, f"input {k!r}", v, tensor_type, False, found) for k, v in kwargs.items()}
    return args, kwargs, found[0] if found else None
