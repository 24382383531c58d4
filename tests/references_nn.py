"""Independent NumPy (float64) references for the layers of test_layers_*.py and test_rnn.py.

Everything is channels-first; tests transpose channels-last data to use them.
"""
import itertools
import math

import numpy as np

from references import _pool_out, layer_norm


def _sigmoid(x):
    return 1 / (1 + np.exp(-x))


def conv_nd(x, w, b, stride, pad, dilation, groups):
    """N-d convolution, x (N, C, *spatial), w (O, C/groups, *kernel): a sum over kernel offsets."""
    kernel = w.shape[2:]
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])
    out_size = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(xp.shape[2:], kernel, stride, dilation)]
    out = np.zeros((x.shape[0], w.shape[0], *out_size))
    in_g, out_g = w.shape[1], w.shape[0] // groups
    for g in range(groups):
        xg, wg = xp[:, g * in_g:(g + 1) * in_g], w[g * out_g:(g + 1) * out_g]
        for offset in itertools.product(*map(range, kernel)):
            window = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                           for o, d, n, s in zip(offset, dilation, out_size, stride))
            out[:, g * out_g:(g + 1) * out_g] += np.einsum("nc...,oc->no...", xg[(slice(None),) * 2 + window],
                                                           wg[(slice(None),) * 2 + offset])
    return out if b is None else out + b.reshape((1, -1) + (1,) * len(kernel))


def conv_transpose_nd(x, w, b, stride, pad, output_padding, dilation, groups):
    """N-d transposed convolution by its definition: every input element scatters ``x * w`` into the
    output at ``i * stride + k * dilation``, then ``pad`` is cropped from both ends (``output_padding``
    extends the far end). x (N, C, *spatial), w (C, O/groups, *kernel)."""
    kernel, spatial = w.shape[2:], x.shape[2:]
    full = [(n - 1) * s + d * (k - 1) + 1 + a for n, s, d, k, a in zip(spatial, stride, dilation, kernel,
                                                                          output_padding)]
    in_g, out_g = x.shape[1] // groups, w.shape[1]
    out = np.zeros((x.shape[0], out_g * groups, *full))
    for g in range(groups):
        xg, wg = x[:, g * in_g:(g + 1) * in_g], w[g * in_g:(g + 1) * in_g]
        for offset in itertools.product(*map(range, kernel)):
            target = tuple(slice(o * d, o * d + (n - 1) * s + 1, s)
                           for o, d, n, s in zip(offset, dilation, spatial, stride))
            out[(slice(None), slice(g * out_g, (g + 1) * out_g)) + target] += np.einsum(
                "nc...,co->no...", xg, wg[(slice(None),) * 2 + offset])
    out = out[(slice(None),) * 2 + tuple(slice(p, f - p) for p, f in zip(pad, full))]
    return out if b is None else out + b.reshape((1, -1) + (1,) * len(kernel))


def pool_nd(x, kernel, stride, pad, pool_type, ceil_mode=False, count_include_pad=True):
    """N-d pooling with MXNet's semantics (windows clipped to the padded extent; ``count_include_pad``
    divides by the window inside the padded extent, else by the valid elements)."""
    spatial = x.shape[2:]
    out_size = [_pool_out(n, k, s, p, ceil_mode) for n, k, s, p in zip(spatial, kernel, stride, pad)]
    out = np.zeros(x.shape[:2] + tuple(out_size))
    axes = tuple(range(2, x.ndim))
    for position in itertools.product(*map(range, out_size)):
        lo = [i * s - p for i, s, p in zip(position, stride, pad)]
        hi = [min(a + k, n + p) for a, k, n, p in zip(lo, kernel, spatial, pad)]
        lo_in, hi_in = [max(a, 0) for a in lo], [min(b, n) for b, n in zip(hi, spatial)]
        window = x[(slice(None),) * 2 + tuple(slice(a, b) for a, b in zip(lo_in, hi_in))]
        if pool_type == "max":
            out[(slice(None),) * 2 + position] = window.max(axis=axes)
        else:
            size = math.prod(np.subtract(hi, lo)) if count_include_pad else math.prod(np.subtract(hi_in, lo_in))
            out[(slice(None),) * 2 + position] = window.sum(axis=axes) / size
    return out


def group_norm(x, gamma, beta, groups, eps):
    """x (N, C, ...): each sample normalised over each group of C/groups channels and all spatial axes."""
    grouped = x.reshape(x.shape[0], groups, -1)
    y = (grouped - grouped.mean(-1, keepdims=True)) / np.sqrt(grouped.var(-1, keepdims=True) + eps)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return y.reshape(x.shape) * gamma.reshape(shape) + beta.reshape(shape)


def instance_norm(x, gamma, beta, eps, axis=1):
    """Each (sample, channel) normalised over the axes that are neither batch nor ``axis``."""
    axis = axis % x.ndim
    axes = tuple(i for i in range(1, x.ndim) if i != axis)
    shape = [1] * x.ndim
    shape[axis] = -1
    y = (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)
    return y * gamma.reshape(shape) + beta.reshape(shape)


_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
_erf = np.vectorize(math.erf)

