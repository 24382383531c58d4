"""JAX implementations of the big ops used by layers, and typed entry points.

Each op is written once, with :func:`hybrid.graph.ops.big_op`: the decorated function is the
implementation, and the name it defines (``dense``, ``convolution``, ...) is the public function, which
checks nothing and runs the op through ``ops.call`` so that it appears as one node in traced graphs
(``dense.impl`` is the implementation itself). Layers validate their inputs before calling these.
"""
from __future__ import annotations

import functools
import itertools
from typing import Any, Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .ops import OpPattern as P, big_op, call, register
from .target import Target

ACTIVATIONS = {
    "relu": jax.nn.relu,
    "relu6": jax.nn.relu6,
    "sigmoid": jax.nn.sigmoid,
    "tanh": jnp.tanh,
    "softrelu": jax.nn.softplus,
    "softsign": jax.nn.soft_sign,
    "gelu": lambda x: jax.nn.gelu(x, approximate=False),
    "gelu_tanh": lambda x: jax.nn.gelu(x, approximate=True),
    "silu": jax.nn.silu,
    "swish": jax.nn.silu,
    "elu": jax.nn.elu,
    "selu": jax.nn.selu,
}


def _sequence_attrs(*inputs: Any, **attrs: Any) -> dict:
    """Sequence attributes (strides, paddings, permutations) as tuples."""
    return {k: tuple(v) if isinstance(v, (list, tuple)) else v for k, v in attrs.items()}


def _conv_attrs(*inputs: Any, weight_layout: str | None = None, **attrs: Any) -> dict:
    """A convolution's attributes as tuples; ``weight_layout`` only when given (the layout pass sets it)."""
    attrs = _sequence_attrs(**attrs)
    return attrs if weight_layout is None else dict(attrs, weight_layout=weight_layout)


def _axis_attrs(data: Any, *inputs: Any, axis: int) -> dict:
    return {"axis": axis % data.ndim}


def _dropout_attrs(x: Any, key: Any, *, rate: float, axes: Sequence[int]) -> dict:
    return {"rate": float(rate), "axes": tuple(a % x.ndim for a in axes)}


def _attention_attrs(query: Any, *inputs: Any, scale: float | None, causal: bool) -> dict:
    return {"scale": float(1.0 / float(query.shape[-1]) ** 0.5 if scale is None else scale), "causal": bool(causal)}


def _layout_channel_axis(attrs: dict, shape: tuple) -> int:
    """The channel axis of an op with a ``layout`` attribute (``'NCHW'`` -> 1, ``'NHWC'`` -> 3)."""
    return attrs["layout"].index("C")


def _runs_shifted(attrs: dict, in_shapes: list, target: Any) -> bool:
    """A convolution computed as shifted products keeps its layout (see :func:`depthwise_runs_shifted`)."""
    layout = attrs["layout"]
    return target.depthwise_as_shifts and shiftable_depthwise(
        in_shapes[0], in_shapes[1], attrs["groups"], layout, attrs.get("weight_layout") or kernel_layout(layout))


# -- dense ------------------------------------------------------------------------
@big_op("dense", P.OUT_ELEMENTWISE_FUSABLE, precision="low", channel_axis=lambda attrs, shape: len(shape) - 1,
        scale_foldable=True, group_op="dense_group")
def dense(x, weight, bias=None, *, flatten: bool = True):
    """``x @ weight.T + bias``; weight ``(units, in_units)``. With ``flatten``, x is reshaped to 2-D."""
    if flatten and x.ndim != 2:
        x = x.reshape(x.shape[0], -1)
    y = lax.dot_general(x, weight, (((x.ndim - 1,), (1,)), ((), ())))
    return y if bias is None else y + bias


# -- activations ------------------------------------------------------------------
@big_op("activation", P.ELEMENTWISE)
def activation(x, *, act_type: str):
    """Elementwise activation by name (see ``ACTIVATIONS``)."""
    return ACTIVATIONS[act_type](x)


@big_op("softmax", P.COMM_REDUCE, precision="float32")
def softmax(x, *, axis: int = -1, temperature: float = 1.0):
    return jax.nn.softmax(x / temperature if temperature != 1.0 else x, axis=axis)


