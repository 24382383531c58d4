"""SqueezeNet 1.0 and 1.1 (Iandola et al., 2016): fire modules of a 1x1 squeeze and concatenated 1x1 and
3x3 expands."""
from __future__ import annotations

from typing import Any

from .. import nn
from ..block import HybridBlock
from ._common import check_classes, no_pretrained

__all__ = ["SqueezeNet", "get_squeezenet", "squeezenet1_0", "squeezenet1_1"]

# version -> (stem channels, stem kernel, the features after the stem: ints are fire modules' squeeze
# channels (expands are 4x that), "pool" a 3x3 max pooling with stride 2)
_SPECS = {"1.0": (96, 7, [16, 16, 32, "pool", 32, 48, 48, 64, "pool", 64]),
          "1.1": (64, 3, [16, 16, "pool", 32, 32, "pool", 48, 48, 64, 64])}


def _conv_relu(channels: int, kernel: int, in_channels: int, padding: int = 0) -> nn.HybridSequential:
    out = nn.HybridSequential()
    out.add(nn.Conv2D(channels, kernel, padding=padding, in_channels=in_channels), nn.Activation("relu"))
    return out


def fire(in_channels: int, squeeze: int, expand1x1: int, expand3x3: int) -> nn.HybridSequential:
    """A fire module: ``squeeze`` 1x1 convolution and ReLU, then the concatenation (channel axis) of a 1x1
    and a 3x3 expand, each with ReLU. Output channels ``expand1x1 + expand3x3``."""
    out = nn.HybridSequential()
    out.add(_conv_relu(squeeze, 1, in_channels))
    paths = nn.HybridConcatenate(axis=1)
    paths.add(_conv_relu(expand1x1, 1, squeeze), _conv_relu(expand3x3, 3, squeeze, padding=1))
    out.add(paths)
    return out


class SqueezeNet(HybridBlock):
    """SqueezeNet ``version`` ``'1.0'`` or ``'1.1'`` (Gluon's layer layout and structural names).

    Input ``(N, in_channels, 224, 224)``; output ``(N, classes)``: a 1x1 convolution to ``classes``
    channels, ReLU, 13x13 average pooling. Children: ``features``, ``output``.
    Raises ValueError for another version or bad ``classes``.
    """

    def __init__(self, version: str = "1.0", classes: int = 1000, in_channels: int = 3):
        super().__init__()
        if version not in _SPECS:
            raise ValueError(f"SqueezeNet: version must be '1.0' or '1.1', got {version!r}")
        check_classes("SqueezeNet", classes)
        stem, kernel, layout = _SPECS[version]
        self.features = nn.HybridSequential()
        self.features.add(nn.Conv2D(stem, kernel, strides=2, in_channels=in_channels), nn.Activation("relu"),
                          nn.MaxPool2D(3, 2, ceil_mode=True))
        channels = stem
        for item in layout:
            if item == "pool":
                self.features.add(nn.MaxPool2D(3, 2, ceil_mode=True))
            else:
                self.features.add(fire(channels, item, 4 * item, 4 * item))
                channels = 8 * item
        self.features.add(nn.Dropout(0.5))
        self.output = nn.HybridSequential()
        self.output.add(nn.Conv2D(classes, 1, in_channels=channels), nn.Activation("relu"), nn.AvgPool2D(13),
                        nn.Flatten())

    def forward(self, x):
        return self.output(self.features(x))


def get_squeezenet(version: str, pretrained: bool = False, root: Any = None,
                   ctx: Any = None, device: Any = None, **kwargs: Any) -> SqueezeNet:
    """SqueezeNet ``version``; ``kwargs`` go to :class:`SqueezeNet`. Raises ValueError for
    ``pretrained=True`` (``root``, ``ctx`` and ``device`` are accepted without effect)."""
    no_pretrained(f"squeezenet{version}", pretrained, root, ctx, device)
    return SqueezeNet(version, **kwargs)


def squeezenet1_0(**kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.0; keyword arguments as :func:`get_squeezenet`."""
    return get_squeezenet("1.0", **kwargs)


def squeezenet1_1(**kwargs: Any) -> SqueezeNet:
    """SqueezeNet 1.1 (2.4x less computation than 1.0 for the same accuracy); keyword arguments as
    :func:`get_squeezenet`."""
    return get_squeezenet("1.1", **kwargs)
