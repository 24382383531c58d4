"""Independent NumPy reference implementations (float64) of the layers under test."""
import numpy as np


def dense(x, w, b=None, flatten=True):
    x = x.reshape(x.shape[0], -1) if flatten else x
    y = x @ w.T
    return y if b is None else y + b


ACTIVATIONS = {
    "relu": lambda x: np.maximum(x, 0),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "tanh": np.tanh,
    "softrelu": lambda x: np.log1p(np.exp(x)),
    "softsign": lambda x: x / (1 + np.abs(x)),
}


def conv2d(x, w, b, stride, pad, dilation, groups):
    """NCHW convolution, weight (O, I/groups, KH, KW)."""
    n, c, h, wd = x.shape
    o, ig, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad[0], pad[0]), (pad[1], pad[1])))
    oh = (h + 2 * pad[0] - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    ow = (wd + 2 * pad[1] - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    out = np.zeros((n, o, oh, ow))
    per_group = o // groups
    for oc in range(o):
        g = oc // per_group
        for i in range(oh):
            for j in range(ow):
                hs, ws = i * stride[0], j * stride[1]
                patch = xp[:, g * ig:(g + 1) * ig, hs:hs + dilation[0] * (kh - 1) + 1:dilation[0],
                           ws:ws + dilation[1] * (kw - 1) + 1:dilation[1]]
                out[:, oc, i, j] = (patch * w[oc]).sum(axis=(1, 2, 3))
    if b is not None:
        out += b.reshape(1, -1, 1, 1)
    return out


def _pool_out(n, k, s, p, ceil_mode):
    if ceil_mode:
        out = int(np.ceil((n + 2 * p - k) / s)) + 1
        if (out - 1) * s >= n + p:
            out -= 1
        return out
    return (n + 2 * p - k) // s + 1


def pool2d(x, kernel, stride, pad, pool_type, ceil_mode=False, count_include_pad=True):
    """MXNet pooling semantics: windows clipped to the padded extent; avg divides by the window
    size inside the padded extent (count_include_pad) or by the valid elements."""
    n, c, h, w = x.shape
    oh = _pool_out(h, kernel[0], stride[0], pad[0], ceil_mode)
    ow = _pool_out(w, kernel[1], stride[1], pad[1], ceil_mode)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        for j in range(ow):
            hs, ws = i * stride[0] - pad[0], j * stride[1] - pad[1]
            he, we = min(hs + kernel[0], h + pad[0]), min(ws + kernel[1], w + pad[1])
            hs_c, ws_c, he_c, we_c = max(hs, 0), max(ws, 0), min(he, h), min(we, w)
            window = x[:, :, hs_c:he_c, ws_c:we_c]
            if pool_type == "max":
                out[:, :, i, j] = window.max(axis=(2, 3))
            else:
                size = (he - hs) * (we - ws) if count_include_pad else (he_c - hs_c) * (we_c - ws_c)
                out[:, :, i, j] = window.sum(axis=(2, 3)) / size
    return out


def batch_norm_train(x, gamma, beta, eps, axis=1):
    axes = tuple(i for i in range(x.ndim) if i != axis)
    shape = [1] * x.ndim
    shape[axis] = -1
    mean = x.mean(axis=axes)
    var = x.var(axis=axes)
    y = (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape) + beta.reshape(shape)
    return y, mean, var


def batch_norm_infer(x, gamma, beta, mean, var, eps, axis=1):
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps) * gamma.reshape(shape) + beta.reshape(shape)


def layer_norm(x, gamma, beta, eps, axis=-1):
    mean = x.mean(axis=axis, keepdims=True)
    var = x.var(axis=axis, keepdims=True)
    shape = [1] * x.ndim
    shape[axis] = -1
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


def log_softmax(x, axis=-1):
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def numeric_grad(fn, arrays, name, index, eps=1e-4):
    """Central difference of scalar ``fn(arrays)`` w.r.t. ``arrays[name][index]`` (float64)."""
    plus = {k: v.copy() for k, v in arrays.items()}
    minus = {k: v.copy() for k, v in arrays.items()}
    plus[name][index] += eps
    minus[name][index] -= eps
    return (fn(plus) - fn(minus)) / (2 * eps)