@big_op("log_softmax", P.COMM_REDUCE, precision="float32")
def log_softmax(x, *, axis: int = -1, temperature: float = 1.0):
    return jax.nn.log_softmax(x / temperature if temperature != 1.0 else x, axis=axis)


# -- convolution ------------------------------------------------------------------
def kernel_layout(layout: str) -> str:
    """Weight layout for a data layout: channels-first ``OI+spatial``, channels-last ``O+spatial+I``."""
    spatial = layout.replace("N", "").replace("C", "")
    return "OI" + spatial if layout.index("C") == 1 else "O" + spatial + "I"


@big_op("convolution", P.OUT_ELEMENTWISE_FUSABLE, precision="low", channel_axis=_layout_channel_axis,
        layout_attr="layout", weight_layout_attr="weight_layout", keeps_layout=_runs_shifted,
        scale_foldable=True, normalize=_conv_attrs)
def convolution(x, weight, bias=None, *, strides: Sequence[int], padding: Sequence[int],
                dilation: Sequence[int], groups: int = 1, layout: str = "NCHW", weight_layout: str | None = None):
    """N-d convolution in ``layout`` (``NCW``, ``NCHW``, ``NCDHW`` or channels-last)."""
    weight_layout = weight_layout or kernel_layout(layout)
    if depthwise_runs_shifted(x.shape, weight.shape, groups, layout, weight_layout):
        y = _depthwise_as_sum(x, weight, strides, padding, dilation, layout, weight_layout)
    else:
        dn = lax.conv_dimension_numbers(x.shape, weight.shape, (layout, weight_layout, layout))
        y = lax.conv_general_dilated(x, weight, strides, [(p, p) for p in padding], rhs_dilation=dilation,
                                     dimension_numbers=dn, feature_group_count=groups)
    if bias is not None:
        shape = [1] * y.ndim
        shape[layout.index("C")] = bias.shape[0]
        y = y + bias.reshape(shape)
    return y


_MAX_SHIFTED_TAPS = 49


def shiftable_depthwise(x_shape, weight_shape, groups, layout, weight_layout) -> bool:
    """Whether a convolution is depthwise (one filter per channel) with few enough taps to run as a sum
    of shifted products."""
    channels = x_shape[layout.index("C")]
    taps = int(np.prod([weight_shape[weight_layout.index(c)] for c in weight_layout if c not in "OI"]))
    return (groups > 1 and groups == channels == weight_shape[weight_layout.index("O")]
            and weight_shape[weight_layout.index("I")] == 1 and taps <= _MAX_SHIFTED_TAPS)


def depthwise_runs_shifted(x_shape, weight_shape, groups, layout, weight_layout) -> bool:
    """Whether a convolution runs as a sum of shifted products: a shiftable depthwise one on XLA:CPU,
    whose grouped convolution is several times slower than that."""
    return Target.for_backend().depthwise_as_shifts and \
        shiftable_depthwise(x_shape, weight_shape, groups, layout, weight_layout)


def _depthwise_as_sum(x, weight, strides, padding, dilation, layout, weight_layout):
    """``sum over taps of shift(x, tap) * weight[:, tap]``, per channel."""
    spatial = [c for c in layout if c not in "NC"]
    axes = [layout.index(c) for c in spatial]
    c_axis = layout.index("C")
    kernel = jnp.transpose(weight, [weight_layout.index("O"), weight_layout.index("I")]
                           + [weight_layout.index(c) for c in spatial])[:, 0]  # (C, *kernel)
    pads = [(0, 0)] * x.ndim
    for axis, p in zip(axes, padding):
        pads[axis] = (p, p)
    padded = jnp.pad(x, pads)
    sizes = [kernel.shape[1 + i] for i in range(len(spatial))]
    out_sizes = [(x.shape[a] + 2 * p - d * (k - 1) - 1) // st + 1
                 for a, p, d, k, st in zip(axes, padding, dilation, sizes, strides)]
    shape = [1] * x.ndim
    shape[c_axis] = x.shape[c_axis]
    total = None
    for tap in np.ndindex(*sizes):
        start = [0] * x.ndim
        limit = list(padded.shape)
        step = [1] * x.ndim
        for i, axis in enumerate(axes):
            start[axis] = tap[i] * dilation[i]
            limit[axis] = start[axis] + (out_sizes[i] - 1) * strides[i] + 1
            step[axis] = strides[i]
        term = lax.slice(padded, start, limit, step) * kernel[(slice(None),) + tap].reshape(shape)
        total = term if total is None else total + term
    return total