ACTIVATIONS = {
    "leaky_relu": lambda x: np.where(x >= 0, x, 0.1 * x),
    "elu": lambda x: np.where(x > 0, x, 0.7 * (np.exp(x) - 1)),
    "selu": lambda x: _SELU_SCALE * np.where(x > 0, x, _SELU_ALPHA * (np.exp(x) - 1)),
    "gelu_erf": lambda x: 0.5 * x * (1 + _erf(x / np.sqrt(2))),
    "gelu_tanh": lambda x: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))),
    "silu": lambda x: x * _sigmoid(x),
    "swish": lambda x: x * _sigmoid(1.5 * x),
}


def prelu(x, alpha):
    shape = (1, -1) + (1,) * (x.ndim - 2) if alpha.size > 1 else (1,) * x.ndim
    return np.where(x >= 0, x, alpha.reshape(shape) * x)


def pixel_shuffle(x, factors):
    """Input channel ``c * prod(factors) + r`` fills output channel c at offset ``unravel(r, factors)``."""
    block = math.prod(factors)
    out = np.zeros((x.shape[0], x.shape[1] // block) + tuple(s * f for s, f in zip(x.shape[2:], factors)))
    for channel in range(x.shape[1]):
        target, rest = divmod(channel, block)
        offset = np.unravel_index(rest, factors)
        out[(slice(None), target) + tuple(slice(o, None, f) for o, f in zip(offset, factors))] = x[:, channel]
    return out


def dense(x, a, name):
    """``x @ W.T + b`` with the parameters ``name.weight`` / ``name.bias`` of ``a``."""
    y = x @ a[f"{name}.weight"].T
    return y + a[f"{name}.bias"] if f"{name}.bias" in a else y


def multi_head_attention(query, key, value, a, heads, prefix="", mask=None):
    """Projections ``{prefix}query_proj`` etc. from ``a``; ``mask`` broadcastable to (B, heads, T, S)."""
    q, k, v = (dense(x, a, prefix + name) for x, name in
               ((query, "query_proj"), (key, "key_proj"), (value, "value_proj")))
    (batch, t, units), s = q.shape, k.shape[1]
    size = units // heads
    q = q.reshape(batch, t, heads, size).transpose(0, 2, 1, 3)
    k = k.reshape(batch, s, heads, size).transpose(0, 2, 1, 3)
    v = v.reshape(batch, s, heads, size).transpose(0, 2, 1, 3)
    logits = q @ k.transpose(0, 1, 3, 2) / np.sqrt(size)
    if mask is not None:
        logits = np.where(mask, logits, -1e30)
    weights = np.exp(logits - logits.max(-1, keepdims=True))
    weights /= weights.sum(-1, keepdims=True)
    out = (weights @ v).transpose(0, 2, 1, 3).reshape(batch, t, units)
    return dense(out, a, prefix + "out_proj")


def transformer_encoder(x, a, heads, pre_norm, eps, activation, mask=None):
    norm = lambda y, name: layer_norm(y, a[f"{name}.gamma"], a[f"{name}.beta"], eps)  # noqa: E731
    h = norm(x, "attention_norm") if pre_norm else x
    x = x + multi_head_attention(h, h, h, a, heads, "attention.", mask)
    if not pre_norm:
        x = norm(x, "attention_norm")
    h = norm(x, "ffn_norm") if pre_norm else x
    x = x + dense(activation(dense(h, a, "ffn_1")), a, "ffn_2")
    return x if pre_norm else norm(x, "ffn_norm")


# -- recurrent networks ---------------------------------------------------------------
def rnn_step(mode, x, h, c, wi, wh, bi, bh):
    """One step with MXNet's equations; returns (h, c)."""
    gi, gh = x @ wi.T + bi, h @ wh.T + bh
    if mode == "lstm":
        i, f, g, o = np.split(gi + gh, 4, axis=-1)
        c = _sigmoid(f) * c + _sigmoid(i) * np.tanh(g)
        return _sigmoid(o) * np.tanh(c), c
    if mode == "gru":
        (ir, iz, inew), (hr, hz, hnew) = np.split(gi, 3, axis=-1), np.split(gh, 3, axis=-1)
        r, z = _sigmoid(ir + hr), _sigmoid(iz + hz)
        n = np.tanh(inew + r * hnew)
        return (1 - z) * n + z * h, c
    return (np.maximum(gi + gh, 0) if mode == "rnn_relu" else np.tanh(gi + gh)), c


def rnn_layers(mode, x, a, num_layers, bidirectional, h0, c0=None, prefix=""):
    """A multi-layer (bidirectional) recurrent net on x (T, N, C) with parameters ``{prefix}{l|r}{i}_...``.

    Returns (outputs (T, N, D*H), h (L*D, N, H), c or None)."""
    directions = ("l", "r") if bidirectional else ("l",)
    hs, cs = [], []
    for layer in range(num_layers):
        outputs = []
        for d, direction in enumerate(directions):
            p = [a[f"{prefix}{direction}{layer}_{k}"] for k in ("i2h_weight", "h2h_weight", "i2h_bias", "h2h_bias")]
            index = layer * len(directions) + d
            h, c = h0[index], None if c0 is None else c0[index]
            out = [None] * len(x)
            for t in (range(len(x)) if direction == "l" else reversed(range(len(x)))):
                h, c = rnn_step(mode, x[t], h, c, *p)
                out[t] = h
            outputs.append(np.stack(out))
            hs.append(h)
            cs.append(c)
        x = np.concatenate(outputs, axis=-1)
    return x, np.stack(hs), None if c0 is None else np.stack(cs)

