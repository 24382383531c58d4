"""Indexing operators: take, pick, batch_take, gather_nd, scatter_nd, one_hot, where.

Float index arrays are accepted (MXNet's indices are usually float32) and truncated to integers.
"""
from __future__ import annotations

import jax.numpy as jnp

from ...graph import layer_ops
from ._registry import Attrs, OpContext, register
from ._util import axis as _axis


def _int(index):
    return index if jnp.issubdtype(index.dtype, jnp.integer) else index.astype(jnp.int32)


@register("take", inputs=("a", "indices"))
def take(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Slices of ``a`` at ``indices`` along ``axis``: shape ``a.shape[:axis] + indices.shape +
    a.shape[axis+1:]``; out-of-range indices are clipped (``mode='clip'``, also for 'raise') or wrapped."""
    x, index = ins[0], _int(ins[1])
    axis = _axis(a, x.ndim, "axis", 0)
    mode = a.str("mode", "clip", ("clip", "wrap", "raise"))
    size = x.shape[axis]
    index = jnp.mod(index, size) if mode == "wrap" else jnp.clip(index, 0, size - 1)
    return [jnp.take(x, index, axis=axis)]


@register("pick", inputs=("data", "index"))
def pick(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``data`` at ``index`` along ``axis`` (index has data's shape without that axis, or with it as 1)."""
    x, index = ins[0], ins[1]
    mode = a.str("mode", "clip", ("clip", "wrap"))
    if "axis" in a.raw and not a.has("axis"):  # axis=None: pick from the flattened input
        x, axis = x.reshape(-1), 0
        index = index.reshape(-1)[:1]
    else:
        axis = _axis(a, x.ndim, "axis", -1)
    if index.ndim == x.ndim:
        if index.shape[axis] != 1:
            raise a.fail(f"index of shape {tuple(index.shape)} must have size 1 on axis {axis}")
        index = jnp.squeeze(index, axis)
    expected = tuple(x.shape[:axis]) + tuple(x.shape[axis + 1:])
    if tuple(index.shape) != expected:
        raise a.fail(f"index shape {tuple(index.shape)} does not match data {tuple(x.shape)} without axis {axis} "
                     f"(expected {expected})")
    index, size = _int(index), x.shape[axis]
    index = jnp.mod(index, size) if mode == "wrap" else jnp.clip(index, 0, size - 1)
    y = layer_ops.pick(x, index, axis=axis)
    return [jnp.expand_dims(y, axis) if a.bool("keepdims", False) else y]


@register("batch_take", inputs=("a", "indices"))
def batch_take(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``a[i, indices[i]]`` for a 2-D ``a`` (indices clipped)."""
    x, index = ins[0], _int(ins[1])
    if x.ndim != 2:
        raise a.fail(f"a must be 2-D, got shape {tuple(x.shape)}")
    return [jnp.take_along_axis(x, jnp.clip(index.reshape(-1, 1), 0, x.shape[1] - 1), axis=1).reshape(index.shape)]


@register("gather_nd", inputs=("data", "indices"))
def gather_nd(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``indices`` of shape ``(M, *Y)`` pick ``data[i_0, ..., i_{M-1}]``: output ``Y + data.shape[M:]``."""
    x, index = ins[0], _int(ins[1])
    if index.ndim < 1 or index.shape[0] > x.ndim:
        raise a.fail(f"indices of shape {tuple(index.shape)} must have at most {x.ndim} rows (the data's axes)")
    return [x[tuple(index[i] for i in range(index.shape[0]))]]


@register("scatter_nd", inputs=("data", "indices"))
def scatter_nd(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The inverse of gather_nd: zeros of ``shape`` with ``data`` written at ``indices``."""
    values, index = ins[0], _int(ins[1])
    out = jnp.zeros(a.tuple("shape"), values.dtype)
    return [out.at[tuple(index[i] for i in range(index.shape[0]))].set(values)]


@register("one_hot", inputs=("indices",))
def one_hot(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Shape ``indices.shape + (depth,)``; out-of-range indices give rows of ``off_value``."""
    index = _int(ins[0])
    depth = a.int("depth")
    hot = index[..., None] == jnp.arange(depth)
    dtype = a.dtype("dtype", "float32")
    return [jnp.where(hot, jnp.asarray(a.float("on_value", 1.0), dtype), jnp.asarray(a.float("off_value", 0.0), dtype))]


@register("where", inputs=("condition", "x", "y"))
def where(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``x`` where ``condition`` is non-zero, else ``y``; a 1-D condition of x's first dimension selects whole
    rows."""
    cond, x, y = ins[0], ins[1], ins[2]
    if cond.ndim == 1 and x.ndim > 1 and cond.shape[0] == x.shape[0]:
        cond = cond.reshape((-1,) + (1,) * (x.ndim - 1))
    elif cond.shape != x.shape:
        raise a.fail(f"condition of shape {tuple(cond.shape)} must match x {tuple(x.shape)} or be a vector of its "
                     "first dimension")
    return [jnp.where(cond != 0, x, y)]


@register("_contrib_index_array")
def index_array(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Each element's index along ``axes`` (all by default), as int64/int32: shape ``x.shape + (len(axes),)``."""
    x = ins[0]
    axes = a.tuple("axes", ()) or tuple(range(x.ndim))
    grids = jnp.indices(x.shape)
    return [jnp.stack([grids[v % x.ndim] for v in axes], axis=-1)]