# -- pooling ----------------------------------------------------------------------
def _spatial_axes(layout: str) -> tuple[int, ...]:
    return tuple(i for i, c in enumerate(layout) if c not in "NC")


def _pool_padding(in_size: int, kernel: int, stride: int, pad: int, ceil_mode: bool) -> tuple[int, int]:
    span = in_size + 2 * pad - kernel
    out = -(-span // stride) + 1 if ceil_mode else span // stride + 1
    if ceil_mode and (out - 1) * stride >= in_size + pad:
        out -= 1  # the last window must start inside the input or its left padding
    extra = max(0, (out - 1) * stride + kernel - (in_size + 2 * pad))
    return pad, pad + extra


@big_op("pooling", P.OPAQUE, channel_axis=_layout_channel_axis, layout_attr="layout", normalize=_sequence_attrs)
def pooling(x, *, pool_type: str, kernel: Sequence[int], strides: Sequence[int], padding: Sequence[int],
            ceil_mode: bool = False, count_include_pad: bool = True, layout: str = "NCHW"):
    """Max or average pooling over the spatial axes of ``layout``."""
    axes = _spatial_axes(layout)
    window = [1] * x.ndim
    stride = [1] * x.ndim
    pads = [(0, 0)] * x.ndim
    for i, axis in enumerate(axes):
        window[axis], stride[axis] = kernel[i], strides[i]
        pads[axis] = _pool_padding(x.shape[axis], kernel[i], strides[i], padding[i], ceil_mode)
    if _tiles(x, axes, kernel, strides, pads):
        return _tiled_pooling(x, axes, kernel, pool_type)
    # NumPy scalars keep the init values concrete, so JAX uses its differentiable max/sum window ops
    if pool_type == "max":
        if jnp.issubdtype(x.dtype, jnp.floating):
            return _window_max(x, tuple(window), tuple(stride), tuple(pads))
        return lax.reduce_window(x, np.asarray(jnp.iinfo(x.dtype).min, x.dtype), lax.max, window, stride, pads)
    summed = lax.reduce_window(x, np.asarray(0, x.dtype), lax.add, window, stride, pads)
    if count_include_pad:  # windows count the declared padding, not the ceil-mode overhang
        ones = jnp.ones([x.shape[a] + 2 * p for a, p in zip(axes, padding)], x.dtype)
        count_pads = [(0, pads[a][1] - padding[i]) for i, a in enumerate(axes)]
    else:
        ones = jnp.ones([x.shape[a] for a in axes], x.dtype)
        count_pads = [pads[a] for a in axes]
    counts = lax.reduce_window(ones, np.asarray(0, x.dtype), lax.add, tuple(kernel), tuple(strides), count_pads)
    shape = [1] * x.ndim
    for i, axis in enumerate(axes):
        shape[axis] = counts.shape[i]
    return summed / counts.reshape(shape)


@functools.partial(jax.custom_vjp, nondiff_argnums=(1, 2, 3))
def _window_max(x, window: tuple, stride: tuple, pads: tuple):
    """Max over windows of a floating-point ``x``; its gradient goes to the first maximum of each window
    (as MXNet's and XLA's select-and-scatter do), computed without index arrays: JAX's own rule keeps
    several int32 arrays of the padded input's size alive on XLA:CPU."""
    return lax.reduce_window(x, np.asarray(-np.inf, x.dtype), lax.max, window, stride, pads)


def _window_max_forward(x, window, stride, pads):
    y = _window_max(x, window, stride, pads)
    return y, (x, y)


def _window_max_backward(window, stride, pads, residuals, grad):
    x, y = residuals
    padded = lax.pad(x, np.asarray(-np.inf, x.dtype), [(lo, hi, 0) for lo, hi in pads])
    total = jnp.zeros(padded.shape, grad.dtype)
    taken = jnp.zeros(y.shape, bool)
    span = [(n - 1) * s + 1 for n, s in zip(y.shape, stride)]
    for offset in itertools.product(*map(range, window)):
        candidates = lax.slice(padded, offset, [o + w for o, w in zip(offset, span)], stride)
        hit = (candidates == y) & ~taken
        taken = taken | hit
        spread = [(o, size - o - w, s - 1) for o, w, s, size in zip(offset, span, stride, padded.shape)]
        total = total + lax.pad(jnp.where(hit, grad, 0), np.asarray(0, grad.dtype), spread)
    inner = [(lo, size - hi) for (lo, hi), size in zip(pads, padded.shape)]
    return (lax.slice(total, [a for a, _ in inner], [b for _, b in inner]),)


_window_max.defvjp(_window_max_forward, _window_max_backward)


def _tiles(x, axes, kernel, strides, pads) -> bool:
    """Windows tile the input exactly: stride == kernel, no padding, sizes divisible."""
    return all(k == s and pads[a] == (0, 0) and x.shape[a] % k == 0 for a, k, s in zip(axes, kernel, strides))


def _tiled_pooling(x, axes, kernel, pool_type):
    """Pooling of non-overlapping windows as a reshape and a reduction (much faster than a window
    reduction on XLA:CPU)."""
    shape, reduce = [], []
    for i, d in enumerate(x.shape):
        if i in axes:
            k = kernel[axes.index(i)]
            shape += [d // k, k]
            reduce.append(len(shape) - 1)
        else:
            shape.append(d)
    tiles = x.reshape(shape)
    return jnp.max(tiles, axis=tuple(reduce)) if pool_type == "max" else jnp.mean(tiles, axis=tuple(reduce))


@big_op("global_pooling", P.COMM_REDUCE, channel_axis=_layout_channel_axis, layout_attr="layout")
def global_pooling(x, *, pool_type: str, layout: str = "NCHW"):
    """Max or mean over all spatial axes, keeping them as size 1."""
    axes = _spatial_axes(layout)
    if pool_type == "max":
        return jnp.max(x, axis=axes, keepdims=True)
    return jnp.mean(x, axis=axes, keepdims=True)


# -- normalisation ----------------------------------------------------------------
def _stats_dtype(dtype):
    return jnp.promote_types(dtype, jnp.float32)


@big_op("batch_norm", P.OPAQUE, channel_axis=lambda attrs, shape: attrs["axis"] % len(shape),
        channel_axis_attr="axis", affine_in_inference=True, stateful=True)
def batch_norm(x, gamma, beta, running_mean, running_var, *, axis: int = 1, eps: float = 1e-5,
               momentum: float = 0.9, training: bool = False):
    """Batch normalisation over all axes but ``axis``.

    Training returns ``(y, new_running_mean, new_running_var)`` with
    ``new = momentum * old + (1 - momentum) * batch_stat`` (biased variance);
    inference returns ``y`` normalised with the running statistics.
    """
    axis = axis % x.ndim
    reduce_axes = tuple(i for i in range(x.ndim) if i != axis)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    if training:
        xf = x.astype(_stats_dtype(x.dtype))
        mean = jnp.mean(xf, axis=reduce_axes)
        var = jnp.mean(jnp.square(xf - mean.reshape(shape)), axis=reduce_axes)
    else:
        mean, var = running_mean, running_var
    scale = gamma * lax.rsqrt(var + eps)
    # x * scale + shift rather than (x - mean) * scale + beta: the same value, and its backward pass
    # needs one reduction over x fewer (1.4x faster on a ResNet activation on XLA:CPU)
    shift = beta - mean * scale
    y = x * scale.reshape(shape).astype(x.dtype) + shift.reshape(shape).astype(x.dtype)
    if not training:
        return y
    new_mean = momentum * running_mean + (1 - momentum) * lax.stop_gradient(mean).astype(running_mean.dtype)
    new_var = momentum * running_var + (1 - momentum) * lax.stop_gradient(var).astype(running_var.dtype)
    return y, new_mean, new_var


@big_op("layer_norm", P.OPAQUE)
def layer_norm(x, gamma, beta, *, axis: int = -1, eps: float = 1e-5):
    """Normalise over ``axis`` and apply ``gamma``/``beta`` of size ``x.shape[axis]``."""
    xf = x.astype(_stats_dtype(x.dtype))
    mean = jnp.mean(xf, axis=axis, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    y = (xf - mean) * lax.rsqrt(var + eps)
    return (y * gamma.reshape(shape) + beta.reshape(shape)).astype(x.dtype)


# -- embedding and dropout --------------------------------------------------------
@big_op("embedding", P.INJECTIVE)
def embedding(indices, weight):
    """Rows of ``weight`` (``(input_dim, output_dim)``) at integer ``indices`` (clipped to range)."""
    return jnp.take(weight, indices.astype(jnp.int32), axis=0, mode="clip")


@big_op("dropout", P.OPAQUE, random=True, normalize=_dropout_attrs)
def dropout(x, key, *, rate: float, axes: Sequence[int] = ()):
    """Inverted dropout: zero with probability ``rate``, scale survivors by ``1/(1-rate)``.

    ``axes`` lists axes along which one mask value is shared.
    """
    keep = 1.0 - rate
    mask_shape = tuple(1 if i in axes else d for i, d in enumerate(x.shape))
    # the mask depends on the key alone, so XLA would draw the masks of every dropout of a network at
    # the start of the program and keep them all alive; tying the key to ``x`` draws each when needed
    x, key = lax.optimization_barrier((x, key))
    # kept as booleans for the backward pass (XLA would otherwise keep the 32-bit random bits)
    mask = lax.optimization_barrier(jax.random.bernoulli(key, keep, mask_shape))
    return jnp.where(mask, x / jnp.asarray(keep, x.dtype), jnp.zeros((), x.dtype))


# -- attention ---------------------------------------------------------------------
@big_op("attention", P.OPAQUE, precision="low", normalize=_attention_attrs)
def attention(query, key, value, mask=None, *, scale: float | None = None, causal: bool = False):
    """Scaled dot-product attention, ``softmax(q k^T * scale) v`` per head.

    Shapes follow ``jax.nn.dot_product_attention``: query ``(B, T, N, H)``, key and
    value ``(B, S, N, H)``, optional boolean ``mask`` broadcastable to ``(B, N, T, S)``
    (True = attend). ``scale`` defaults to ``1/sqrt(H)``. Lowers to the fused cuDNN
    kernel on GPU where JAX supports it.
    """
    return jax.nn.dot_product_attention(query, key, value, mask=mask, scale=scale, is_causal=causal)


# -- selection and fused losses --------------------------------------------------------
@big_op("pick", P.INJECTIVE, normalize=_axis_attrs)
def pick(data, index, *, axis: int = -1):
    """``data`` at integer ``index`` along ``axis`` (index has data's shape without ``axis``; clipped)."""
    index = jnp.expand_dims(index.astype(jnp.int32), axis)
    return jnp.squeeze(jnp.take_along_axis(data, index, axis=axis, mode="clip"), axis)


@big_op("softmax_cross_entropy", P.COMM_REDUCE, precision="float32", normalize=_axis_attrs)
def softmax_cross_entropy(logits, index, *, axis: int = -1):
    """``-log_softmax(logits)[index]`` along ``axis`` without materialising the log-probabilities."""
    shifted = logits - lax.stop_gradient(jnp.max(logits, axis=axis, keepdims=True))
    log_norm = jnp.log(jnp.sum(jnp.exp(shifted), axis=axis))
    return log_norm - pick.impl(shifted, index, axis=axis)


# -- ops created by graph passes ------------------------------------------------------------
@big_op("batch_norm_fold", P.OPAQUE)
def batch_norm_fold(weight, gamma, beta, mean, var, bias=None, *, eps: float, out_axis: int = 0):
    """Weight and bias of a conv/dense whose output is batch-normalised with running statistics:
    ``w * s`` (along the output-channel axis ``out_axis``) and ``(b - mean) * s + beta`` with
    ``s = gamma / sqrt(var + eps)``."""
    scale = gamma.astype(jnp.float32) * lax.rsqrt(var.astype(jnp.float32) + eps)
    shape = [1] * weight.ndim
    shape[out_axis] = -1
    new_weight = (weight.astype(jnp.float32) * scale.reshape(shape)).astype(weight.dtype)
    shift = -mean.astype(jnp.float32) if bias is None else bias.astype(jnp.float32) - mean.astype(jnp.float32)
    new_bias = (shift * scale + beta.astype(jnp.float32)).astype(weight.dtype)
    return new_weight, new_bias


@register("dense_group", P.OUT_ELEMENTWISE_FUSABLE, precision="low")
def _dense_group(x, *weights_and_biases, units, has_bias, flatten):
    weights, biases, i = [], [], 0
    for n, bias in zip(units, has_bias):
        weights.append(weights_and_biases[i])
        biases.append(weights_and_biases[i + 1] if bias else jnp.zeros((n,), weights_and_biases[i].dtype))
        i += 2 if bias else 1
    y = dense.impl(x, jnp.concatenate(weights, axis=0), jnp.concatenate(biases) if any(has_bias) else None,
               flatten=flatten)
    splits = np.cumsum(units)[:-1].tolist()
    return tuple(jnp.split(y, splits, axis=-1))


def dense_group(x, weights: Sequence, biases: Sequence, flatten: bool = True):
    """Several ``dense`` layers on the same input computed as one matmul; returns one output each.

    ``biases`` holds an array or None per weight."""
    args = []
    for w, b in zip(weights, biases):
        args.append(w)
        if b is not None:
            args.append(b)
    return call("dense_group", x, *args, units=tuple(int(w.shape[0]) for w in weights),
                has_bias=tuple(b is not None for b in biases), flatten=flatten)


@big_op("attention_general", P.OPAQUE, precision="low", normalize=_sequence_attrs)
def attention_general(q, k, v, *, q_perm, k_perm, v_perm, out_perm, n_batch: int, scale: float):
    """Attention on operands in any layout: each is transposed by its ``*_perm`` to
    ``(batch..., length, head_dim)``; the result ``(batch..., T, head_dim)`` is transposed by ``out_perm``."""
    lower = _attention_fused if Target.for_backend().fused_attention else _attention_einsum
    return lower(q, k, v, q_perm, k_perm, v_perm, out_perm, n_batch, scale)


def _attention_fused(q, k, v, q_perm, k_perm, v_perm, out_perm, n_batch, scale):
    """Attention through ``jax.nn.dot_product_attention`` (cuDNN's fused kernel on GPU)."""
    q, k, v = jnp.transpose(q, q_perm), jnp.transpose(k, k_perm), jnp.transpose(v, v_perm)
    batch = q.shape[:n_batch]
    size = int(np.prod(batch, dtype=np.int64))
    q4, k4, v4 = (a.reshape((size, a.shape[-2], 1, a.shape[-1])) for a in (q, k, v))
    out = jax.nn.dot_product_attention(q4, k4, v4, scale=scale)
    out = out.reshape(batch + (q.shape[-2], v.shape[-1]))
    return out if tuple(out_perm) == tuple(range(out.ndim)) else jnp.transpose(out, out_perm)


def _attention_einsum(q, k, v, q_perm, k_perm, v_perm, out_perm, n_batch, scale):
    """Attention as two contractions on the operands in their own layouts. Without a fused kernel
    (XLA:CPU), this spares the transposes to a common layout and their gradients."""
    batch = "abcdefgh"[:n_batch]

    def subscript(letters: str, perm) -> str:  # letters name the permuted axes; return the original's
        original = [""] * len(perm)
        for position, axis in enumerate(perm):
            original[axis] = letters[position]
        return "".join(original)

    qs, ks, vs = subscript(batch + "tx", q_perm), subscript(batch + "sx", k_perm), subscript(batch + "sy", v_perm)
    scores = jnp.einsum(f"{qs},{ks}->{batch}ts", q * jnp.asarray(scale, q.dtype), k)
    weights = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(v.dtype)
    out_letters = batch + "ty"
    return jnp.einsum(f"{batch}ts,{vs}->{''.join(out_letters[p] for p in out_perm)}", weights, v)


# -- transposed convolution ---------------------------------------------------------
@big_op("conv_transpose", P.OUT_ELEMENTWISE_FUSABLE, precision="low", normalize=_sequence_attrs)
def conv_transpose(x, weight, bias=None, *, strides: Sequence[int], padding: Sequence[int],
                   output_padding: Sequence[int], dilation: Sequence[int], groups: int = 1, layout: str = "NCHW"):
    """N-d transposed convolution (the gradient of ``convolution`` w.r.t. its input).

    ``weight`` is ``(in_channels, channels // groups, *kernel)`` for channels-first layouts and
    ``(in_channels, *kernel, channels // groups)`` for channels-last ones. Each spatial output size is
    ``(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1``.
    """
    nd = len(strides)
    channels_last = layout.index("C") != 1
    if channels_last:  # (in, *kernel, out/groups) -> (in, out/groups, *kernel)
        weight = jnp.moveaxis(weight, -1, 1)
    in_channels, out_per_group, kernel = weight.shape[0], weight.shape[1], weight.shape[2:]
    # the adjoint of a convolution: swap in/out channels per group, flip the kernel, dilate the input
    w = weight.reshape((groups, in_channels // groups, out_per_group) + kernel)
    w = jnp.swapaxes(w, 1, 2).reshape((groups * out_per_group, in_channels // groups) + kernel)
    w = jnp.flip(w, axis=tuple(range(2, 2 + nd)))
    if channels_last:
        w = jnp.moveaxis(w, 1, -1)
    pads = [(d * (k - 1) - p, d * (k - 1) - p + a) for k, p, a, d in zip(kernel, padding, output_padding, dilation)]
    dn = lax.conv_dimension_numbers(x.shape, w.shape, (layout, kernel_layout(layout), layout))
    y = lax.conv_general_dilated(x, w, (1,) * nd, pads, lhs_dilation=strides, rhs_dilation=dilation,
                                 dimension_numbers=dn, feature_group_count=groups)
    if bias is not None:
        shape = [1] * y.ndim
        shape[layout.index("C")] = bias.shape[0]
        y = y + bias.reshape(shape)
    return y


# -- activations with a slope ------------------------------------------------------
@big_op("leaky_relu", P.BROADCAST)
def leaky_relu(x, gamma=None, *, act_type: str = "leaky", slope: float = 0.25):
    """MXNet's LeakyReLU op: ``leaky`` (``slope * x`` below 0), ``elu`` (``slope * (exp(x) - 1)``)
    or ``prelu`` (learned ``gamma``: one value, or one per channel on axis 1)."""
    if act_type == "leaky":
        return jax.nn.leaky_relu(x, slope)
    if act_type == "elu":
        return jax.nn.elu(x, slope)
    shape = [1] * x.ndim  # prelu: one slope, or one per channel on axis 1
    if gamma.shape[0] > 1:
        shape[1] = gamma.shape[0]
    return jnp.where(x >= 0, x, gamma.reshape(shape).astype(x.dtype) * x)


# -- group and instance normalisation -------------------------------------------------
@big_op("group_norm", P.OPAQUE)
def group_norm(x, gamma, beta, *, num_groups: int, axis: int = 1, eps: float = 1e-5):
    """Normalise each sample over groups of ``num_groups`` consecutive channels (channel axis ``axis``)
    and all non-batch axes, then scale and shift per channel by ``gamma``/``beta``."""
    moved = jnp.moveaxis(x, axis, 1)
    xf = moved.astype(_stats_dtype(x.dtype)).reshape(moved.shape[0], num_groups, -1)
    mean = jnp.mean(xf, axis=2, keepdims=True)
    var = jnp.mean(jnp.square(xf - mean), axis=2, keepdims=True)
    y = ((xf - mean) * lax.rsqrt(var + eps)).reshape(moved.shape)
    shape = [1] * x.ndim
    shape[1] = moved.shape[1]
    y = y * gamma.reshape(shape) + beta.reshape(shape)
    return jnp.moveaxis(y, 1, axis).astype(x.dtype)


# -- recurrent layers -----------------------------------------------------------------
#: Gates per recurrent mode, in MXNet's order: LSTM (i, f, g, o), GRU (r, z, n).
RNN_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _rnn_step(mode, x_proj, h, c, h2h_weight, h2h_bias):
    """One time step from the projected input ``x W_ih^T + b_ih``; returns ``(h, c)`` (c None but for LSTM)."""
    h_proj = dense.impl(h, h2h_weight, h2h_bias, flatten=False)
    if mode == "lstm":
        i, f, g, o = jnp.split(x_proj + h_proj, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        return jax.nn.sigmoid(o) * jnp.tanh(c), c
    if mode == "gru":
        xr, xz, xn = jnp.split(x_proj, 3, axis=-1)
        hr, hz, hn = jnp.split(h_proj, 3, axis=-1)
        r, z = jax.nn.sigmoid(xr + hr), jax.nn.sigmoid(xz + hz)
        n = jnp.tanh(xn + r * hn)
        return (1 - z) * n + z * h, None
    act = jax.nn.relu if mode == "rnn_relu" else jnp.tanh
    return act(x_proj + h_proj), None


@big_op("rnn_cell", P.OPAQUE, precision="low")
def rnn_cell(x, h, c, i2h_weight, h2h_weight, i2h_bias, h2h_bias, *, mode: str):
    """One step of a recurrent cell: ``x (N, C)``, ``h``/``c (N, H)`` -> ``(h, c)``; ``c`` is None except
    for ``mode='lstm'``. Weights ``(G*H, C)``, ``(G*H, H)``, biases ``(G*H,)`` with G = ``RNN_GATES[mode]``."""
    return _rnn_step(mode, dense.impl(x, i2h_weight, i2h_bias, flatten=False), h, c, h2h_weight, h2h_bias)


@big_op("rnn_layer", P.OPAQUE, precision="low")
def rnn_layer(x, h0, c0, i2h_weight, h2h_weight, i2h_bias, h2h_bias, *, mode: str, reverse: bool = False):
    """One direction of one recurrent layer over a sequence, a ``lax.scan`` over time.

    ``x (T, N, C)``, ``h0``/``c0 (N, H)`` (``c0`` None except for LSTM) -> ``(outputs (T, N, H), h, c)``.
    With ``reverse`` the sequence is read from the last step; outputs stay aligned with the inputs.
    """
    x_proj = dense.impl(x, i2h_weight, i2h_bias, flatten=False)  # all time steps in one matmul

    def step(carry, xp):
        h, c = _rnn_step(mode, xp, *carry, h2h_weight, h2h_bias)
        return (h, c), h

    (h, c), ys = lax.scan(step, (h0, c0), x_proj, reverse=reverse)
    return ys, h, c


def projected_lstm_layer(x, r0, c0, i2h_weight, h2h_weight, i2h_bias, h2h_bias, h2r_weight, *, reverse: bool = False):
    """One direction of an LSTM layer with a projection (Sak et al., 2014) over ``x (T, N, C)``: the state fed
    back and the output are ``r = W_hr (o * tanh(c))``. ``r0 (N, P)``, ``c0 (N, H)``, ``i2h_weight (4H, C)``,
    ``h2h_weight (4H, P)``, biases ``(4H,)``, ``h2r_weight (P, H)``. Returns ``(outputs (T, N, P), r, c)``."""
    x_proj = dense.impl(x, i2h_weight, i2h_bias, flatten=False)

    def step(carry, xp):
        r, c = carry
        i, f, g, o = jnp.split(xp + r @ h2h_weight.T + h2h_bias, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        r = (jax.nn.sigmoid(o) * jnp.tanh(c)) @ h2r_weight.T
        return (r, c), r

    (r, c), ys = lax.scan(step, (r0, c0), x_proj, reverse=reverse)
    return ys, r, c


