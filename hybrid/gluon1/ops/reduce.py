"""Reductions (sum/mean/max/min/prod/nansum/nanprod/norm with ``axis``, ``keepdims``, ``exclude``),
arg-reductions, sorting (sort/argsort/topk) and matrix products (dot, batch_dot, linalg.gemm/gemm2).

As in MXNet, index outputs (argmax, argsort, topk indices) are float32 unless ``dtype`` says otherwise.
"""
from __future__ import annotations

from typing import Callable

import jax.numpy as jnp
from jax import lax

from ._registry import Attrs, OpContext, register
from ._util import axes as _axes, axis as _axis


def _at_least_1d(y):
    """MXNet has no 0-d arrays: a full reduction gives shape (1,)."""
    return y.reshape(1) if y.ndim == 0 else y


def _reduce_axes(a: Attrs, ndim: int) -> tuple[int, ...]:
    """``axis`` (all when absent or empty; ``exclude`` then changes nothing, as in MXNet)."""
    if a.axes("axis") is None:
        return tuple(range(ndim))
    return _axes(a, ndim)


def _reduction(fn: Callable) -> Callable:
    def run(ins: list, a: Attrs, ctx: OpContext) -> list:
        x = ins[0]
        return [_at_least_1d(fn(x, axis=_reduce_axes(a, x.ndim), keepdims=a.bool("keepdims", False)))]
    return run


_REDUCTIONS: dict[tuple[str, ...], Callable] = {
    ("sum", "sum_axis"): jnp.sum, ("mean",): jnp.mean, ("max", "max_axis"): jnp.max, ("min", "min_axis"): jnp.min,
    ("prod",): jnp.prod, ("nansum",): jnp.nansum, ("nanprod",): jnp.nanprod,
}
for _names, _fn in _REDUCTIONS.items():
    register(*_names, attr_order=("axis", "keepdims", "exclude"))(_reduction(_fn))


