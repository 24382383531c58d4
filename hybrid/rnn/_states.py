"""Recurrent states: checking the states a layer or cell is given, and making the initial ones."""
from __future__ import annotations

from typing import Any, Callable

import jax
import numpy as np

from ..errors import ShapeError

__all__ = ["check_states", "initial_states"]


def check_states(states: Any, infos: list[dict]) -> list:
    """``states`` as a list matching ``infos`` (a single array is accepted for one state); ShapeError otherwise."""
    if isinstance(states, (jax.Array, np.ndarray)):
        states = [states]
    states = list(states)
    expected = [tuple(info["shape"]) for info in infos]
    got = [tuple(getattr(s, "shape", ())) for s in states]
    if got != expected:
        raise ShapeError(f"invalid recurrent states: expected {len(expected)} state(s) of shape(s) {expected}, "
                         f"got {got}")
    return states


def initial_states(who: str, infos: list[dict], func: Callable, ctx: Any, device: Any, kwargs: dict) -> list:
    """``func(shape, **kwargs)`` per state info, placed on ``ctx``/``device`` (aliases) when one is given."""
    if ctx is not None and device is not None:
        raise ValueError(f"{who}.begin_state: give ctx or device, not both")
    device = ctx if device is None else device
    device = getattr(device, "jax_device", device)  # an MXNet Context (hybrid.mxnet) names its JAX device
    if device is not None and not isinstance(device, jax.Device):
        raise TypeError(f"{who}.begin_state: ctx/device must be a jax.Device (e.g. jax.devices()[0]), "
                        f"got {type(device).__name__}")
    states = [func(info["shape"], **kwargs) for info in infos]
    return [jax.device_put(s, device) for s in states] if device is not None else states
