"""MobileNet (Howard et al., 2017): depthwise separable convolutions; and MobileNetV2 (Sandler et al.,
2018): inverted residual blocks with linear bottlenecks."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from .. import nn
from ..block import HybridBlock
from ._common import check_classes, named_builder, no_pretrained

__all__ = ["MobileNet", "get_mobilenet", "mobilenet1_0", "mobilenet0_75", "mobilenet0_5", "mobilenet0_25",
           "InvertedResidual", "MobileNetV2", "get_mobilenet_v2", "mobilenet_v2_1_0", "mobilenet_v2_0_75",
           "mobilenet_v2_0_5", "mobilenet_v2_0_25"]

# MobileNet: (depthwise channels, pointwise channels, stride) of the 13 depthwise separable convolutions
_SEPARABLE = ([(32, 64, 1), (64, 128, 2), (128, 128, 1), (128, 256, 2), (256, 256, 1), (256, 512, 2)]
              + [(512, 512, 1)] * 5 + [(512, 1024, 2), (1024, 1024, 1)])

# Table 2 of the paper: expansion t, output channels c, repeats n, first stride s
_BLOCKS = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
           (6, 320, 1, 1)]


def make_divisible(value: float, divisor: int = 8) -> int:
    """``value`` rounded to the nearest multiple of ``divisor`` (at least ``divisor``), rounded up once
    more if that loses over 10%: the channel rounding of the paper's reference implementation."""
    rounded = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return rounded + divisor if rounded < 0.9 * value else rounded


class _ReLU6(HybridBlock):
    """``min(max(x, 0), 6)``."""

    def forward(self, x):
        return jnp.clip(x, 0, 6)

    def __repr__(self) -> str:
        return "ReLU6()"


def _conv_bn(out: nn.HybridSequential, channels: int, kernel: int, stride: int, in_channels: int,
             groups: int = 1, relu6: bool = True, relu: bool = False) -> None:
    out.add(nn.Conv2D(channels, kernel, strides=stride, padding=kernel // 2, groups=groups, use_bias=False,
                      in_channels=in_channels),
            nn.BatchNorm(in_channels=channels))
    if relu6:
        out.add(_ReLU6())
    elif relu:
        out.add(nn.Activation("relu"))


class MobileNet(HybridBlock):
    """MobileNet: a 3x3 convolution with stride 2, 13 depthwise separable convolutions (a 3x3 depthwise
    and a 1x1 pointwise convolution, each with BatchNorm and ReLU), global average pooling and
    ``output = Dense(classes)`` (Gluon's layer layout and structural names).

    Args:
        multiplier: width multiplier; every layer has ``int(channels * multiplier)`` channels.
        classes: number of outputs.
        in_channels: image channels.
    Input ``(N, in_channels, H, W)`` (224x224 in the paper); output ``(N, classes)``. Children:
    ``features``, ``output``. Raises ValueError for ``multiplier <= 0`` or bad ``classes``.
    """

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, in_channels: int = 3):
        super().__init__()
        if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or multiplier <= 0:
            raise ValueError(f"MobileNet: multiplier must be a positive number, got {multiplier!r}")
        check_classes("MobileNet", classes)
        self.features = nn.HybridSequential()
        channels = int(32 * multiplier)
        _conv_bn(self.features, channels, 3, 2, in_channels, relu6=False, relu=True)
        for depthwise, pointwise, stride in _SEPARABLE:
            depthwise, pointwise = int(depthwise * multiplier), int(pointwise * multiplier)
            _conv_bn(self.features, depthwise, 3, stride, channels, groups=depthwise, relu6=False, relu=True)
            _conv_bn(self.features, pointwise, 1, 1, depthwise, relu6=False, relu=True)
            channels = pointwise
        self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
        self.output = nn.Dense(classes, in_units=channels)

    def forward(self, x):
        return self.output(self.features(x))


def get_mobilenet(multiplier: float, pretrained: bool = False, root: Any = None,
                  ctx: Any = None, device: Any = None, **kwargs: Any) -> MobileNet:
    """MobileNet with width ``multiplier``; ``kwargs`` go to :class:`MobileNet`. Raises ValueError for
    ``pretrained=True`` (``root``, ``ctx`` and ``device`` are accepted without effect)."""
    no_pretrained(f"mobilenet{multiplier}", pretrained, root, ctx, device)
    return MobileNet(multiplier, **kwargs)


