"""Convolution, transposed convolution, pooling, padding and pixel-shuffle layers (1-D, 2-D, 3-D)."""
from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp

from ..block import HybridBlock
from ..errors import ShapeError
from ..graph import layer_ops
from ..parameter import Parameter
from .activations import Activation
from .basic_layers import as_float, check_non_negative_int, check_positive_int

__all__ = ["Conv1D", "Conv2D", "Conv3D", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D",
           "AvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D", "GlobalAvgPool1D",
           "GlobalAvgPool2D", "GlobalAvgPool3D", "Conv1DTranspose", "Conv2DTranspose", "Conv3DTranspose",
           "ReflectionPad2D", "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D"]

_LAYOUTS = {1: ("NCW", "NWC"), 2: ("NCHW", "NHWC"), 3: ("NCDHW", "NDHWC")}


def _tuple(layer: str, name: str, value: Any, ndim: int, minimum: int) -> tuple[int, ...]:
    values = (value,) * ndim if isinstance(value, int) else tuple(value)
    if len(values) != ndim or any(not isinstance(v, int) or v < minimum for v in values):
        raise ValueError(f"{layer}: {name} must be an int or a tuple of {ndim} ints >= {minimum}, got {value!r}")
    return values


def _check_layout(layer: str, layout: str, ndim: int) -> str:
    if layout not in _LAYOUTS[ndim]:
        raise ValueError(f"{layer}: layout must be one of {_LAYOUTS[ndim]}, got {layout!r}")
    return layout


def _check_rank(layout: str, x) -> None:
    if x.ndim != len(layout):
        raise ShapeError(f"expected a {len(layout)}-D input in layout {layout!r}, got shape {x.shape}")


class _Conv(HybridBlock):
    """N-d convolution; ``weight`` is ``(channels, in_channels // groups, *kernel)`` for
    channels-first layouts and ``(channels, *kernel, in_channels // groups)`` for channels-last."""

    _ndim = 2

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                 groups: int = 1, layout: str | None = None, activation: str | None = None, use_bias: bool = True,
                 weight_initializer: Any = None, bias_initializer: Any = "zeros", in_channels: int = 0,
                 dtype: Any = "float32"):
        super().__init__()
        name, nd = type(self).__name__, self._ndim
        self._channels = check_positive_int(name, "channels", channels)
        self._in_channels = check_non_negative_int(name, "in_channels", in_channels)
        self._groups = check_positive_int(name, "groups", groups)
        self._kernel = _tuple(name, "kernel_size", kernel_size, nd, 1)
        self._strides = _tuple(name, "strides", strides, nd, 1)
        self._padding = _tuple(name, "padding", padding, nd, 0)
        self._dilation = _tuple(name, "dilation", dilation, nd, 1)
        self._layout = _check_layout(name, layout or _LAYOUTS[nd][0], nd)
        if channels % groups or in_channels % groups:
            raise ValueError(f"{name}: channels ({channels}) and in_channels ({in_channels}) must be divisible "
                             f"by groups ({groups})")
        self.weight = Parameter("weight", shape=self._weight_shape(in_channels), dtype=dtype,
                                init=weight_initializer, allow_deferred_init=True)
        self.bias = Parameter("bias", shape=(channels,), dtype=dtype, init=bias_initializer,
                              allow_deferred_init=True) if use_bias else None
        self.act = Activation(activation) if activation is not None else None

    def _weight_shape(self, in_channels: int) -> tuple[int, ...]:
        per_group = in_channels // self._groups
        if self._layout.index("C") == 1:
            return (self._channels, per_group) + self._kernel
        return (self._channels,) + self._kernel + (per_group,)

    def _input_channels(self, x) -> int:
        _check_rank(self._layout, x)
        channels = x.shape[self._layout.index("C")]
        if channels % self._groups:
            raise ShapeError(f"input channels ({channels}) must be divisible by groups ({self._groups})")
        return channels

    def _weight_in_channels(self) -> int:
        """Input channels according to the weight's shape (0 while unknown)."""
        return self.weight.shape[1 if self._layout.index("C") == 1 else -1] * self._groups

    def infer_shape(self, x, *args) -> None:
        self.weight.shape = self._weight_shape(self._input_channels(x))

    def forward(self, x):
        channels = self._input_channels(x)
        expected = self._weight_in_channels()
        if expected and channels != expected:
            raise ShapeError(f"expected {expected} input channels (layout {self._layout}), got shape {x.shape}")
        weight = self.weight.data()
        y = self._apply(as_float(x, weight.dtype), weight, self.bias.data() if self.bias is not None else None)
        return self.act(y) if self.act is not None else y

    def _apply(self, x, weight, bias):
        return layer_ops.convolution(x, weight, bias, strides=self._strides, padding=self._padding,
                                     dilation=self._dilation, groups=self._groups, layout=self._layout)

    def __repr__(self) -> str:
        in_channels = self._weight_in_channels() or None
        extras = "" if self.bias is not None else ", bias=False"
        extras += f", {self.act!r}" if self.act is not None else ""
        if any(d != 1 for d in self._dilation):
            extras += f", dilation={self._dilation}"
        if self._groups != 1:
            extras += f", groups={self._groups}"
        return (f"{type(self).__name__}({in_channels} -> {self._channels}, kernel_size={self._kernel}, "
                f"stride={self._strides}, padding={self._padding}{extras})")


