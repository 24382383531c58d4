"""VGG networks (Simonyan & Zisserman, 2015), configurations A (11 layers), B (13), D (16) and E (19),
optionally with BatchNorm after every convolution."""
from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from .. import init, nn
from ..block import HybridBlock
from ..errors import ShapeError
from ._common import check_classes, named_builder, no_pretrained

__all__ = ["VGG", "AdaptiveAvgPool2D", "get_vgg", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn",
           "vgg16_bn", "vgg19_bn"]

# depth -> (convolutions per block, channels per block)
_SPECS = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
          13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
          16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
          19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def _pool_matrix(size_in: int, size_out: int) -> np.ndarray:
    """``(size_out, size_in)``: row ``i`` averages input cells ``floor(i * in / out)`` to
    ``ceil((i + 1) * in / out) - 1``, the windows of adaptive average pooling."""
    matrix = np.zeros((size_out, size_in), np.float32)
    for i in range(size_out):
        start, stop = (i * size_in) // size_out, -((-(i + 1) * size_in) // size_out)
        matrix[i, start:stop] = 1.0 / (stop - start)
    return matrix


class AdaptiveAvgPool2D(HybridBlock):
    """Average pooling of ``(N, C, H, W)`` to ``(N, C, *output_size)`` with windows chosen from the input
    size (cells ``floor(i * H / h)`` to ``ceil((i + 1) * H / h) - 1``), so that the output size is fixed.
    An input smaller than ``output_size`` has its cells repeated. Raises ShapeError for non-4-D input."""

    def __init__(self, output_size: int | tuple[int, int]):
        super().__init__()
        size = (output_size, output_size) if isinstance(output_size, int) else tuple(output_size)
        if len(size) != 2 or any(not isinstance(s, int) or s <= 0 for s in size):
            raise ValueError(f"AdaptiveAvgPool2D: output_size must be a positive int or a pair, got {output_size!r}")
        self._size = size

    def forward(self, x):
        if x.ndim != 4:
            raise ShapeError(f"expected an input (N, C, H, W), got shape {x.shape}")
        if x.shape[2:] == self._size:
            return x
        rows = jnp.asarray(_pool_matrix(x.shape[2], self._size[0]), x.dtype)
        cols = jnp.asarray(_pool_matrix(x.shape[3], self._size[1]), x.dtype)
        return jnp.einsum("ih,nchw,jw->ncij", rows, x, cols)

    def __repr__(self) -> str:
        return f"AdaptiveAvgPool2D(output_size={self._size})"


class VGG(HybridBlock):
    """VGG: blocks of 3x3 convolutions (padding 1, each followed by BatchNorm when ``batch_norm`` and ReLU)
    separated by 2x2 max pooling, then two Dense(4096) layers with ReLU and dropout 0.5, and the output.

    Args:
        layers: convolutions per block (five blocks), e.g. ``[2, 2, 3, 3, 3]`` for VGG-16.
        filters: channels per block, e.g. ``[64, 128, 256, 512, 512]``.
        classes: number of outputs.
        batch_norm: BatchNorm after every convolution.
        in_channels: image channels (0: inferred at the first call).
    The features are average-pooled to 7x7 (``AdaptiveAvgPool2D``; the identity for 224x224 images), so
    the first Dense layer always has ``filters[-1] * 49`` inputs and any input of at least 32x32 works.
    Input ``(N, C, H, W)``; output ``(N, classes)``. Children: ``features``, ``output``.
    """

    def __init__(self, layers: list[int], filters: list[int], classes: int = 1000, batch_norm: bool = False,
                 in_channels: int = 0):
        super().__init__()
        if len(layers) != len(filters):
            raise ValueError(f"VGG: layers and filters must have the same length, got {len(layers)} and "
                             f"{len(filters)}")
        check_classes("VGG", classes)
        self.features = nn.HybridSequential()
        conv_init = init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
        channels = in_channels
        for count, width in zip(layers, filters):
            for _ in range(count):
                self.features.add(nn.Conv2D(width, 3, padding=1, weight_initializer=conv_init,
                                            in_channels=channels))
                if batch_norm:
                    self.features.add(nn.BatchNorm(in_channels=width))
                self.features.add(nn.Activation("relu"))
                channels = width
            self.features.add(nn.MaxPool2D(2, 2))
        self.features.add(AdaptiveAvgPool2D(7),
                          nn.Dense(4096, activation="relu", weight_initializer="normal", in_units=channels * 49),
                          nn.Dropout(0.5),
                          nn.Dense(4096, activation="relu", weight_initializer="normal", in_units=4096),
                          nn.Dropout(0.5))
        self.output = nn.Dense(classes, weight_initializer="normal", in_units=4096)

    def forward(self, x):
        return self.output(self.features(x))


def get_vgg(num_layers: int, pretrained: bool = False, batch_norm: bool = False, root: Any = None, ctx: Any = None,
            device: Any = None, **kwargs: Any) -> VGG:
    """VGG with ``num_layers`` in 11, 13, 16, 19; ``kwargs`` go to :class:`VGG` (``classes``,
    ``in_channels``). Raises ValueError for other depths and for ``pretrained=True``; ``root``, ``ctx`` and
    ``device`` are accepted without effect."""
    if num_layers not in _SPECS:
        raise ValueError(f"get_vgg: num_layers must be one of {sorted(_SPECS)}, got {num_layers!r}")
    no_pretrained(f"vgg{num_layers}{'_bn' if batch_norm else ''}", pretrained, root, ctx, device)
    layers, filters = _SPECS[num_layers]
    return VGG(layers, filters, batch_norm=batch_norm, **kwargs)


def _named(depth: int, batch_norm: bool) -> Any:
    suffix = "_bn" if batch_norm else ""
    doc = f"VGG-{depth}{' with BatchNorm' if batch_norm else ''}; keyword arguments as :func:`get_vgg`."
    return named_builder(f"vgg{depth}{suffix}", doc, get_vgg, num_layers=depth, batch_norm=batch_norm)


vgg11, vgg13, vgg16, vgg19 = (_named(d, False) for d in (11, 13, 16, 19))
vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn = (_named(d, True) for d in (11, 13, 16, 19))
