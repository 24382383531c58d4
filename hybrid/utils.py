"""Gluon's utilities: splitting a batch across devices, clipping gradients by their global norm."""
from __future__ import annotations

import math
import warnings
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh

from .distributed.placement import shard_batch
from .parameter import Parameter, unique_params

__all__ = ["split_data", "split_and_load", "clip_global_norm"]


def split_data(data: Any, num_slice: int, batch_axis: int = 0, even_split: bool = True) -> list:
    """Splits ``data`` along ``batch_axis`` into ``num_slice`` consecutive slices, as MXNet does.

    With ``even_split=False`` the sizes follow ``np.array_split``: the first
    ``size % num_slice`` slices get one extra element (10 into 4 gives 3, 3, 2, 2), and a
    batch smaller than ``num_slice`` gives trailing empty slices; the result always has
    ``num_slice`` entries. Slices keep the input's array type (NumPy or JAX). Raises
    ValueError when ``even_split`` is true and the batch size is not a multiple of ``num_slice``.
    """
    if not isinstance(data, (np.ndarray, jax.Array)):
        data = np.asarray(data)
    if not isinstance(num_slice, (int, np.integer)) or num_slice < 1:
        raise ValueError(f"split_data: num_slice must be a positive integer, got {num_slice!r}")
    if data.ndim == 0:
        raise ValueError("split_data: cannot split a scalar; data needs a batch axis")
    axis = batch_axis % data.ndim
    size = data.shape[axis]
    if even_split and size % num_slice:
        raise ValueError(f"split_data: data of shape {data.shape} cannot be split evenly into {num_slice} slices "
                         f"along axis {batch_axis} ({size} is not a multiple of {num_slice}); use a batch size "
                         f"that is a multiple of {num_slice} or even_split=False")
    each, extras = divmod(size, int(num_slice))
    bounds = [0]
    for i in range(int(num_slice)):
        bounds.append(bounds[-1] + each + (1 if i < extras else 0))
    prefix = (slice(None),) * axis
    return [data[prefix + (slice(start, stop),)] for start, stop in zip(bounds[:-1], bounds[1:])]


def split_and_load(data: Any, ctx_list: Sequence[jax.Device] | jax.Device | Mesh | None = None,
                   batch_axis: int = 0, even_split: bool = True,
                   devices: Sequence[jax.Device] | jax.Device | Mesh | None = None) -> list:
    """Splits ``data`` along ``batch_axis`` and puts slice ``i`` on device ``i``.

    ``ctx_list`` (or its alias ``devices``) is a list of ``jax.Device`` (e.g.
    ``jax.devices()``). With one device the whole batch is returned as a one-element
    list. Returns a list of JAX arrays; raises ValueError as ``split_data`` does and
    when no device is given.

    Given a ``Mesh`` (e.g. ``trainer.mesh``), returns a one-element list: the whole batch
    as one array split over the mesh's ``'data'`` axis (see
    ``hybrid.distributed.shard_batch``; an uneven split raises ValueError whatever
    ``even_split`` says). A Gluon loop over the list then runs once, and XLA spreads
    that one call over the devices and sums the gradients.
    """
    if ctx_list is not None and devices is not None:
        raise ValueError("split_and_load: give ctx_list or devices, not both")
    chosen = ctx_list if ctx_list is not None else devices
    if isinstance(chosen, Mesh):
        return [shard_batch(data, chosen, batch_axis=batch_axis)]
    if isinstance(chosen, jax.Device):
        chosen = [chosen]
    if not chosen or not all(isinstance(d, jax.Device) for d in chosen):
        raise ValueError(f"split_and_load: ctx_list must be a non-empty list of jax.Device (e.g. jax.devices()) "
                         f"or a Mesh, got {chosen!r}")
    if len(chosen) == 1:
        return [jax.device_put(data, chosen[0])]
    slices = split_data(data, len(chosen), batch_axis, even_split)
    return [jax.device_put(part, device) for part, device in zip(slices, chosen)]


@jax.jit
def _clip(arrays: tuple, max_norm: jax.Array) -> tuple[list, jax.Array]:
    total = jnp.sqrt(sum(jnp.sum(jnp.square(a.astype(jnp.float32))) for a in arrays))
    factor = jnp.minimum(max_norm / (total + 1e-8), 1.0)
    return [(a * factor).astype(a.dtype) for a in arrays], total


def clip_global_norm(arrays: Any, max_norm: float, check_isfinite: bool = True) -> Any:
    """Rescales arrays so that the L2 norm of all of them together is at most ``max_norm``.

    Each array is multiplied by ``min(1, max_norm / (total_norm + 1e-8))``, where
    ``total_norm = sqrt(sum of squares of every element of every array)``.

    - ``arrays`` of Parameters (a list, or a dict such as ``net.collect_params()``):
      their gradients are rescaled in place (those with ``grad_req='null'`` are
      skipped) and the total norm is returned, as in Gluon.
    - ``arrays`` of NumPy/JAX arrays (immutable in JAX): returns
      ``(clipped_arrays, total_norm)``.

    The norm is a Python float when ``check_isfinite`` is true (a UserWarning is
    issued if it is NaN or infinite), else a JAX scalar (no device sync).
    Raises TypeError for a mix of Parameters and arrays, ValueError for an empty
    input or a non-positive ``max_norm``.
    """
    items = list(arrays.values()) if isinstance(arrays, dict) else arrays
    if not isinstance(items, (list, tuple)):
        raise TypeError(f"clip_global_norm: expects a list of arrays or Parameters, got {type(arrays).__name__}")
    kinds = {isinstance(item, Parameter) for item in items}
    if len(kinds) > 1:
        raise TypeError("clip_global_norm: got a mix of Parameters and arrays; pass one kind")
    params = [p for p in unique_params(items) if p.grad_req != "null"] if kinds == {True} else None
    grads = [p.grad() for p in params] if params is not None else [jnp.asarray(a) for a in items]
    if not grads:
        raise ValueError("clip_global_norm: got no arrays (or no Parameters with gradients)")
    if not isinstance(max_norm, (int, float, np.number)) or not max_norm > 0:
        raise ValueError(f"clip_global_norm: max_norm must be a positive number, got {max_norm!r}")
    clipped, norm = _clip(tuple(grads), jnp.float32(max_norm))
    if check_isfinite:
        norm = float(norm)
        if not math.isfinite(norm):
            warnings.warn("clip_global_norm: the total norm is NaN or infinite; the clipped values are undefined",
                          UserWarning, stacklevel=2)
    if params is None:
        return clipped, norm
    for param, grad in zip(params, clipped):
        param.grad_state.set(grad, param.grad_state.fresh)  # JAX arrays are immutable: replace the gradient
    return norm