class Conv1D(_Conv):
    """1-D convolution over ``(N, C, W)`` (or ``NWC``)."""
    _ndim = 1


class Conv2D(_Conv):
    """2-D convolution over ``(N, C, H, W)`` (or ``NHWC``)."""
    _ndim = 2


class Conv3D(_Conv):
    """3-D convolution over ``(N, C, D, H, W)`` (or ``NDHWC``)."""
    _ndim = 3


class _ConvTranspose(_Conv):
    """N-d transposed convolution ("deconvolution"), the adjoint of ``_Conv`` with the same arguments.

    ``weight`` is ``(in_channels, channels // groups, *kernel)`` for channels-first layouts (Gluon's
    layout) and ``(in_channels, *kernel, channels // groups)`` for channels-last. Each spatial output
    size is ``(in - 1) * stride - 2 * padding + dilation * (kernel - 1) + output_padding + 1``;
    ``output_padding`` (extra size on the far side) must be smaller than the stride or the dilation.
    """

    def __init__(self, channels: int, kernel_size: Any, strides: Any = 1, padding: Any = 0,
                 output_padding: Any = 0, dilation: Any = 1, groups: int = 1, layout: str | None = None,
                 activation: str | None = None, use_bias: bool = True, weight_initializer: Any = None,
                 bias_initializer: Any = "zeros", in_channels: int = 0, dtype: Any = "float32"):
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout, activation, use_bias,
                         weight_initializer, bias_initializer, in_channels, dtype)
        name = type(self).__name__
        self._output_padding = _tuple(name, "output_padding", output_padding, self._ndim, 0)
        if any(a >= max(s, d) for a, s, d in zip(self._output_padding, self._strides, self._dilation)):
            raise ValueError(f"{name}: output_padding {self._output_padding} must be smaller than strides "
                             f"{self._strides} or dilation {self._dilation} in every dimension")

    def _weight_shape(self, in_channels: int) -> tuple[int, ...]:
        per_group = self._channels // self._groups
        if self._layout.index("C") == 1:
            return (in_channels, per_group) + self._kernel
        return (in_channels,) + self._kernel + (per_group,)

    def _weight_in_channels(self) -> int:
        return self.weight.shape[0]

    def _apply(self, x, weight, bias):
        spatial = [x.shape[i] for i, c in enumerate(self._layout) if c not in "NC"]
        out = [(n - 1) * s - 2 * p + d * (k - 1) + a + 1 for n, s, p, d, k, a in
               zip(spatial, self._strides, self._padding, self._dilation, self._kernel, self._output_padding)]
        if any(o <= 0 for o in out):
            raise ShapeError(f"input of shape {x.shape} gives an empty output {tuple(out)}; reduce padding "
                             f"{self._padding}")
        return layer_ops.conv_transpose(x, weight, bias, strides=self._strides, padding=self._padding,
                                        output_padding=self._output_padding, dilation=self._dilation,
                                        groups=self._groups, layout=self._layout)


