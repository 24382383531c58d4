"""``F.contrib`` operators other than detection: resizing and adaptive pooling, GluonNLP's interleaved
attention products, and small helpers (div_sqrt_dim, gradientmultiplier, straight-through rounding)."""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

from ._registry import Attrs, OpContext, register
from ._util import ndim_check


# -- resizing and adaptive pooling ------------------------------------------------------------------
def _bilinear_matrix(n_in: int, n_out: int, align_corners: bool) -> np.ndarray:
    """(n_out, n_in) weights of 1-D linear interpolation as MXNet samples it."""
    weights = np.zeros((n_out, n_in), np.float64)
    if align_corners:
        scale = (n_in - 1) / (n_out - 1) if n_out > 1 else 0.0
    else:
        scale = n_in / n_out
    for o in range(n_out):
        src = scale * o if align_corners else max(scale * (o + 0.5) - 0.5, 0.0)
        low = min(int(src), n_in - 1)
        high = low + 1 if low < n_in - 1 else low
        frac = src - low
        weights[o, low] += 1.0 - frac
        weights[o, high] += frac
    return weights


def _resize_size(a: Attrs, x, like) -> tuple[int, int]:
    h, w = x.shape[2], x.shape[3]
    mode = a.str("mode", "size", ("size", "odd_scale", "like", "to_even_down", "to_even_up", "to_odd_down",
                                  "to_odd_up"))
    if mode == "size":
        if a.has("scale_height"):  # MXNet reads scale_width only when scale_height is given
            return int(a.float("scale_height") * h), int(a.float("scale_width", a.float("scale_height")) * w)
        return a.int("height", 1), a.int("width", 1)
    if mode == "odd_scale":
        sh, sw = a.float("scale_height"), a.float("scale_width")
        return (int(h * sh) if h % 2 == 0 else int((h - 1) * sh) + 1,
                int(w * sw) if w % 2 == 0 else int((w - 1) * sw) + 1)
    if mode == "like":
        if like is None:
            raise a.fail("mode='like' needs the input 'like'")
        return like.shape[2], like.shape[3]
    step = {"to_even_down": (0, -1), "to_even_up": (0, 1), "to_odd_down": (1, -1), "to_odd_up": (1, 1)}[mode]
    return tuple(d if d % 2 == step[0] else d + step[1] for d in (h, w))


