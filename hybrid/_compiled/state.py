"""The functional bridge: a network's state as a flat dict of arrays, and pure calls on it.

``net.state()`` gives ``{structural name: array}``: every parameter once (a shared one under its first
name), running statistics included, and the public array attributes of the blocks (state a ``forward``
keeps in ``self.name = ...``, under ``'path.name'``). ``net.apply(state, *inputs)`` runs the network as a
pure function of that dict and returns ``(outputs, new_state)``; nothing in the blocks changes, so it can
run inside ``jax.jit``, ``grad``, ``vmap``, ``lax.scan``... ``net.load_state(new_state)`` writes a state
back. ``save_state``/``load_state(path)`` store it in a ``.safetensors`` or ``.npz`` file.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .._core import context as _context, functional as _functional, lazy as _lazy
from ..errors import ShapeError

__all__ = ["state_of", "apply_state", "load_state", "save_state_file", "load_state_file"]

_ARRAYS = (jax.Array, np.ndarray)


def _slots(net: Any) -> tuple[dict, dict]:
    """``({name: Parameter}, {name: (block, attribute)})`` of ``net``'s state, in structural order."""
    params: dict = {}
    seen: set = set()
    for name, param in net.collect_params().items():
        if id(param) not in seen:
            seen.add(id(param))
            params[name] = param
    attributes: dict = {}

    def walk(block: Any, prefix: str) -> None:
        for attr, value in vars(block).items():
            if not attr.startswith("_") and isinstance(value, _ARRAYS):
                attributes[prefix + attr] = (block, attr)
        for child_name, child in block._children.items():
            walk(child, f"{prefix}{child_name}.")

    walk(net, "")
    return params, attributes


def state_of(net: Any) -> dict[str, Any]:
    """``net.state()``: see :meth:`hybrid.Block.state`."""
    params, attributes = _slots(net)
    state = {}
    for name, param in params.items():
        state[name] = _lazy.concrete(param.own_data) if param.is_initialized else param.data()  # data() raises
    for name, (block, attr) in attributes.items():
        state[name] = _lazy.concrete(getattr(block, attr))
    return state


def _where(net: Any, method: str) -> str:
    return f"{type(net).__name__}.{method}"


def _check_keys(net: Any, method: str, state: Mapping, params: dict, attributes: dict) -> None:
    if not isinstance(state, Mapping):
        raise TypeError(f"{_where(net, method)}: state must be a dict {{structural name: array}} as "
                        f"returned by state(), got {type(state).__name__}")
    expected = set(params) | set(attributes)
    missing = [n for n in list(params) + list(attributes) if n not in state]
    extra = [n for n in state if n not in expected]
    if missing or extra:
        raise ValueError(f"{_where(net, method)}: the state does not fit the network: missing {missing}, "
                         f"unexpected {extra} (use the dict returned by state())")


def _check_shapes(net: Any, method: str, state: Mapping, params: dict) -> None:
    for name, param in params.items():
        shape = tuple(np.shape(state[name]))
        if param.shape is not None and shape != tuple(param.shape):
            raise ShapeError(f"{_where(net, method)}: state[{name!r}] has shape {shape}, the parameter "
                             f"has {tuple(param.shape)}")


def apply_state(net: Any, state: Mapping, inputs: tuple, kwargs: dict, training: bool, key: Any) -> tuple:
    """``net.apply(state, ...)``: see :meth:`hybrid.Block.apply`."""
    params, attributes = _slots(net)
    _check_keys(net, "apply", state, params, attributes)
    _check_shapes(net, "apply", state, params)
    values = {param: state[name] for name, param in params.items()}
    with _context.scope(training=bool(training)), \
            _functional.frame(values, key=key, frame_type=_functional.ApplyFrame) as frame:
        frame.set_attributes({slot: state[name] for name, slot in attributes.items()})
        try:
            out = net(*inputs, **kwargs)
        finally:
            frame.restore_attributes()
    new_state = dict(state)
    for name, param in params.items():
        if param in frame.updates:
            new_state[name] = jnp.asarray(frame.updates[param], param.dtype)
    for name, slot in attributes.items():  # attributes first assigned by forward are not state: dropped
        if slot in frame.attributes:
            new_state[name] = frame.attributes[slot]
    return out, new_state


def load_state(net: Any, state: Mapping) -> None:
    """``net.load_state(state)``: see :meth:`hybrid.Block.load_state`."""
    params, attributes = _slots(net)
    _check_keys(net, "load_state", state, params, attributes)
    _check_shapes(net, "load_state", state, params)
    leaves = jax.tree_util.tree_leaves(dict(state))
    if any(isinstance(leaf, jax.core.Tracer) and not isinstance(leaf, _lazy.LazyArray) for leaf in leaves):
        raise _functional.refusal(f"{_where(net, 'load_state')} would store the state's tracers in the network")
    arrays = {name: jnp.asarray(state[name], params[name].dtype) for name in params}
    for name, param in params.items():
        param.assign_data(arrays[name])
    for name, (block, attr) in attributes.items():
        object.__setattr__(block, attr, state[name])


def save_state_file(net: Any, path: str | os.PathLike) -> None:
    """``net.save_state(path)``: the state as ``.safetensors`` (by the extension) or ``.npz``, atomically."""
    from ..formats.params_file import save_parameter_arrays
    save_parameter_arrays(path, {name: np.asarray(value) for name, value in state_of(net).items()}, "npz")


def load_state_file(net: Any, path: str | os.PathLike) -> None:
    """``net.load_state(path)``: a file written by ``save_state``, checked before anything changes."""
    from ..formats.params_file import load_parameter_file
    arrays = load_parameter_file(path)
    try:
        load_state(net, arrays)
    except (ValueError, TypeError) as exc:
        raise type(exc)(f"{os.fspath(path)}: {exc}") from exc