class Conv1DTranspose(_ConvTranspose):
    """1-D transposed convolution over ``(N, C, W)`` (or ``NWC``)."""
    _ndim = 1


class Conv2DTranspose(_ConvTranspose):
    """2-D transposed convolution over ``(N, C, H, W)`` (or ``NHWC``)."""
    _ndim = 2


class Conv3DTranspose(_ConvTranspose):
    """3-D transposed convolution over ``(N, C, D, H, W)`` (or ``NDHWC``)."""
    _ndim = 3


class ReflectionPad2D(HybridBlock):
    """Pad the last two axes of ``(N, C, H, W)`` by reflecting the input at its borders (edge not repeated).

    Args:
        padding: an int (all four sides), a tuple ``(top, bottom, left, right)``, or Gluon's
            8-tuple ``pad_width`` ``(0, 0, 0, 0, top, bottom, left, right)``.
    Each padding must be smaller than the padded axis (ShapeError otherwise).
    """

    def __init__(self, padding: Any = 0):
        super().__init__()
        pads = (padding,) * 4 if isinstance(padding, int) else tuple(padding)
        if len(pads) == 8 and not any(pads[:4]):
            pads = pads[4:]
        if len(pads) != 4 or any(not isinstance(p, int) or isinstance(p, bool) or p < 0 for p in pads):
            raise ValueError("ReflectionPad2D: padding must be a non-negative int, 4 ints (top, bottom, left, "
                             f"right) or 8 ints (0, 0, 0, 0, top, bottom, left, right), got {padding!r}")
        self._pads = pads

    def forward(self, x):
        _check_rank("NCHW", x)
        top, bottom, left, right = self._pads
        if max(top, bottom) >= x.shape[2] or max(left, right) >= x.shape[3]:
            raise ShapeError(f"reflection padding {self._pads} must be smaller than the padded axes of {x.shape}")
        return jnp.pad(x, ((0, 0), (0, 0), (top, bottom), (left, right)), mode="reflect")

    def __repr__(self) -> str:
        return f"ReflectionPad2D(padding={self._pads})"


class _PixelShuffle(HybridBlock):
    """Move ``prod(factor)`` channel blocks into the spatial axes: ``(N, C*f1*...*fd, X1, ..., Xd)`` ->
    ``(N, C, X1*f1, ..., Xd*fd)``; input channel ``c*f1*...*fd + offset`` lands at that spatial offset."""

    _ndim = 2

    def __init__(self, factor: Any):
        super().__init__()
        self._factors = _tuple(type(self).__name__, "factor", factor, self._ndim, 1)

    def forward(self, x):
        nd, factors = self._ndim, self._factors
        block = math.prod(factors)
        if x.ndim != nd + 2 or x.shape[1] % block:
            raise ShapeError(f"expected a {nd + 2}-D input (N, C, ...) whose channels are divisible by "
                             f"{block} (factor {factors}), got shape {x.shape}")
        n, c, spatial = x.shape[0], x.shape[1] // block, x.shape[2:]
        y = x.reshape((n, c) + factors + spatial)
        # (N, C, f1..fd, X1..Xd) -> (N, C, X1, f1, ..., Xd, fd)
        order = [0, 1] + [i for d in range(nd) for i in (2 + nd + d, 2 + d)]
        return y.transpose(order).reshape((n, c) + tuple(s * f for s, f in zip(spatial, factors)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._factors})"


class PixelShuffle1D(_PixelShuffle):
    """Pixel shuffle over ``(N, C*f, W)`` -> ``(N, C, W*f)``."""
    _ndim = 1


class PixelShuffle2D(_PixelShuffle):
    """Pixel shuffle (Shi et al., 2016) over ``(N, C*f1*f2, H, W)`` -> ``(N, C, H*f1, W*f2)``."""
    _ndim = 2


class PixelShuffle3D(_PixelShuffle):
    """Pixel shuffle over ``(N, C*f1*f2*f3, D, H, W)`` -> ``(N, C, D*f1, H*f2, W*f3)``."""
    _ndim = 3


