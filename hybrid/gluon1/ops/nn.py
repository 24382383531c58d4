"""Layer operators (FullyConnected, Convolution, BatchNorm, Pooling, activations, normalisations...).

Each calls hybrid's big ops in :mod:`hybrid.graph.layer_ops` where one exists, so a hybridized block or
import traces to the same graph nodes as hybrid's native layers.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ... import random as _random
from ...graph import layer_ops
from ._registry import Attrs, OpContext, register
from ._util import axis as _axis, layout as _layout, ndim_check, positive_int, spatial


@register("FullyConnected", inputs=("data", "weight", "bias?"))
def fully_connected(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``data @ weight.T + bias``; weight ``(num_hidden, in_units)``; ``flatten`` folds all but axis 0."""
    x, weight, bias = ins[0], ins[1], ins[2]
    hidden = a.int("num_hidden")
    if weight.ndim != 2 or weight.shape[0] != hidden:
        raise a.fail(f"weight shape {tuple(weight.shape)} does not match num_hidden={hidden}")
    flatten = a.bool("flatten", True)
    in_units = math.prod(x.shape[1:]) if flatten else x.shape[-1]
    if weight.shape[1] != in_units:
        raise a.fail(f"weight shape {tuple(weight.shape)} needs {weight.shape[1]} input units, data of shape "
                     f"{tuple(x.shape)} has {in_units} (flatten={flatten})")
    if a.bool("no_bias", False):
        bias = None
    elif bias is None:
        raise a.fail("missing input 'bias' (pass no_bias=True for none)")
    return [layer_ops.dense(x, weight, bias, flatten=flatten)]


def _kernel(a: Attrs, x) -> tuple[int, ...]:
    kernel = a.tuple("kernel")
    if not 1 <= len(kernel) <= 3:
        raise a.fail(f"kernel {kernel} must have 1 to 3 dimensions")
    if x.ndim != len(kernel) + 2:
        raise a.fail(f"a {len(kernel)}-d kernel needs {len(kernel) + 2}-d data, got shape {tuple(x.shape)}")
    return kernel