@register("_contrib_BilinearResize2D", inputs=("data", "like?"))
def bilinear_resize(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Bilinear resizing of NCHW data to ``height``x``width`` (or a scale, or another input's size);
    ``align_corners`` (default True) maps the corner pixels onto each other."""
    x, like = ins[0], ins[1]
    ndim_check(a, x, (4,))
    out_h, out_w = _resize_size(a, x, like)
    if out_h < 1 or out_w < 1:
        raise a.fail(f"output size {out_h}x{out_w} must be positive")
    align = a.bool("align_corners", True)
    mh = jnp.asarray(_bilinear_matrix(x.shape[2], out_h, align), x.dtype)
    mw = jnp.asarray(_bilinear_matrix(x.shape[3], out_w, align), x.dtype)
    return [jnp.einsum("oh,nchw,pw->ncop", mh, x, mw)]


def _adaptive_matrix(n_in: int, n_out: int) -> np.ndarray:
    weights = np.zeros((n_out, n_in), np.float64)
    for o in range(n_out):
        start, end = (o * n_in) // n_out, -(-((o + 1) * n_in) // n_out)
        weights[o, start:end] = 1.0 / (end - start)
    return weights


@register("_contrib_AdaptiveAvgPooling2D")
def adaptive_avg_pooling(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Average pooling of NCHW data to ``output_size`` (one int for both sides, default 1): output cell ``i``
    averages input rows ``floor(i*H/out)`` to ``ceil((i+1)*H/out)``."""
    x = ins[0]
    ndim_check(a, x, (4,))
    size = a.tuple("output_size", (1,))
    if len(size) == 1:
        size = size * 2
    if len(size) != 2 or min(size) < 1:
        raise a.fail(f"output_size={size} must be one or two positive integers")
    mh = jnp.asarray(_adaptive_matrix(x.shape[2], size[0]), x.dtype)
    mw = jnp.asarray(_adaptive_matrix(x.shape[3], size[1]), x.dtype)
    return [jnp.einsum("oh,nchw,pw->ncop", mh, x, mw)]


# -- helpers ------------------------------------------------------------------------------------------
@register("_contrib_div_sqrt_dim")
def div_sqrt_dim(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``data / sqrt(data.shape[-1])``."""
    x = ins[0]
    return [x / jnp.asarray(math.sqrt(x.shape[-1]), x.dtype)]


@functools.partial(jax.custom_vjp, nondiff_argnums=(1,))
def _scale_gradient(x, scale: float):
    return x


def _scale_gradient_fwd(x, scale):
    return x, None


def _scale_gradient_bwd(scale, _, g):
    return (g * scale,)


_scale_gradient.defvjp(_scale_gradient_fwd, _scale_gradient_bwd)


@register("_contrib_gradientmultiplier")
def gradient_multiplier(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The identity whose gradient is multiplied by ``scalar``."""
    return [_scale_gradient(ins[0], a.float("scalar"))]


def _straight_through(fn):
    return lambda x: x + jax.lax.stop_gradient(fn(x) - x)


register("_contrib_round_ste")(lambda ins, a, ctx: [_straight_through(
    lambda v: jnp.where(v >= 0, jnp.floor(v + 0.5), jnp.ceil(v - 0.5)))(ins[0])])
register("_contrib_sign_ste")(lambda ins, a, ctx: [_straight_through(jnp.sign)(ins[0])])


@register("_contrib_boolean_mask", inputs=("data", "index"))
def boolean_mask(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Rows of ``data`` (along ``axis``) where ``index`` is non-zero. The output's size depends on the
    values, so this runs only on concrete arrays, not inside hybridize or jit."""
    x, index = ins[0], ins[1]
    try:
        keep = np.flatnonzero(np.asarray(index))
    except jax.errors.TracerArrayConversionError:
        raise a.fail("boolean_mask's output size depends on the values of 'index'; it cannot run inside "
                     "hybridize/jit (use where() with a static shape instead)") from None
    return [jnp.take(x, jnp.asarray(keep, jnp.int32), axis=a.int("axis", 0))]


@register("_contrib_allclose", inputs=("a", "b"))
def allclose(ins: list, a: Attrs, ctx: OpContext) -> list:
    close = jnp.all(jnp.abs(ins[0] - ins[1]) <= a.float("atol", 1e-8) + a.float("rtol", 1e-5) * jnp.abs(ins[1]))
    return [close.astype(jnp.float32)]


# -- GluonNLP's interleaved attention products --------------------------------------------------------
def _heads(a: Attrs, width: int, parts: int, what: str) -> tuple[int, int]:
    heads = a.int("heads")
    if heads < 1 or width % (heads * parts):
        raise a.fail(f"{what} has {width} features, not a multiple of {parts} x heads={heads}")
    return heads, width // (heads * parts)


@register("_contrib_interleaved_matmul_selfatt_qk", inputs=("queries_keys_values",))
def selfatt_qk(ins: list, a: Attrs, ctx: OpContext) -> list:
    """(T, B, heads*3*D) interleaved projections -> (B*heads, T, T) scores ``q k^T / sqrt(D)``."""
    qkv = ins[0]
    t, b, width = qkv.shape
    heads, d = _heads(a, width, 3, "queries_keys_values")
    parts = qkv.reshape(t, b, heads, 3, d)
    q = parts[:, :, :, 0] / jnp.asarray(math.sqrt(d), qkv.dtype)
    scores = jnp.einsum("tbhd,sbhd->bhts", q, parts[:, :, :, 1])
    return [scores.reshape(b * heads, t, t)]


@register("_contrib_interleaved_matmul_selfatt_valatt", inputs=("queries_keys_values", "attention"))
def selfatt_valatt(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Attention weights (B*heads, T, T) applied to the interleaved values -> (T, B, heads*D)."""
    qkv, att = ins[0], ins[1]
    t, b, width = qkv.shape
    heads, d = _heads(a, width, 3, "queries_keys_values")
    values = qkv.reshape(t, b, heads, 3, d)[:, :, :, 2]
    out = jnp.einsum("bhts,sbhd->tbhd", att.reshape(b, heads, t, t), values)
    return [out.reshape(t, b, heads * d)]


@register("_contrib_interleaved_matmul_encdec_qk", inputs=("queries", "keys_values"))
def encdec_qk(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Queries (Tq, B, heads*D) and interleaved keys/values (Tk, B, heads*2*D) -> (B*heads, Tq, Tk)."""
    q, kv = ins[0], ins[1]
    tq, b, width = q.shape
    heads, d = _heads(a, width, 1, "queries")
    keys = kv.reshape(kv.shape[0], b, heads, 2, d)[:, :, :, 0]
    scores = jnp.einsum("tbhd,sbhd->bhts", q.reshape(tq, b, heads, d) / jnp.asarray(math.sqrt(d), q.dtype), keys)
    return [scores.reshape(b * heads, tq, kv.shape[0])]


@register("_contrib_interleaved_matmul_encdec_valatt", inputs=("keys_values", "attention"))
def encdec_valatt(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Attention (B*heads, Tq, Tk) applied to the interleaved values (Tk, B, heads*2*D) -> (Tq, B, heads*D)."""
    kv, att = ins[0], ins[1]
    tk, b, width = kv.shape
    heads, d = _heads(a, width, 2, "keys_values")
    values = kv.reshape(tk, b, heads, 2, d)[:, :, :, 1]
    out = jnp.einsum("bhts,sbhd->tbhd", att.reshape(b, heads, -1, tk), values)
    return [out.reshape(out.shape[0], b, heads * d)]