class _Pooling(HybridBlock):
    _ndim = 2
    _pool_type = "max"

    def __init__(self, pool_size: Any = 2, strides: Any = None, padding: Any = 0, layout: str | None = None,
                 ceil_mode: bool = False, count_include_pad: bool = True):
        super().__init__()
        name, nd = type(self).__name__, self._ndim
        self._kernel = _tuple(name, "pool_size", pool_size, nd, 1)
        self._strides = self._kernel if strides is None else _tuple(name, "strides", strides, nd, 1)
        self._padding = _tuple(name, "padding", padding, nd, 0)
        if any(p > k // 2 for p, k in zip(self._padding, self._kernel)):
            raise ValueError(f"{name}: padding {self._padding} must be at most half the pool size {self._kernel}")
        self._layout = _check_layout(name, layout or _LAYOUTS[nd][0], nd)
        self._ceil_mode, self._count_include_pad = ceil_mode, count_include_pad

    def forward(self, x):
        _check_rank(self._layout, x)
        spatial = [x.shape[i] for i, c in enumerate(self._layout) if c not in "NC"]
        if any(s + 2 * p < k for s, p, k in zip(spatial, self._padding, self._kernel)):
            raise ShapeError(f"pool size {self._kernel} is larger than the padded input {x.shape}")
        return layer_ops.pooling(x, pool_type=self._pool_type, kernel=self._kernel, strides=self._strides,
                                 padding=self._padding, ceil_mode=self._ceil_mode,
                                 count_include_pad=self._count_include_pad, layout=self._layout)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(size={self._kernel}, stride={self._strides}, padding={self._padding}, "
                f"ceil_mode={self._ceil_mode})")


class _GlobalPooling(HybridBlock):
    _ndim = 2
    _pool_type = "max"

    def __init__(self, layout: str | None = None):
        super().__init__()
        self._layout = _check_layout(type(self).__name__, layout or _LAYOUTS[self._ndim][0], self._ndim)

    def forward(self, x):
        _check_rank(self._layout, x)
        return layer_ops.global_pooling(x, pool_type=self._pool_type, layout=self._layout)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(layout={self._layout})"


def _make(base: type, name: str, ndim: int, pool_type: str, doc: str) -> type:
    return type(name, (base,), {"_ndim": ndim, "_pool_type": pool_type, "__doc__": doc, "__module__": __name__})


MaxPool1D = _make(_Pooling, "MaxPool1D", 1, "max", "Max pooling over ``(N, C, W)``.")
MaxPool2D = _make(_Pooling, "MaxPool2D", 2, "max", "Max pooling over ``(N, C, H, W)``; strides default to pool_size.")
MaxPool3D = _make(_Pooling, "MaxPool3D", 3, "max", "Max pooling over ``(N, C, D, H, W)``.")
AvgPool1D = _make(_Pooling, "AvgPool1D", 1, "avg", "Average pooling over ``(N, C, W)``.")
AvgPool2D = _make(_Pooling, "AvgPool2D", 2, "avg",
                  "Average pooling over ``(N, C, H, W)``; ``count_include_pad`` counts padded zeros.")
AvgPool3D = _make(_Pooling, "AvgPool3D", 3, "avg", "Average pooling over ``(N, C, D, H, W)``.")
GlobalMaxPool1D = _make(_GlobalPooling, "GlobalMaxPool1D", 1, "max", "Max over W, output ``(N, C, 1)``.")
GlobalMaxPool2D = _make(_GlobalPooling, "GlobalMaxPool2D", 2, "max", "Max over H, W, output ``(N, C, 1, 1)``.")
GlobalMaxPool3D = _make(_GlobalPooling, "GlobalMaxPool3D", 3, "max", "Max over D, H, W.")
GlobalAvgPool1D = _make(_GlobalPooling, "GlobalAvgPool1D", 1, "avg", "Mean over W, output ``(N, C, 1)``.")
GlobalAvgPool2D = _make(_GlobalPooling, "GlobalAvgPool2D", 2, "avg", "Mean over H, W, output ``(N, C, 1, 1)``.")
GlobalAvgPool3D = _make(_GlobalPooling, "GlobalAvgPool3D", 3, "avg", "Mean over D, H, W.")