def _named_v1(multiplier: float) -> Any:
    return named_builder(f"mobilenet{str(multiplier).replace('.', '_')}",
                         f"MobileNet with width multiplier {multiplier}; keyword arguments as :class:`MobileNet`.",
                         get_mobilenet, multiplier=multiplier)


mobilenet1_0, mobilenet0_75, mobilenet0_5, mobilenet0_25 = (_named_v1(m) for m in (1.0, 0.75, 0.5, 0.25))


class InvertedResidual(HybridBlock):
    """1x1 expansion to ``in_channels * expansion`` channels (skipped when ``expansion == 1``), 3x3
    depthwise convolution with ``stride``, linear 1x1 projection to ``channels``; BatchNorm after each,
    ReLU6 after the first two. The input is added when ``stride == 1`` and the channels agree.

    Input ``(N, in_channels, H, W)``; output ``(N, channels, ceil(H / stride), ceil(W / stride))``.
    Children: ``body``.
    """

    def __init__(self, in_channels: int, channels: int, stride: int, expansion: int):
        super().__init__()
        hidden = int(round(in_channels * expansion))
        self._residual = stride == 1 and in_channels == channels
        self.body = nn.HybridSequential()
        if expansion != 1:
            _conv_bn(self.body, hidden, 1, 1, in_channels)
        _conv_bn(self.body, hidden, 3, stride, hidden, groups=hidden)
        _conv_bn(self.body, channels, 1, 1, hidden, relu6=False)

    def forward(self, x):
        y = self.body(x)
        return x + y if self._residual else y


class MobileNetV2(HybridBlock):
    """MobileNetV2: a 3x3 convolution with stride 2, 17 inverted residual blocks (Table 2 of the paper), a
    1x1 convolution to 1280 channels, global average pooling, dropout 0.2 and a Dense output.

    Args:
        multiplier: width multiplier; every layer's channels are scaled by it and rounded to a multiple of 8
            (the last convolution keeps 1280 channels for ``multiplier <= 1``).
        classes: number of outputs.
        in_channels: image channels (0: inferred at the first call).
    Input ``(N, C, H, W)`` (224x224 in the paper; the stride is 32); output ``(N, classes)``.
    Children: ``features``, ``output``. Raises ValueError for ``multiplier <= 0`` or bad ``classes``.
    """

    def __init__(self, multiplier: float = 1.0, classes: int = 1000, in_channels: int = 0):
        super().__init__()
        if isinstance(multiplier, bool) or not isinstance(multiplier, (int, float)) or multiplier <= 0:
            raise ValueError(f"MobileNetV2: multiplier must be a positive number, got {multiplier!r}")
        check_classes("MobileNetV2", classes)
        channels = make_divisible(32 * multiplier)
        last = make_divisible(1280 * max(1.0, multiplier))
        self.features = nn.HybridSequential()
        _conv_bn(self.features, channels, 3, 2, in_channels)
        for expansion, width, repeats, stride in _BLOCKS:
            width = make_divisible(width * multiplier)
            for i in range(repeats):
                self.features.add(InvertedResidual(channels, width, stride if i == 0 else 1, expansion))
                channels = width
        _conv_bn(self.features, last, 1, 1, channels)
        self.features.add(nn.GlobalAvgPool2D(), nn.Flatten())
        self.output = nn.HybridSequential()
        self.output.add(nn.Dropout(0.2), nn.Dense(classes, in_units=last))

    def forward(self, x):
        return self.output(self.features(x))


def get_mobilenet_v2(multiplier: float, pretrained: bool = False, root: Any = None,
                     ctx: Any = None, device: Any = None, **kwargs: Any) -> MobileNetV2:
    """MobileNetV2 with width ``multiplier``; ``kwargs`` go to :class:`MobileNetV2`. Raises ValueError
    for ``pretrained=True``; ``root``, ``ctx`` and ``device`` are accepted without effect."""
    no_pretrained(f"mobilenetv2_{multiplier}", pretrained, root, ctx, device)
    return MobileNetV2(multiplier, **kwargs)


def _named(multiplier: float) -> Any:
    return named_builder(f"mobilenet_v2_{str(multiplier).replace('.', '_')}",
                         f"MobileNetV2 with width multiplier {multiplier}; keyword arguments as :class:`MobileNetV2`.",
                         get_mobilenet_v2, multiplier=multiplier)


mobilenet_v2_1_0, mobilenet_v2_0_75, mobilenet_v2_0_5, mobilenet_v2_0_25 = (
    _named(m) for m in (1.0, 0.75, 0.5, 0.25))