@register("norm")
def norm(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The L2 (``ord=2``) or L1 norm over ``axis`` (all axes, flattened, by default)."""
    x = ins[0]
    order = a.int("ord", 2)
    if order not in (1, 2):
        raise a.fail(f"ord={order} is not supported (1 or 2)")
    axes = _axes(a, x.ndim, exclude_key=None)
    keep = a.bool("keepdims", False)
    y = jnp.sum(jnp.abs(x), axis=axes, keepdims=keep) if order == 1 else \
        jnp.sqrt(jnp.sum(jnp.square(x), axis=axes, keepdims=keep))
    dtype = a.dtype("out_dtype", None)
    return [_at_least_1d(y if dtype is None else y.astype(dtype))]


def _index_dtype(a: Attrs, key: str = "dtype"):
    return a.dtype(key, "float32")


def _arg_reduction(fn: Callable) -> Callable:
    def run(ins: list, a: Attrs, ctx: OpContext) -> list:
        x = ins[0]
        axis = a.opt_int("axis")
        keep = a.bool("keepdims", False)
        if axis is None:
            y = fn(x.reshape(-1), axis=0)
            y = y.reshape((1,) * x.ndim) if keep else y.reshape(())
        else:
            y = fn(x, axis=_axis(a, x.ndim), keepdims=keep)
        return [_at_least_1d(y.astype(jnp.float32))]
    return run


register("argmax")(_arg_reduction(jnp.argmax))
register("argmin")(_arg_reduction(jnp.argmin))


@register("argmax_channel")
def argmax_channel(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.argmax(ins[0], axis=-1).astype(jnp.float32)]


def _sort_axis(a: Attrs, x) -> tuple:
    """(data, axis): ``axis=None`` sorts the flattened input."""
    if a.has("axis"):
        return x, _axis(a, x.ndim, "axis", -1)
    if "axis" in a.raw:  # given explicitly as None
        return x.reshape(-1), 0
    return x, x.ndim - 1 if x.ndim else 0


@register("sort")
def sort(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, axis = _sort_axis(a, ins[0])
    y = jnp.sort(x, axis=axis)
    return [y if a.bool("is_ascend", True) else jnp.flip(y, axis)]


def _descending_order(x, axis: int):
    """Indices sorting ``x`` descending along ``axis``, ties in index order (as a stable sort)."""
    return jnp.argsort(-x if jnp.issubdtype(x.dtype, jnp.floating) else ~x if jnp.issubdtype(
        x.dtype, jnp.integer) else -x.astype(jnp.float32), axis=axis, stable=True)


@register("argsort")
def argsort(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, axis = _sort_axis(a, ins[0])
    order = jnp.argsort(x, axis=axis, stable=True) if a.bool("is_ascend", True) else _descending_order(x, axis)
    return [order.astype(_index_dtype(a))]


def _topk_outputs(a: Attrs) -> int:
    return 2 if a.str("ret_typ", "indices", ("value", "indices", "mask", "both")) == "both" else 1


@register("topk", num_outputs=_topk_outputs)
def topk(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The ``k`` largest (``is_ascend``: smallest) entries along ``axis``: their values, indices (float32
    by default), both (``[values, indices]``) or a 0/1 ``mask`` shaped like the input."""
    x, axis = _sort_axis(a, ins[0])
    size = x.shape[axis]
    k = a.int("k", 1)
    k = size if k <= 0 or k > size else k
    kind = a.str("ret_typ", "indices", ("value", "indices", "mask", "both"))
    order = jnp.argsort(x, axis=axis, stable=True) if a.bool("is_ascend", False) else _descending_order(x, axis)
    indices = lax.slice_in_dim(order, 0, k, axis=axis)
    if kind == "mask":
        hits = jnp.zeros(x.shape, x.dtype)
        return [jnp.put_along_axis(hits, indices, jnp.ones((), x.dtype), axis=axis, inplace=False)]
    values = jnp.take_along_axis(x, indices, axis=axis)
    index_out = indices.astype(_index_dtype(a))
    return {"value": [values], "indices": [index_out], "both": [values, index_out]}[kind]


# -- products ----------------------------------------------------------------------------------------
@register("dot", inputs=("lhs", "rhs"))
def dot(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The last axis of ``lhs`` (its first with ``transpose_a``) times the first axis of ``rhs`` (its last
    with ``transpose_b``); the other axes keep their order: shape ``lhs_rest + rhs_rest``."""
    x, y = ins[0], ins[1]
    if a.bool("transpose_a", False):
        x = jnp.moveaxis(x, 0, -1)
    if a.bool("transpose_b", False):
        y = jnp.moveaxis(y, -1, 0)
    if x.shape[-1] != y.shape[0]:
        raise a.fail(f"cannot multiply lhs {tuple(x.shape)} by rhs {tuple(y.shape)} (after transposes)")
    return [_at_least_1d(jnp.tensordot(x, y, axes=1))]


@register("batch_dot", inputs=("lhs", "rhs"))
def batch_dot(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Matrix products over the last two axes, batched over the leading ones."""
    x, y = ins[0], ins[1]
    if x.ndim < 3 or x.ndim != y.ndim:
        raise a.fail(f"batch_dot needs two inputs with the same number (>= 3) of dimensions, got "
                     f"{tuple(x.shape)} and {tuple(y.shape)}")
    if a.bool("transpose_a", False):
        x = jnp.swapaxes(x, -1, -2)
    if a.bool("transpose_b", False):
        y = jnp.swapaxes(y, -1, -2)
    if x.shape[-1] != y.shape[-2] or x.shape[:-2] != y.shape[:-2]:
        raise a.fail(f"cannot batch-multiply {tuple(x.shape)} by {tuple(y.shape)} (after transposes)")
    return [jnp.matmul(x, y)]


def _gemm_product(x, y, a: Attrs):
    axis = a.int("axis", -2)
    if axis != -2:
        x, y = jnp.moveaxis(x, axis, -2), jnp.moveaxis(y, axis, -2)
    if a.bool("transpose_a", False):
        x = jnp.swapaxes(x, -1, -2)
    if a.bool("transpose_b", False):
        y = jnp.swapaxes(y, -1, -2)
    return a.float("alpha", 1.0) * jnp.matmul(x, y), axis


@register("_linalg_gemm2", "linalg_gemm2", inputs=("A", "B"))
def gemm2(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``alpha * op(A) @ op(B)`` over the last two axes (``axis`` names the row axis)."""
    out, axis = _gemm_product(ins[0], ins[1], a)
    return [out if axis == -2 else jnp.moveaxis(out, -2, axis)]


@register("_linalg_gemm", "linalg_gemm", inputs=("A", "B", "C"))
def gemm(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``alpha * op(A) @ op(B) + beta * C``."""
    out, axis = _gemm_product(ins[0], ins[1], a)
    out = out if axis == -2 else jnp.moveaxis(out, -2, axis)
    return [out + a.float("beta", 1.0) * ins[2]]


@register("_linalg_inverse", "linalg_inverse", inputs=("A",))
def inverse(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.linalg.inv(ins[0])]


@register("_linalg_det", "linalg_det", inputs=("A",))
def det(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [_at_least_1d(jnp.linalg.det(ins[0]))]


@register("_linalg_potrf", "linalg_potrf", inputs=("A",))
def potrf(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The lower Cholesky factor."""
    return [jnp.linalg.cholesky(ins[0])]


@register("_linalg_sumlogdiag", "linalg_sumlogdiag", inputs=("A",))
def sumlogdiag(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [_at_least_1d(jnp.sum(jnp.log(jnp.diagonal(ins[0], axis1=-2, axis2=-1)), axis=-1))]


@register("_linalg_extractdiag", "linalg_extractdiag", inputs=("A",))
def extractdiag(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [jnp.diagonal(ins[0], a.int("offset", 0), axis1=-2, axis2=-1)]


@register("_linalg_makediag", "linalg_makediag", inputs=("A",))
def makediag(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    offset = a.int("offset", 0)
    n = x.shape[-1] + abs(offset)
    rows = jnp.arange(x.shape[-1]) + max(0, -offset)
    cols = jnp.arange(x.shape[-1]) + max(0, offset)
    out = jnp.zeros(x.shape[:-1] + (n, n), x.dtype)
    return [out.at[..., rows, cols].set(x)]


@register("_linalg_syrk", "linalg_syrk", inputs=("A",))
def syrk(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    xt = jnp.swapaxes(x, -1, -2)
    out = jnp.matmul(xt, x) if a.bool("transpose", False) else jnp.matmul(x, xt)
    return [a.float("alpha", 1.0) * out]


@register("moments", num_outputs=2)
def moments(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``[mean, variance]`` over ``axes`` (all by default)."""
    x = ins[0]
    axes = _axes(a, x.ndim, "axes", exclude_key=None)
    keep = a.bool("keepdims", False)
    mean = jnp.mean(x, axis=axes, keepdims=True)
    var = jnp.mean(jnp.square(x - mean), axis=axes, keepdims=keep)
    return [_at_least_1d(mean if keep else jnp.squeeze(mean, axes)), _at_least_1d(var)]
