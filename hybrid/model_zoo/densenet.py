"""DenseNet-121, -161, -169 and -201 (Huang et al., 2017): every layer of a dense block receives the
concatenated outputs of all layers before it."""
from __future__ import annotations

from typing import Any

from .. import nn
from ..block import HybridBlock
from ._common import check_classes, no_pretrained

__all__ = ["DenseNet", "get_densenet", "densenet121", "densenet161", "densenet169", "densenet201"]

# depth -> (initial channels, growth rate, layers per dense block)
_SPECS = {121: (64, 32, [6, 12, 24, 16]), 161: (96, 48, [6, 12, 36, 24]),
          169: (64, 32, [6, 12, 32, 32]), 201: (64, 32, [6, 12, 48, 32])}


def _dense_layer(in_channels: int, growth_rate: int, bn_size: int, dropout: float) -> nn.HybridConcatenate:
    """BN-ReLU-Conv1x1(``bn_size * growth_rate``)-BN-ReLU-Conv3x3(``growth_rate``), concatenated after its
    input on the channel axis."""
    bottleneck = bn_size * growth_rate
    new = nn.HybridSequential()
    new.add(nn.BatchNorm(in_channels=in_channels), nn.Activation("relu"),
            nn.Conv2D(bottleneck, 1, use_bias=False, in_channels=in_channels),
            nn.BatchNorm(in_channels=bottleneck), nn.Activation("relu"),
            nn.Conv2D(growth_rate, 3, padding=1, use_bias=False, in_channels=bottleneck))
    if dropout:
        new.add(nn.Dropout(dropout))
    out = nn.HybridConcatenate(axis=1)
    out.add(nn.Identity(), new)
    return out


def _transition(in_channels: int, channels: int) -> nn.HybridSequential:
    out = nn.HybridSequential()
    out.add(nn.BatchNorm(in_channels=in_channels), nn.Activation("relu"),
            nn.Conv2D(channels, 1, use_bias=False, in_channels=in_channels), nn.AvgPool2D(2, 2))
    return out


class DenseNet(HybridBlock):
    """A DenseNet-BC: a 7x7 convolution with stride 2 and max pooling, dense blocks of ``block_config``
    layers joined by transitions that halve the channels and the resolution, BN-ReLU, 7x7 average pooling
    and ``output = Dense(classes)`` (Gluon's layer layout and structural names).

    Input ``(N, in_channels, 224, 224)``; output ``(N, classes)``. Children: ``features``, ``output``.
    """

    def __init__(self, num_init_features: int, growth_rate: int, block_config: list[int], bn_size: int = 4,
                 dropout: float = 0.0, classes: int = 1000, in_channels: int = 3):
        super().__init__()
        check_classes("DenseNet", classes)
        self.features = nn.HybridSequential()
        self.features.add(nn.Conv2D(num_init_features, 7, strides=2, padding=3, use_bias=False,
                                    in_channels=in_channels),
                          nn.BatchNorm(in_channels=num_init_features), nn.Activation("relu"),
                          nn.MaxPool2D(3, 2, padding=1))
        channels = num_init_features
        for i, layers in enumerate(block_config):
            block = nn.HybridSequential()
            for _ in range(layers):
                block.add(_dense_layer(channels, growth_rate, bn_size, dropout))
                channels += growth_rate
            self.features.add(block)
            if i != len(block_config) - 1:
                self.features.add(_transition(channels, channels // 2))
                channels //= 2
        self.features.add(nn.BatchNorm(in_channels=channels), nn.Activation("relu"), nn.AvgPool2D(7),
                          nn.Flatten())
        self.output = nn.Dense(classes, in_units=channels)

    def forward(self, x):
        return self.output(self.features(x))


def get_densenet(num_layers: int, pretrained: bool = False, root: Any = None,
                 ctx: Any = None, device: Any = None, **kwargs: Any) -> DenseNet:
    """DenseNet-``num_layers`` (121, 161, 169 or 201); ``kwargs`` go to :class:`DenseNet`. Raises
    ValueError for another depth or ``pretrained=True`` (``root``, ``ctx`` and ``device`` are accepted
    without effect)."""
    if num_layers not in _SPECS:
        raise ValueError(f"get_densenet: num_layers must be one of {sorted(_SPECS)}, got {num_layers!r}")
    no_pretrained(f"densenet{num_layers}", pretrained, root, ctx, device)
    init_features, growth, config = _SPECS[num_layers]
    return DenseNet(init_features, growth, config, **kwargs)


def densenet121(**kwargs: Any) -> DenseNet:
    """DenseNet-121; keyword arguments as :func:`get_densenet`."""
    return get_densenet(121, **kwargs)


def densenet161(**kwargs: Any) -> DenseNet:
    """DenseNet-161; keyword arguments as :func:`get_densenet`."""
    return get_densenet(161, **kwargs)


def densenet169(**kwargs: Any) -> DenseNet:
    """DenseNet-169; keyword arguments as :func:`get_densenet`."""
    return get_densenet(169, **kwargs)


def densenet201(**kwargs: Any) -> DenseNet:
    """DenseNet-201; keyword arguments as :func:`get_densenet`."""
    return get_densenet(201, **kwargs)