@register("Convolution", inputs=("data", "weight", "bias?"))
def convolution(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, weight, bias = ins[0], ins[1], ins[2]
    n = len(_kernel(a, x))
    if weight.shape[0] != a.int("num_filter"):
        raise a.fail(f"weight shape {tuple(weight.shape)} does not match num_filter={a.int('num_filter')}")
    if a.bool("no_bias", False):
        bias = None
    elif bias is None:
        raise a.fail("missing input 'bias' (pass no_bias=True for none)")
    return [layer_ops.convolution(x, weight, bias, strides=spatial(a, "stride", n, 1), padding=spatial(a, "pad", n, 0),
                                  dilation=spatial(a, "dilate", n, 1), groups=positive_int(a, "num_group", 1),
                                  layout=_layout(a, n))]


@register("Deconvolution", inputs=("data", "weight", "bias?"))
def deconvolution(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Transposed convolution; weight ``(in_channels, num_filter // num_group, *kernel)``. ``target_shape``
    overrides ``pad``/``adj`` as MXNet computes them."""
    x, weight, bias = ins[0], ins[1], ins[2]
    kernel = _kernel(a, x)
    n = len(kernel)
    groups = positive_int(a, "num_group", 1)
    filters = a.int("num_filter")
    layout = _layout(a, n)
    channels = x.shape[layout.index("C")]
    if weight.shape[0] != channels or weight.shape[1] * groups != filters:
        raise a.fail(f"weight shape {tuple(weight.shape)} does not match {channels} input channels and "
                     f"num_filter={filters}, num_group={groups} (expected ({channels}, {filters // groups}, ...))")
    stride, dilate = spatial(a, "stride", n, 1), spatial(a, "dilate", n, 1)
    pad, adj = spatial(a, "pad", n, 0), spatial(a, "adj", n, 0)
    target = a.tuple("target_shape", ())
    if target and any(target):
        if len(target) != n:
            raise a.fail(f"target_shape={target} must have {n} entries")
        sizes = [x.shape[i] for i, c in enumerate(layout) if c not in "NC"]
        full = [s * (i - 1) + d * (k - 1) + 1 for s, i, d, k in zip(stride, sizes, dilate, kernel)]
        if any(f < t for f, t in zip(full, target)):
            raise a.fail(f"target_shape={target} is larger than the largest output {tuple(full)}")
        adj = tuple((f - t) % 2 for f, t in zip(full, target))
        pad = tuple((f - t + 1) // 2 for f, t in zip(full, target))
    if a.bool("no_bias", True):
        bias = None
    elif bias is None:
        raise a.fail("missing input 'bias' (pass no_bias=True for none)")
    return [layer_ops.conv_transpose(x, weight, bias, strides=stride, padding=pad, output_padding=adj,
                                     dilation=dilate, groups=groups, layout=layout)]


@register("BatchNorm", "BatchNorm_v1", "_contrib_SyncBatchNorm",
          inputs=("data", "gamma", "beta", "moving_mean", "moving_var"), needs_ctx=True, aux=(3, 4))
def batch_norm(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Training mode (and not ``use_global_stats``) normalises with the batch's statistics; the new running
    statistics reach the caller only through ``ctx.set_state`` (the importer): ``F.BatchNorm`` called on
    arrays does not update them."""
    x, gamma, beta, mean, var = ins[:5]
    if a.bool("output_mean_var", False):
        raise a.fail("output_mean_var=True is not supported")
    if a.bool("fix_gamma", True):
        gamma = jnp.ones_like(gamma)
    training = ctx.training and not a.bool("use_global_stats", False)
    axis = _axis(a, x.ndim, "axis", 1)
    if gamma.shape != (x.shape[axis],):
        raise a.fail(f"gamma shape {tuple(gamma.shape)} does not match {x.shape[axis]} channels on axis {axis}")
    out = layer_ops.batch_norm(x, gamma, beta, mean, var, axis=axis, eps=a.float("eps", 1e-3),
                               momentum=a.float("momentum", 0.9), training=training)
    if not training:
        return [out]
    if ctx.set_state is not None:
        ctx.set_state(3, out[1])
        ctx.set_state(4, out[2])
    return [out[0]]


@register("LayerNorm", inputs=("data", "gamma", "beta"))
def layer_norm(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, gamma, beta = ins[:3]
    if a.bool("output_mean_var", False):
        raise a.fail("output_mean_var=True is not supported")
    axis = _axis(a, x.ndim, "axis", -1)
    return [layer_ops.layer_norm(x, gamma, beta, axis=axis, eps=a.float("eps", 1e-5))]


@register("InstanceNorm", inputs=("data", "gamma", "beta"))
def instance_norm(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Normalise each (sample, channel) over the spatial axes; ``gamma``/``beta`` per channel (axis 1)."""
    x, gamma, beta = ins[:3]
    channels = x.shape[1]
    return [layer_ops.group_norm(x, gamma, beta, num_groups=channels, axis=1, eps=a.float("eps", 1e-3))]


@register("GroupNorm", inputs=("data", "gamma", "beta"))
def group_norm(ins: list, a: Attrs, ctx: OpContext) -> list:
    """MXNet 1.x files hold one gamma and beta per group (broadcast to the group's channels), 2.x files
    one per channel; both are accepted."""
    x, gamma, beta = ins[:3]
    if a.bool("output_mean_var", False):
        raise a.fail("output_mean_var=True is not supported")
    groups = positive_int(a, "num_groups", 1)
    channels = x.shape[1]
    if channels % groups:
        raise a.fail(f"{channels} channels cannot form num_groups={groups} equal groups")
    if gamma.shape != beta.shape or gamma.shape[0] not in (groups, channels):
        raise a.fail(f"gamma {tuple(gamma.shape)} and beta {tuple(beta.shape)} must both have num_groups={groups} "
                     f"(MXNet 1.x) or {channels} channels (2.x) entries")
    if gamma.shape[0] != channels:
        gamma, beta = jnp.repeat(gamma, channels // groups), jnp.repeat(beta, channels // groups)
    return [layer_ops.group_norm(x, gamma, beta, num_groups=groups, axis=1, eps=a.float("eps", 1e-5))]


@register("L2Normalization")
def l2_normalization(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``x / sqrt(sum(x**2) + eps)`` over all but axis 0 (``instance``), axis 1 (``channel``) or axes 2+
    (``spatial``)."""
    x = ins[0]
    mode = a.str("mode", "instance", ("instance", "channel", "spatial"))
    axes = {"instance": tuple(range(1, x.ndim)), "channel": (1,), "spatial": tuple(range(2, x.ndim))}[mode]
    norm = jnp.sqrt(jnp.sum(jnp.square(x), axis=axes, keepdims=True) + a.float("eps", 1e-10))
    return [x / norm]


_ACT = ("relu", "sigmoid", "tanh", "softrelu", "softsign", "log_sigmoid", "mish")


def _act(x, kind: str):
    if kind == "log_sigmoid":
        return jax.nn.log_sigmoid(x)
    if kind == "mish":
        return x * jnp.tanh(jax.nn.softplus(x))
    return layer_ops.activation(x, act_type=kind)


@register("Activation")
def activation(ins: list, a: Attrs, ctx: OpContext) -> list:
    return [_act(ins[0], a.str("act_type", None, _ACT) or _missing(a, "act_type"))]


def _missing(a: Attrs, key: str):
    raise a.fail(f"missing attribute {key!r}")


@register("LeakyReLU", inputs=("data", "gamma?"), needs_ctx=True,
          num_outputs=lambda a: 2 if a.str("act_type", "leaky") == "rrelu" else 1)
def leaky_relu(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``leaky``/``elu`` with ``slope``, ``prelu`` with the learned ``gamma`` (one value or one per channel
    on axis 1), ``selu``, ``gelu`` (erf form), ``rrelu`` (inference: the mean of its slope range;
    training: a random slope per element; rrelu also returns those slopes, as MXNet does)."""
    kind = a.str("act_type", "leaky", ("leaky", "prelu", "elu", "selu", "gelu", "rrelu"))
    x = ins[0]
    if kind in ("gelu", "selu"):
        return [layer_ops.activation(x, act_type=kind)]
    if kind == "prelu":
        gamma = ins[1]
        if gamma is None:
            raise a.fail("act_type='prelu' needs the input 'gamma'")
        if gamma.ndim != 1 or gamma.shape[0] not in (1, x.shape[1] if x.ndim > 1 else 1):
            raise a.fail(f"prelu gamma of shape {tuple(gamma.shape)} must hold 1 value or one per channel "
                         f"({x.shape[1] if x.ndim > 1 else 1})")
        return [layer_ops.leaky_relu(x, gamma, act_type="prelu")]
    if kind == "rrelu":  # two outputs, as in MXNet: the result and the slopes drawn (zeros in inference)
        lower, upper = a.float("lower_bound", 0.125), a.float("upper_bound", 0.334)
        if ctx.training:
            slope = jax.random.uniform(_random.next_key(), x.shape, x.dtype, lower, upper)
            return [jnp.where(x > 0, x, slope * x), slope]
        return [layer_ops.leaky_relu(x, act_type="leaky", slope=(lower + upper) / 2), jnp.zeros_like(x)]
    return [layer_ops.leaky_relu(x, act_type=kind, slope=a.float("slope", 0.25))]


@register("Pooling")
def pooling(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    pool_type = a.str("pool_type", "max", ("max", "avg", "sum", "lp"))
    n = x.ndim - 2
    if not 1 <= n <= 3:
        raise a.fail(f"pooling needs a 3-D to 5-D input, got shape {tuple(x.shape)}")
    layout = _layout(a, n)
    if a.bool("global_pool", False):
        if pool_type == "lp":
            power = a.int("p_value", 2)
            total = jnp.sum(x ** power, axis=tuple(i for i, c in enumerate(layout) if c not in "NC"), keepdims=True)
            return [total if power == 1 else jnp.sqrt(total) if power == 2 else jnp.cbrt(total)]
        y = layer_ops.global_pooling(x, pool_type="max" if pool_type == "max" else "avg", layout=layout)
        if pool_type == "sum":
            y = y * math.prod(x.shape[i] for i, c in enumerate(layout) if c not in "NC")
        return [y]
    kernel = spatial(a, "kernel", n, 1)
    convention = a.str("pooling_convention", "valid", ("valid", "full", "same"))
    stride, pad = spatial(a, "stride", n, 1), spatial(a, "pad", n, 0)
    if convention == "same":
        raise a.fail("pooling_convention='same' is not supported")
    sizes = [x.shape[i] for i, c in enumerate(layout) if c not in "NC"]
    if any(s + 2 * p < k for s, p, k in zip(sizes, pad, kernel)):
        raise a.fail(f"kernel {kernel} is larger than the padded input {tuple(sizes)} (pad {pad})")
    include_pad = a.bool("count_include_pad", True)
    if pool_type == "lp":  # (sum of x^p over the window) ^ (1/p), as MXNet computes it (no absolute value)
        power = a.int("p_value", 2)
        if power not in (1, 2, 3):
            raise a.fail(f"p_value={power} is not supported (1, 2 or 3)")
        total = _pool_full_windows(x ** power, "sum", kernel, stride, pad, True, layout) \
            if convention == "full" else layer_ops.pooling(
                x ** power, pool_type="avg", kernel=kernel, strides=stride, padding=pad,
                count_include_pad=True, layout=layout) * math.prod(kernel)
        return [total if power == 1 else jnp.sqrt(total) if power == 2 else jnp.cbrt(total)]
    if convention == "full" and any(_full_size(*v) != _ceil_size(*v) for v in zip(sizes, kernel, stride, pad)):
        return [_pool_full_windows(x, pool_type, kernel, stride, pad, include_pad, layout)]
    y = layer_ops.pooling(x, pool_type="max" if pool_type == "max" else "avg", kernel=kernel, strides=stride,
                          padding=pad, ceil_mode=convention == "full",
                          count_include_pad=pool_type == "sum" or include_pad, layout=layout)
    return [y * math.prod(kernel) if pool_type == "sum" else y]


def _full_size(size: int, kernel: int, stride: int, pad: int) -> int:
    """MXNet's output size under pooling_convention='full'."""
    return -(-(size + 2 * pad - kernel) // stride) + 1


def _ceil_size(size: int, kernel: int, stride: int, pad: int) -> int:
    """layer_ops.pooling's ceil-mode size: it drops a last window starting in the right padding."""
    out = _full_size(size, kernel, stride, pad)
    return out - 1 if (out - 1) * stride >= size + pad else out


def _pool_full_windows(x, pool_type: str, kernel, stride, pad, include_pad: bool, layout: str):
    """Pooling with MXNet's 'full' convention where a last window lies wholly in the padding (MXNet keeps
    it: the lowest float for max, 0 for avg and sum)."""
    axes = [i for i, c in enumerate(layout) if c not in "NC"]
    window, strides, pads = [1] * x.ndim, [1] * x.ndim, [(0, 0)] * x.ndim
    counts = np.ones((), np.float64)
    for axis, k, s, p in zip(axes, kernel, stride, pad):
        size = x.shape[axis]
        out = _full_size(size, k, s, p)
        window[axis], strides[axis] = k, s
        pads[axis] = (p, (out - 1) * s + k - size - p)
        starts = np.arange(out) * s - p
        ends = np.minimum(starts + k, size + p)
        if not include_pad:
            starts, ends = np.maximum(starts, 0), np.minimum(ends, size)
        counts = np.multiply.outer(counts, np.maximum(ends - starts, 1))
    if pool_type == "max":
        lowest = np.asarray(jnp.finfo(x.dtype).min if jnp.issubdtype(x.dtype, jnp.floating)
                            else jnp.iinfo(x.dtype).min, x.dtype)
        if not jnp.issubdtype(x.dtype, jnp.floating):
            return lax.reduce_window(x, lowest, lax.max, window, strides, pads)
        padded = jnp.pad(x, pads, constant_values=lowest)  # -inf as init keeps JAX's differentiable max
        return lax.reduce_window(padded, np.asarray(-np.inf, x.dtype), lax.max, window, strides, "VALID")
    total = lax.reduce_window(x, np.asarray(0, x.dtype), lax.add, window, strides, pads)
    if pool_type == "sum":
        return total
    shape = [1] * x.ndim
    for i, axis in enumerate(axes):
        shape[axis] = counts.shape[i]
    return total / jnp.asarray(counts.reshape(shape), x.dtype)


@register("SoftmaxOutput", "Softmax", inputs=("data", "label?"), labels=1)
def softmax_output(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The forward pass of MXNet's softmax loss layer: the softmax (its label is ignored)."""
    x = ins[0]
    if a.bool("multi_output", False):
        return [layer_ops.softmax(x, axis=1)]
    if a.bool("preserve_shape", False) or x.ndim <= 2:
        return [layer_ops.softmax(x, axis=-1)]
    return [layer_ops.softmax(x.reshape(x.shape[0], -1), axis=-1).reshape(x.shape)]


def _length_mask(x, length, axis: int):
    steps = jnp.arange(x.shape[axis]).reshape([-1 if i == axis else 1 for i in range(x.ndim)])
    return steps < jnp.expand_dims(length.astype(jnp.int32), axis)


def _softmax_common(ins: list, a: Attrs, log: bool) -> list:
    x, length = ins[0], ins[1]
    axis = _axis(a, x.ndim, "axis", -1)
    temperature = a.float("temperature", 1.0)
    dtype = a.dtype("dtype", None)
    if dtype is not None:
        x = x.astype(dtype)
    if a.bool("use_length", False):
        if length is None:
            raise a.fail("use_length=True needs the input 'length'")
        mask = _length_mask(x, length, axis)
        scaled = x / temperature if temperature != 1.0 else x
        scaled = jnp.where(mask, scaled, -jnp.inf)
        if log:
            return [jax.nn.log_softmax(scaled, axis=axis)]
        return [jnp.where(mask, jax.nn.softmax(scaled, axis=axis), 0)]
    op = layer_ops.log_softmax if log else layer_ops.softmax
    return [op(x, axis=axis, temperature=temperature)]


@register("softmax", inputs=("data", "length?"))
def softmax(ins: list, a: Attrs, ctx: OpContext) -> list:
    return _softmax_common(ins, a, log=False)


@register("log_softmax")
def log_softmax(ins: list, a: Attrs, ctx: OpContext) -> list:
    """MXNet 1.9.1's log_softmax takes no ``length`` input."""
    if a.bool("use_length", False):
        raise a.fail("use_length=True is not supported by MXNet's log_softmax (it has no length input)")
    return _softmax_common([ins[0], None], a, log=True)


@register("softmin", inputs=("data",))
def softmin(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    return [layer_ops.softmax(-x, axis=_axis(a, x.ndim, "axis", -1), temperature=a.float("temperature", 1.0))]


@register("SoftmaxActivation")
def softmax_activation(ins: list, a: Attrs, ctx: OpContext) -> list:
    x = ins[0]
    if a.str("mode", "instance", ("instance", "channel")) == "channel":
        return [layer_ops.softmax(x, axis=1)]
    return [layer_ops.softmax(x.reshape(x.shape[0], -1), axis=-1).reshape(x.shape)]


@register("Dropout", needs_ctx=True)
def dropout(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Inverted dropout in training mode (or ``mode='always'``), identity otherwise."""
    rate = a.float("p", 0.5)
    if not 0 <= rate < 1:
        raise a.fail(f"dropout p={rate} must be in [0, 1)")
    active = ctx.training or a.str("mode", "training", ("training", "always")) == "always"
    if not active or rate == 0:
        return [ins[0]]
    axes = a.tuple("axes", ())
    return [layer_ops.dropout(ins[0], _random.next_key(), rate=rate, axes=tuple(i % ins[0].ndim for i in axes))]


@register("Embedding", inputs=("data", "weight"))
def embedding(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Rows of ``weight`` ``(input_dim, output_dim)`` at the (clipped) indices in ``data``."""
    weight = ins[1]
    if a.has("input_dim") and tuple(weight.shape) != (a.int("input_dim"), a.int("output_dim")):
        raise a.fail(f"weight shape {tuple(weight.shape)} does not match input_dim={a.int('input_dim')}, "
                     f"output_dim={a.int('output_dim')}")
    dtype = a.dtype("dtype", None)
    out = layer_ops.embedding(ins[0], weight)
    return [out if dtype is None else out.astype(dtype)]


@register("UpSampling", inputs=("data",), variadic=True)
def upsampling(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Nearest-neighbour upsampling of NCHW inputs by ``scale``; several inputs are each scaled to the first
    one's output size and then concatenated on axis 1 (``multi_input_mode='concat'``) or summed.
    ``sample_type='bilinear'`` takes ``(data, weight)`` and runs MXNet's depthwise transposed convolution
    (kernel ``2 * scale - scale % 2``, stride ``scale``, padding ``ceil((scale - 1) / 2)``)."""
    kind = a.str("sample_type", "nearest", ("nearest", "bilinear"))
    scale = positive_int(a, "scale")
    if kind == "bilinear":  # MXNet's: a depthwise transposed convolution with the given (C, 1, k, k) weight
        if len(ins) != 2:
            raise a.fail("sample_type='bilinear' needs the inputs data and weight")
        x, weight = ins
        channels = a.int("num_filter", x.shape[1])
        k = 2 * scale - scale % 2
        if weight.shape != (channels, 1, k, k) or x.shape[1] != channels:
            raise a.fail(f"bilinear weight must have shape ({channels}, 1, {k}, {k}) for scale={scale}, got "
                         f"{tuple(weight.shape)} (data {tuple(x.shape)})")
        pad = math.ceil((scale - 1) / 2)
        return [layer_ops.conv_transpose(x, weight, None, strides=(scale, scale), padding=(pad, pad),
                                         output_padding=(0, 0), dilation=(1, 1), groups=channels, layout="NCHW")]
    first = ins[0]
    ndim_check(a, first, (4,))
    height, width = first.shape[2] * scale, first.shape[3] * scale
    outs = []
    for x in ins:
        ndim_check(a, x, (4,))
        if height % x.shape[2] or width % x.shape[3]:
            raise a.fail(f"input of shape {tuple(x.shape)} cannot be scaled to {height}x{width} by a whole factor")
        outs.append(jnp.repeat(jnp.repeat(x, height // x.shape[2], axis=2), width // x.shape[3], axis=3))
    if len(outs) == 1:
        return outs
    if a.str("multi_input_mode", "concat", ("concat", "sum")) == "sum":
        total = outs[0]
        for y in outs[1:]:
            total = total + y
        return [total]
    return [jnp.concatenate(outs, axis=1)]


@register("smooth_l1")
def smooth_l1(ins: list, a: Attrs, ctx: OpContext) -> list:
    """``0.5 (sigma x)^2`` where ``|x| < 1/sigma^2``, else ``|x| - 0.5/sigma^2`` (``sigma = scalar``)."""
    x = ins[0]
    sigma2 = a.float("scalar", 1.0) ** 2
    return [jnp.where(jnp.abs(x) < 1.0 / sigma2, 0.5 * sigma2 * jnp.square(x), jnp.abs(x) - 0.5 / sigma2)]


@register("SequenceMask", "sequence_mask", inputs=("data", "sequence_length?"))
def sequence_mask(ins: list, a: Attrs, ctx: OpContext) -> list:
    """With ``use_sequence_length``, steps at or past each batch entry's length become ``value``; the time
    axis is ``axis`` (0 or 1) and the batch axis the other one."""
    x, length = ins[0], ins[1]
    if not a.bool("use_sequence_length", False):
        return [x]
    if length is None:
        raise a.fail("use_sequence_length=True needs the input 'sequence_length'")
    axis = a.int("axis", 0)
    if axis not in (0, 1):
        raise a.fail(f"axis={axis} must be 0 or 1")
    steps = jnp.arange(x.shape[axis])
    keep = steps[:, None] < length.astype(jnp.int32)[None, :] if axis == 0 else \
        steps[None, :] < length.astype(jnp.int32)[:, None]
    keep = keep.reshape(keep.shape + (1,) * (x.ndim - 2))
    return [jnp.where(keep, x, jnp.asarray(a.float("value", 0.0), x.dtype))]


@register("SequenceLast", inputs=("data", "sequence_length?"))
def sequence_last(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, length = ins[0], ins[1]
    axis = a.int("axis", 0)
    if not a.bool("use_sequence_length", False) or length is None:
        return [jnp.take(x, x.shape[axis] - 1, axis=axis)]
    last = length.astype(jnp.int32) - 1
    moved = jnp.moveaxis(x, axis, 0)  # (T, B, ...)
    return [moved[last, jnp.arange(moved.shape[1])]]


@register("SequenceReverse", inputs=("data", "sequence_length?"))
def sequence_reverse(ins: list, a: Attrs, ctx: OpContext) -> list:
    x, length = ins[0], ins[1]
    if a.int("axis", 0) != 0:
        raise a.fail("only axis=0 is supported")
    if not a.bool("use_sequence_length", False) or length is None:
        return [jnp.flip(x, 0)]
    steps = jnp.arange(x.shape[0])[:, None]
    n = length.astype(jnp.int32)[None, :]
    source = jnp.where(steps < n, n - 1 - steps, steps)  # (T, B)
    index = source.reshape(source.shape + (1,) * (x.ndim - 2))
    return [jnp.take_along_axis(x, jnp.broadcast_to(index, x.shape), axis=0)]


@register("LRN")
def lrn(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Local response normalisation across channels (axis 1) of ``nsize`` neighbours."""
    x = ins[0]
    size = positive_int(a, "nsize")
    alpha, beta, knorm = a.float("alpha", 1e-4), a.float("beta", 0.75), a.float("knorm", 2.0)
    half = size // 2
    sq = jnp.pad(jnp.square(x), [(0, 0), (half, size - 1 - half)] + [(0, 0)] * (x.ndim - 2))
    window = sum(lax.slice_in_dim(sq, i, i + x.shape[1], axis=1) for i in range(size))
    return [x / jnp.power(knorm + alpha / size * window, beta)]


@register("softmax_cross_entropy", inputs=("data", "label"))
def softmax_cross_entropy(ins: list, a: Attrs, ctx: OpContext) -> list:
    """The summed cross-entropy of ``softmax(data)`` (N, K) against integer labels (N,): shape (1,)."""
    x, label = ins[0], ins[1]
    losses = layer_ops.softmax_cross_entropy(x, label.astype(jnp.int32), axis=-1)
    return [jnp.sum(losses).reshape(1)]


def _loss_output(transform):
    def run(ins: list, a: Attrs, ctx: OpContext) -> list:
        return [transform(ins[0])]
    return run


# the forward passes of MXNet's loss layers (their labels only shape the backward pass in MXNet)
register("LinearRegressionOutput", inputs=("data", "label?"), labels=1)(_loss_output(lambda x: x))
register("MAERegressionOutput", inputs=("data", "label?"), labels=1)(_loss_output(lambda x: x))
register("LogisticRegressionOutput", inputs=("data", "label?"), labels=1)(_loss_output(jax.nn.sigmoid))
register("IdentityAttachKLSparseReg")(_loss_output(lambda x: x))


@register("CTCLoss", "ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss",
          inputs=("data", "label", "data_lengths?", "label_lengths?"))
def ctc_loss(ins: list, a: Attrs, ctx: OpContext) -> list:
    """Connectionist temporal classification loss of activations ``data`` (T, N, alphabet) (softmax taken
    inside) against padded ``label`` (N, L): shape (N,). The blank is channel 0 (``blank_label='first'``,
    labels padded with 0) or the last channel ('last', padded with -1); ``use_data_lengths`` /
    ``use_label_lengths`` read the lengths from the optional inputs instead."""
    data, label, data_len, label_len = ins[:4]
    if data.ndim != 3 or label.ndim != 2 or label.shape[0] != data.shape[1]:
        raise a.fail(f"data must be (T, N, alphabet) and label (N, L), got {tuple(data.shape)} and "
                     f"{tuple(label.shape)}")
    first = a.str("blank_label", "first", ("first", "last")) == "first"
    label = label.astype(jnp.int32)
    if a.bool("use_label_lengths", False):
        if label_len is None:
            raise a.fail("use_label_lengths=True needs the input 'label_lengths'")
        lengths = label_len.astype(jnp.int32)
    else:
        padding = label == (0 if first else -1)
        lengths = jnp.where(jnp.any(padding, 1), jnp.argmax(padding, 1), label.shape[1]).astype(jnp.int32)
    if a.bool("use_data_lengths", False):
        if data_len is None:
            raise a.fail("use_data_lengths=True needs the input 'data_lengths'")
        steps = data_len.astype(jnp.int32)
    else:
        steps = jnp.full(data.shape[1], data.shape[0], jnp.int32)
    return [_ctc(data, label, lengths, steps, first)]


@functools.partial(jax.jit, static_argnums=(4,))
def _ctc(data, label, lengths, steps, blank_first: bool):
    t_max, batch, alphabet = data.shape
    blank = 0 if blank_first else alphabet - 1
    logp = jax.nn.log_softmax(data.astype(jnp.promote_types(data.dtype, jnp.float32)), axis=-1)
    s_max = 2 * label.shape[1] + 1
    ext = jnp.full((batch, s_max), blank, jnp.int32).at[:, 1::2].set(jnp.clip(label, 0, alphabet - 1))
    # a label may be reached from two places back unless it repeats the label before it
    skip = (ext != blank) & (ext != jnp.pad(ext, ((0, 0), (2, 0)), constant_values=-1)[:, :s_max])
    neg = jnp.asarray(-1e30, logp.dtype)  # finite: logaddexp of two -inf has a NaN gradient
    rows = jnp.arange(batch)[:, None]
    emit0 = logp[0][rows, ext]
    alpha = jnp.where(jnp.arange(s_max) < 2, emit0, neg)

    def step(alpha, t):
        prev1 = jnp.pad(alpha, ((0, 0), (1, 0)), constant_values=-1e30)[:, :s_max]
        prev2 = jnp.where(skip, jnp.pad(alpha, ((0, 0), (2, 0)), constant_values=-1e30)[:, :s_max], neg)
        new = jnp.logaddexp(jnp.logaddexp(alpha, prev1), prev2) + logp[t][rows, ext]
        return jnp.where((t < steps)[:, None], new, alpha), None

    alpha, _ = lax.scan(step, alpha, jnp.arange(1, t_max))
    end = 2 * lengths
    last = jnp.take_along_axis(alpha, end[:, None], 1)[:, 0]
    before = jnp.where(lengths > 0, jnp.take_along_axis(alpha, jnp.maximum(end - 1, 0)[:, None], 1)[:, 0], neg)
    return (-jnp.logaddexp(last, before)).astype(data.dtype)
